from pathlib import Path

import numpy as np
import pytest
from policy_fixtures import make_source, tiny_config
from r2s2r_policy.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from r2s2r_policy.data.chunks import ChunkDataset, compute_normalization
from r2s2r_policy.data.sources import InMemoryEpisodeSource, MissingFeatureError
from r2s2r_policy.models import build_policy
from r2s2r_policy.spec import ImageSpec, RobotSpec, SpecMismatchError
from r2s2r_policy.training import train
from r2s2r_policy.training_data import make_spec
from r2s2r_testing.episodes import JOINTS, TRACK_FIELDS, make_episode


def robot_spec(**overrides: object) -> RobotSpec:
    data: dict[str, object] = {
        "images": [
            ImageSpec(key="head_camera_rgb", height_px=32, width_px=32),
            ImageSpec(key="hand_camera_rgb", height_px=32, width_px=32),
        ],
        "joint_names": JOINTS,
        "action_names": JOINTS,
        "object_track_fields": TRACK_FIELDS,
        "object_track_source": "object_tracker",
    }
    data.update(overrides)
    return RobotSpec.model_validate(data)


def saved_policy(tmp_path: Path) -> Path:
    source = make_source("real", [0, 1])
    spec = make_spec(tiny_config().policy, source, 10.0)
    policy = build_policy(spec, compute_normalization([ChunkDataset(source, spec)], spec))
    return save_checkpoint(tmp_path / "ckpt", policy, training={"step": 0})


def test_checkpoint_round_trip_gives_identical_predictions(tmp_path: Path) -> None:
    source = make_source("real", [0, 1])
    spec = make_spec(tiny_config().policy, source, 10.0)
    policy = build_policy(spec, compute_normalization([ChunkDataset(source, spec)], spec))
    path = save_checkpoint(tmp_path / "ckpt", policy, training={"step": 7})
    assert sorted(p.name for p in path.iterdir()) == ["config.yaml", "model.safetensors"]
    loaded = load_checkpoint(path, expected=robot_spec())
    assert loaded.config.training["step"] == 7
    assert loaded.config.spec == spec
    episode = make_episode(4)
    obs = {
        "head_camera_rgb": episode["head_camera_rgb"][3],
        "hand_camera_rgb": episode["hand_camera_rgb"][3],
        "joint_pos_rad": episode["joint_pos_rad"][3],
        "belt_speed_mps": np.array([0.1], np.float32),
        "object_track": episode["object_track"][3],
    }
    policy.eval()
    np.testing.assert_array_equal(loaded.policy.predict_chunk(obs), policy.predict_chunk(obs))


def test_loading_refuses_mismatched_robot_listing_every_mismatch(tmp_path: Path) -> None:
    path = saved_policy(tmp_path)
    robot = robot_spec(
        images=[
            ImageSpec(key="head_camera_rgb", height_px=64, width_px=64),
            ImageSpec(key="hand_camera_rgb", height_px=32, width_px=32),
        ],
        joint_names=["arm_1", "arm_2", "hand_1", "hand_9"],
        action_names=["arm_1", "arm_2", "hand_1"],
    )
    with pytest.raises(SpecMismatchError) as caught:
        load_checkpoint(path, expected=robot)
    message = str(caught.value)
    assert "images.head_camera_rgb: policy expects 32x32 px (HxW), robot gives 64x64 px" in message
    assert "joint_names: robot lacks ['hand_2']" in message
    assert "joint_names: robot has ['hand_9']" in message
    assert "action_names: robot lacks ['hand_2']" in message
    assert "action_names: policy has 4 dims, robot has 3" in message
    assert len(caught.value.mismatches) == 5
    reordered = robot_spec(joint_names=["arm_2", "arm_1", "hand_1", "hand_2"])
    with pytest.raises(SpecMismatchError, match="same names in a different order"):
        load_checkpoint(path, expected=reordered)
    no_camera = robot_spec(images=[ImageSpec(key="head_camera_rgb", height_px=32, width_px=32)])
    with pytest.raises(SpecMismatchError, match="policy needs camera 'hand_camera_rgb'"):
        load_checkpoint(path, expected=no_camera)


def test_incomplete_checkpoint_is_refused(tmp_path: Path) -> None:
    path = saved_policy(tmp_path)
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing model\.safetensors"):
        load_checkpoint(path)


def test_missing_feature_fails_before_training(tmp_path: Path) -> None:
    real = make_source("real", [0, 1])
    sim = make_source("sim", [2], drop="hand_camera_rgb")
    with pytest.raises(MissingFeatureError) as caught:
        train(
            tiny_config(),
            tmp_path,
            sources={"real": real, "sim": sim},
            weights={"real": 0.5, "sim": 0.5},
        )
    assert "source 'sim': missing camera 'hand_camera_rgb'" in str(caught.value)
    assert len(caught.value.problems) == 1
    no_belt = make_source("sim", [2], drop="belt_speed_mps")
    with pytest.raises(MissingFeatureError, match="source 'sim': missing 'belt_speed_mps'"):
        train(
            tiny_config(),
            tmp_path,
            sources={"real": real, "sim": no_belt},
            weights={"real": 0.5, "sim": 0.5},
        )
    fast = InMemoryEpisodeSource("sim", [make_episode(3)], JOINTS, JOINTS, control_rate_hz=30.0)
    with pytest.raises(MissingFeatureError, match="differ in control_rate_hz"):
        train(
            tiny_config(),
            tmp_path,
            sources={"real": real, "sim": fast},
            weights={"real": 0.5, "sim": 0.5},
        )
    assert latest_checkpoint(tmp_path) is None  # nothing was trained or written


def test_tracked_object_inputs_must_match_the_graph(tmp_path: Path) -> None:
    path = saved_policy(tmp_path)
    # The graph runs no tracker: a policy that reads /objects/tracks is refused.
    with pytest.raises(SpecMismatchError, match="policy needs the tracked object"):
        load_checkpoint(path, expected=robot_spec(object_track_fields=[], object_track_source=""))
    # Another tracker (other catalogue columns, another source): every difference listed.
    other = robot_spec(
        object_track_fields=[*TRACK_FIELDS[:-1], "type_teapot"],
        object_track_source="simulator_truth",
    )
    with pytest.raises(SpecMismatchError) as caught:
        load_checkpoint(path, expected=other)
    text = str(caught.value)
    assert "type_teapot" in text and "'simulator_truth'" in text
    # A policy trained without the tracked object, on a graph that provides it.
    source = make_source("real", [0, 1])
    options = tiny_config().policy.model_copy(update={"use_object_track": False})
    spec = make_spec(options, source, 10.0)
    blind = build_policy(spec, compute_normalization([ChunkDataset(source, spec)], spec))
    blind_path = save_checkpoint(tmp_path / "blind", blind, training={"step": 0})
    with pytest.raises(SpecMismatchError, match="does not read it"):
        load_checkpoint(blind_path, expected=robot_spec())


def test_sources_that_make_an_input_differently_are_refused_before_training() -> None:
    from policy_fixtures import SEMANTICS
    from r2s2r_policy.data.sources import ObservationSemantics

    real = make_source("real", [0, 1])
    sim = make_source("sim", [2])
    sim._semantics = ObservationSemantics(
        "commanded", "simulator_truth", SEMANTICS.object_track_fields
    )
    spec = make_spec(tiny_config().policy, real, 10.0)
    with pytest.raises(MissingFeatureError) as caught:
        ChunkDataset(sim, spec)
    text = str(caught.value)
    assert "belt speed made by 'commanded'" in text
    assert "object_track made by 'simulator_truth'" in text


def test_a_full_disk_while_saving_is_one_line_and_keeps_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import r2s2r_policy.checkpoint as checkpoint
    from r2s2r_common.errors import RunFailedError
    from safetensors import SafetensorError

    path = saved_policy(tmp_path)
    before = (path / "model.safetensors").read_bytes()
    loaded = load_checkpoint(path)

    def disk_full(*args: object, **kwargs: object) -> None:
        raise SafetensorError("Error while serializing: IoError(No space left on device)")

    monkeypatch.setattr(checkpoint, "save_file", disk_full)
    with pytest.raises(
        RunFailedError, match=r"checkpoint .*ckpt not written \(SafetensorError: .*No space left"
    ) as error:
        save_checkpoint(path, loaded.policy, training={"step": 1})
    assert "\n" not in str(error.value)
    assert (path / "model.safetensors").read_bytes() == before  # the previous one intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no .tmp left
