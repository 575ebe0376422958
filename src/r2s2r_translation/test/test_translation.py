"""Sim-to-real translation with known answers: a synthetic camera gap (colour, tone, noise,
vignetting) that the translators close on frames they never saw; datasets translated with
labels and timestamps untouched, deterministic, resumable, whole or absent; bad input refused
with one line naming the thing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from r2s2r_dataset.hdf5 import EpisodeDataset, EpisodeWriter, partial_path
from r2s2r_testing.episodes import robot_images, synthetic_episode
from r2s2r_translation.checkpoint import load_translator
from r2s2r_translation.colour import fit_colour_transfer
from r2s2r_translation.dataset import TRANSLATION_KEY, translate_dataset
from r2s2r_translation.diffusion import DiffusionSettings, chunks, edge_control
from r2s2r_translation.frames import TranslationInputError, dataset_cameras, read_frames
from r2s2r_translation.metrics import ImageNetFeatures, kernel_inception_distance, warping_error
from r2s2r_translation.structure import structure_features
from r2s2r_translation.structure_translator import StructureTrainConfig
from r2s2r_translation.train import train_translator
from r2s2r_translation.unpaired import UnpairedTrainConfig

PX = 32
FRAMES = 24


def scene(seed: int) -> np.ndarray:
    """Camera-like frames of one episode: flat coloured blocks (new ones every frame)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([robot_images(rng, 1, PX, "blocks") for _ in range(FRAMES)])


def real_look(frames: np.ndarray, seed: int) -> np.ndarray:
    """The synthetic real camera: white balance, crosstalk, gamma, vignetting, noise."""
    x = (frames.astype(np.float64) / 255.0) ** 2.2
    x = x * np.array([1.15, 1.0, 0.8])
    x = x @ np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]]).T
    v, u = np.mgrid[0:PX, 0:PX]
    r2 = ((u - (PX - 1) / 2) ** 2 + (v - (PX - 1) / 2) ** 2) / (2 * ((PX - 1) / 2) ** 2)
    x = x * (1 - 0.3 * r2)[None, :, :, None]
    x = x + np.random.default_rng(seed).normal(0, 0.004, x.shape)
    return np.clip(np.rint(np.clip(x, 0, 1) ** (1 / 2.6) * 255), 0, 255).astype(np.uint8)


def write(path: Path, source: str, seeds: list[int], look: bool) -> Path:
    with EpisodeWriter(path) as writer:
        for seed in seeds:
            episode = synthetic_episode(seed, FRAMES, source=source, image_px=PX)
            images = {
                key: real_look(scene(seed * 7 + k), seed) if look else scene(seed * 7 + k)
                for k, key in enumerate(episode.images)
            }
            writer.append(replace(episode, images=images))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("translation")
    return {
        "real": write(root / "real.hdf5", "real", list(range(10)), look=True),
        "sim": write(root / "sim.hdf5", "sim", list(range(100, 106)), look=False),
        # the same sim scenes as the real camera would see them: the known answer
        "sim_as_real": write(root / "sim_real.hdf5", "real", list(range(100, 106)), look=True),
        "root": root,
    }


@pytest.fixture(scope="module")
def structure_ckpt(data: dict[str, Path]) -> Path:
    config = StructureTrainConfig(
        steps=600, batch_size=16, eval_every=100, width=8, learning_rate=5e-3
    )
    return train_translator(
        data["real"], "structure", data["root"] / "structure", PX, None, config, stride=1
    )


@pytest.fixture(scope="module")
def colour_ckpt(data: dict[str, Path]) -> Path:
    return train_translator(
        data["real"], "colour", data["root"] / "colour", PX, data["sim"], stride=1
    )


def paired_error(data: dict[str, Path], translated: np.ndarray | None, key: str) -> float:
    truth = read_frames(data["sim_as_real"], key).astype(float)
    frames = read_frames(data["sim"], key) if translated is None else translated
    return float(np.abs(frames.astype(float) - truth).mean())


@pytest.mark.parametrize("which", ["structure", "colour"])
def test_a_translator_closes_a_synthetic_camera_gap_on_unseen_scenes(
    data: dict[str, Path], structure_ckpt: Path, colour_ckpt: Path, which: str
) -> None:
    # The known answer: the same scenes seen by the synthetic real camera (never trained on).
    translator = load_translator(structure_ckpt if which == "structure" else colour_ckpt)
    for key in ("head_camera_rgb", "hand_camera_rgb"):
        before = paired_error(data, None, key)
        after = paired_error(data, translator.translate(key, read_frames(data["sim"], key)), key)
        assert after < 0.7 * before, (key, before, after)


def test_structure_is_invariant_to_gain_and_gamma() -> None:
    frames = scene(3)
    x = (frames.astype(np.float64) / 255.0) ** 1.3 * np.array([1.2, 0.9, 1.0])
    other = np.clip(np.rint(x * 255), 0, 255).astype(np.uint8)
    a, b = structure_features(frames), structure_features(other)
    assert np.abs(a - b).mean() < 0.1 * np.abs(a).mean()


def test_the_colour_transfer_recovers_a_global_colour_map() -> None:
    rng = np.random.default_rng(0)
    sim = rng.integers(0, 256, (20, 16, 16, 3), dtype=np.uint8)
    real = np.clip(sim.astype(float) * [0.8, 1.0, 1.1] + 10, 0, 255).astype(np.uint8)
    transfer = fit_colour_transfer(real, sim)
    assert np.abs(transfer.apply(sim).astype(int) - real).mean() < 2.0


def test_a_translated_dataset_keeps_labels_and_timestamps_and_says_where_it_came_from(
    data: dict[str, Path], structure_ckpt: Path, tmp_path: Path
) -> None:
    translator = load_translator(structure_ckpt)
    out = translate_dataset(data["sim"], tmp_path / "translated.hdf5", translator)
    again = translate_dataset(data["sim"], tmp_path / "again.hdf5", load_translator(structure_ckpt))
    with (
        EpisodeDataset(data["sim"]) as source,
        EpisodeDataset(out) as result,
        EpisodeDataset(again) as repeat,
    ):
        assert len(source) == len(result)
        for index in range(len(source)):
            a, b, c = source.episode(index), result.episode(index), repeat.episode(index)
            assert np.array_equal(a.actions, b.actions)
            assert np.array_equal(a.timestamps_s, b.timestamps_s)
            assert np.array_equal(a.joint_pos_rad, b.joint_pos_rad)
            assert np.array_equal(a.extra_obs["object_track"], b.extra_obs["object_track"])
            assert not np.array_equal(a.images["head_camera_rgb"], b.images["head_camera_rgb"])
            for key in b.images:
                assert np.array_equal(b.images[key], c.images[key])  # deterministic
            provenance = b.metadata.provenance[TRANSLATION_KEY]
            assert provenance["translator_sha256"] == translator.identity
            assert provenance["source_episode"] == index
            assert b.metadata.source == "sim"


def test_a_stopped_translation_resumes_and_another_translators_partial_is_refused(
    data: dict[str, Path], structure_ckpt: Path, colour_ckpt: Path, tmp_path: Path
) -> None:
    translator = load_translator(structure_ckpt)
    out = tmp_path / "t.hdf5"
    calls: list[int] = []

    def stop_after_two(done: int, total: int) -> None:
        calls.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        translate_dataset(data["sim"], out, translator, stop_after_two)
    assert not out.exists() and partial_path(out).exists()
    with pytest.raises(TranslationInputError, match="another translator"):
        translate_dataset(data["sim"], out, load_translator(colour_ckpt))
    resumed: list[int] = []
    translate_dataset(data["sim"], out, translator, lambda done, total: resumed.append(done))
    assert resumed[0] == 3 and not partial_path(out).exists()
    reference = translate_dataset(data["sim"], tmp_path / "whole.hdf5", translator)
    with EpisodeDataset(out) as a, EpisodeDataset(reference) as b:
        for index in range(len(a)):
            assert np.array_equal(
                a.episode(index).images["hand_camera_rgb"],
                b.episode(index).images["hand_camera_rgb"],
            )


def test_bad_input_is_one_line_naming_the_thing(
    data: dict[str, Path], structure_ckpt: Path, tmp_path: Path
) -> None:
    translator = load_translator(structure_ckpt)
    with pytest.raises(TranslationInputError, match="real frames only"):
        train_translator(data["sim"], "structure", tmp_path / "x", PX)
    with pytest.raises(TranslationInputError, match="at least 4 real episodes"):
        small = write(tmp_path / "small.hdf5", "real", [1, 2], look=True)
        train_translator(small, "structure", tmp_path / "y", PX)
    with pytest.raises(TranslationInputError, match="give --sim"):
        train_translator(data["real"], "colour", tmp_path / "z", PX)
    with pytest.raises(TranslationInputError, match="simulated episodes"):
        translate_dataset(data["real"], tmp_path / "r.hdf5", translator)
    other_size = tmp_path / "big.hdf5"
    with EpisodeWriter(other_size) as writer:
        writer.append(synthetic_episode(5, 4, source="sim", image_px=48))
    with pytest.raises(TranslationInputError, match="48x48 px; the translator"):
        translate_dataset(other_size, tmp_path / "b.hdf5", translator)
    assert not (tmp_path / "b.hdf5").exists() and not partial_path(tmp_path / "b.hdf5").exists()
    meta = json.loads((structure_ckpt / "translator.json").read_text())
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / "weights.safetensors").write_bytes(
        (structure_ckpt / "weights.safetensors").read_bytes()
    )
    meta["trained_on"]["source"] = "sim"
    (forged / "translator.json").write_text(json.dumps(meta))
    with pytest.raises(TranslationInputError, match="trained on 'sim' frames"):
        load_translator(forged)
    (forged / "weights.safetensors").write_bytes(b"\0" * 64)
    meta["trained_on"]["source"] = "real"
    (forged / "translator.json").write_text(json.dumps(meta))
    with pytest.raises(TranslationInputError, match="unreadable"):
        load_translator(forged)
    with pytest.raises(FileExistsError):
        train_translator(data["real"], "structure", structure_ckpt, PX)


def test_dataset_cameras_refuses_an_episode_of_another_size(tmp_path: Path) -> None:
    path = tmp_path / "mixed.hdf5"
    with EpisodeWriter(path) as writer:
        writer.append(synthetic_episode(1, 4, source="sim", image_px=32))
        writer.append(synthetic_episode(2, 4, source="sim", image_px=40))
    with pytest.raises(TranslationInputError, match="demo_1: obs/head_camera_rgb is 40x40 px"):
        dataset_cameras(path)


def test_kid_is_near_zero_for_one_distribution_and_grows_with_a_shift() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(300, 16)), rng.normal(size=(300, 16))
    same = kernel_inception_distance(a, b, subsets=20, subset_size=200)
    shifted = kernel_inception_distance(a, b + 0.5, subsets=20, subset_size=200)
    assert abs(same.value) < 0.02 and shifted.value > 10 * max(abs(same.value), 1e-3)
    assert shifted.low <= shifted.value <= shifted.high


def test_the_imagenet_features_load_strictly_and_tell_images_apart() -> None:
    features = ImageNetFeatures(image_px=64)
    frames = np.stack([scene(1)[0], scene(1)[0], scene(2)[0]])
    out = features(frames)
    assert out.shape == (3, 1280) and np.array_equal(out[0], out[1])
    assert np.abs(out[0] - out[2]).mean() > 1e-3
    assert features.logits(frames[:1]).shape == (1, 1000)


def test_warping_error_is_zero_for_a_static_scene_and_grows_with_flicker() -> None:
    still = np.repeat(robot_images(np.random.default_rng(4), 1, PX, "blocks"), 4, axis=0)
    flicker = still.copy()
    flicker[1::2] = np.clip(flicker[1::2].astype(int) + 30, 0, 255).astype(np.uint8)
    same, floor = warping_error(still, still)
    assert same == floor < 0.5
    translated, floor = warping_error(still, flicker)
    assert translated > 20 and floor < 0.5


def test_the_unpaired_translator_moves_sim_colours_towards_real_ones(
    data: dict[str, Path], tmp_path: Path
) -> None:
    config = UnpairedTrainConfig(
        steps=300, batch_size=8, eval_every=100, width=8, learning_rate=1e-3
    )
    path = train_translator(
        data["real"], "cut", tmp_path / "cut", PX, data["sim"], unpaired_config=config, stride=1
    )
    translator = load_translator(path)
    key = "head_camera_rgb"
    sim = read_frames(data["sim"], key)
    truth = read_frames(data["sim_as_real"], key).astype(float)
    translated = translator.translate(key, sim)
    assert translated.shape == sim.shape
    assert np.array_equal(translated, load_translator(path).translate(key, sim))

    def colour_gap(frames: np.ndarray) -> float:
        return float(np.abs(frames.reshape(-1, 3).mean(0) - truth.reshape(-1, 3).mean(0)).sum())

    assert colour_gap(translated.astype(float)) < 0.6 * colour_gap(sim.astype(float))
    meta = json.loads((path / "translator.json").read_text())
    assert meta["kind"] == "cut" and meta["sim_dataset"] == str(data["sim"].resolve())
    with pytest.raises(TranslationInputError, match="give --sim"):
        train_translator(data["real"], "cut", tmp_path / "cut2", PX)


class StandInPipeline:
    """Called as WanVACEPipeline is: records the calls, returns the control video as frames."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def __call__(self, **kwargs: object) -> object:
        self.calls.append(kwargs)
        video = kwargs["video"]
        assert isinstance(video, list)
        frames = np.stack([np.asarray(image, dtype=np.float32) / 255.0 for image in video])

        class Output:
            pass

        out = Output()
        out.frames = [frames]  # type: ignore[attr-defined]
        return out


def test_the_diffusion_translator_feeds_edges_in_model_sized_chunks(
    data: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(TranslationInputError, match="--diffusion-model"):
        train_translator(data["real"], "diffusion", tmp_path / "d0", PX)
    settings = DiffusionSettings(model_path=str(tmp_path / "no_model"), model_px=64, chunk_frames=9)
    path = train_translator(data["real"], "diffusion", tmp_path / "d", PX, diffusion=settings)
    translator = load_translator(path)
    assert "unverified" in json.loads((path / "translator.json").read_text())
    with pytest.raises(TranslationInputError, match="not a diffusers model folder"):
        translator.translate("head_camera_rgb", read_frames(data["sim"], "head_camera_rgb", [0]))
    stand_in = StandInPipeline()
    translator.pipeline = stand_in
    episode = read_frames(data["sim"], "head_camera_rgb", [0])  # 24 frames
    out = translator.translate("head_camera_rgb", episode)
    assert out.shape == episode.shape
    assert [len(call["video"]) for call in stand_in.calls] == [9, 9, 9]  # type: ignore[arg-type]
    assert all(call["num_frames"] == 9 and call["height"] == 64 for call in stand_in.calls)
    edges = edge_control(translator.resize(episode), settings)
    assert np.abs(out.astype(int) - edges.astype(int)).mean() < 40  # the stand-in echoes edges
    assert chunks(24, 9) == [(0, 9), (9, 18), (15, 24)] and chunks(5, 9) == [(0, 5)]
    with pytest.raises(ValueError, match="4k \\+ 1"):
        chunks(10, 8)
