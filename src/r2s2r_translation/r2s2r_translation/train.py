"""Train a translator from a real dataset (``r2s2r translate train``).

Episodes are split once into training and held-out ones (recorded in the checkpoint, so its
scores are computed on frames it never saw); every camera of the dataset gets its own
translator, at one working size.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .checkpoint import UNPAIRED_KINDS, TranslatorKind, save_translator
from .colour import fit_colour_transfer
from .diffusion import UNVERIFIED, DiffusionSettings
from .frames import (
    TranslationInputError,
    dataset_cameras,
    frames_digest,
    read_frames,
    split_episodes,
)
from .structure_translator import StructureTrainConfig, train_structure_translator
from .unpaired import UnpairedTrainConfig, train_unpaired_translator

MIN_TRAINING_FRAMES = 64
"""Fewest real training frames per camera."""


def _camera_progress(
    progress: Callable[[str, int, str], None] | None, camera: str
) -> Callable[[int, str], None]:
    """One camera's progress callback (step, note) for a per-camera ``progress``."""

    def report(step: int, note: str) -> None:
        if progress is not None:
            progress(camera, step, note)

    return report


def train_translator(
    real_dataset: str | Path,
    kind: TranslatorKind,
    out: str | Path,
    image_px: int = 64,
    sim_dataset: str | Path | None = None,
    config: StructureTrainConfig | None = None,
    unpaired_config: UnpairedTrainConfig | None = None,
    diffusion: DiffusionSettings | None = None,
    holdout_fraction: float = 0.2,
    stride: int = 2,
    split_seed: int = 0,
    progress: Callable[[str, int, str], None] | None = None,
) -> Path:
    """Train one translator per camera of ``real_dataset`` and write the checkpoint ``out``.

    Args:
        real_dataset: Real demonstrations (every episode's source must be ``real``).
        kind: ``colour`` or ``cut`` (need ``sim_dataset``: the rendered frames they map from,
            unpaired) or ``structure`` (real frames only).
        out: The checkpoint folder to create.
        image_px: Working size (square, a multiple of 4): the policies' image size.
        sim_dataset: For ``colour``: simulated frames of the same cameras.
        config: For ``structure``: training settings.
        unpaired_config: For ``cut``: training settings.
        diffusion: For ``diffusion`` (unverified, :mod:`.diffusion`): the model folder and how
            it runs; nothing is trained, a real frame per camera is kept as the look to take.
        holdout_fraction: Share of episodes held out (scores, never training).
        stride: Every ``stride``-th frame of an episode is used.
        split_seed: Seed of the episode split.
        progress: Called with (camera key, step, note) while a network trains.

    Raises:
        TranslationInputError: A dataset that is not real, too few episodes or frames, a sim
            dataset whose cameras differ, ``colour`` without a sim dataset.

    """
    if Path(out).exists():
        raise FileExistsError(f"{out}: exists already (not overwritten); choose another --out")
    if image_px % 4 or not 16 <= image_px <= 1024:
        raise TranslationInputError(f"image_px = {image_px}: expected a multiple of 4 in 16..1024")
    cameras = dataset_cameras(real_dataset)
    cameras.require_source("real", "a sim-to-real translator is trained on real frames only")
    if kind == "diffusion" and diffusion is None:
        raise TranslationInputError("--model diffusion needs the model folder: --diffusion-model")
    if kind in UNPAIRED_KINDS and sim_dataset is None:
        raise TranslationInputError(f"--model {kind} maps sim frames onto real ones: give --sim")
    train_episodes, holdout_episodes = split_episodes(
        cameras.episodes, holdout_fraction, split_seed
    )
    settings = config or StructureTrainConfig()
    unpaired_settings = unpaired_config or UnpairedTrainConfig()
    meta: dict[str, Any] = {
        "kind": kind,
        "image_px": image_px,
        "source_image_px": {k: list(v) for k, v in cameras.shapes.items()},
        "trained_on": {
            "dataset": str(Path(real_dataset).resolve()),
            "source": "real",
            "episodes": train_episodes,
            "holdout_episodes": holdout_episodes,
            "stride": stride,
            "frames_sha256": {},
        },
        "log": {},
    }
    colour = {}
    networks = {}
    references = {}
    started = time.monotonic()
    if kind in UNPAIRED_KINDS:
        assert sim_dataset is not None
        sim = dataset_cameras(sim_dataset)
        missing = sorted(set(cameras.shapes) - set(sim.shapes))
        if missing:
            raise TranslationInputError(f"{sim_dataset}: no images of {missing}")
        meta["sim_dataset"] = str(Path(sim_dataset).resolve())
    for key in sorted(cameras.shapes):
        train = read_frames(real_dataset, key, train_episodes, stride, image_px)
        if len(train) < MIN_TRAINING_FRAMES:
            raise TranslationInputError(
                f"{real_dataset}: {len(train)} training frames of {key}; expected at least "
                f"{MIN_TRAINING_FRAMES} (more episodes or a smaller --stride)"
            )
        meta["trained_on"]["frames_sha256"][key] = frames_digest(train)
        if kind == "colour":
            assert sim_dataset is not None
            sim_frames = read_frames(sim_dataset, key, None, stride, image_px, len(train))
            colour[key] = fit_colour_transfer(train, sim_frames)
        elif kind == "diffusion":
            references[key] = train[len(train) // 2]
        elif kind == "cut":
            assert sim_dataset is not None
            sim_frames = read_frames(sim_dataset, key, None, stride, image_px, 4 * len(train))
            generator, cut_log = train_unpaired_translator(
                sim_frames, train, unpaired_settings, _camera_progress(progress, key)
            )
            networks[key] = generator
            meta["log"][key] = {
                "steps": cut_log.steps,
                "generator_loss": cut_log.generator_loss,
                "discriminator_loss": cut_log.discriminator_loss,
                "nce_loss": cut_log.nce_loss,
                "wall_s": cut_log.wall_s,
                "training_frames": len(train),
                "sim_frames": len(sim_frames),
            }
        else:
            holdout = read_frames(real_dataset, key, holdout_episodes, stride, image_px, 512)
            network, log = train_structure_translator(
                train, holdout, settings, _camera_progress(progress, key)
            )
            networks[key] = network
            meta["log"][key] = {
                "steps": log.steps,
                "holdout_l1": log.holdout_l1,
                "train_l1": log.train_l1,
                "wall_s": log.wall_s,
                "training_frames": len(train),
                "real_stats_sha256": log.stats.digest() if log.stats else None,
            }
    if kind == "structure":
        meta["config"] = settings.model_dump(mode="json")
    if kind == "cut":
        meta["config"] = unpaired_settings.model_dump(mode="json")
    if kind == "diffusion":
        assert diffusion is not None
        meta["config"] = diffusion.model_dump(mode="json")
        meta["unverified"] = UNVERIFIED
    meta["wall_s"] = time.monotonic() - started
    return save_translator(out, meta, colour, networks, references)
