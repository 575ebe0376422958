"""The names a dataset file spells, written out here on purpose.

Code takes every name from ``r2s2r_dataset.schema`` (its one home); this file spells
them literally, so that renaming a constant, which would change the files written and stop
every existing dataset from reading, fails here instead of passing everywhere.
"""

from pathlib import Path

import h5py
import numpy as np
from r2s2r_testing.episodes import synthetic_episode

from r2s2r_dataset import (
    SCHEMA_VERSION,
    EpisodeWriter,
    dataset_info,
    episode_group,
    episode_group_index,
    obs_path,
    schema,
)

OBSERVATIONS = [
    "belt_speed_mps",
    "hand_camera_rgb",
    "head_camera_rgb",
    "joint_pos_rad",
    "object_pose",
    "object_pose_valid",
    "object_track",
]


def test_a_written_file_has_the_documented_layout(tmp_path: Path) -> None:
    episode = synthetic_episode(0, 5)
    episode.object_pose = np.tile(np.array([0, 0, 0, 0, 0, 0, 1], np.float32), (5, 1))
    episode.object_pose_valid = np.ones(5, dtype=bool)
    path = tmp_path / "a.hdf5"
    with EpisodeWriter(path) as writer:
        writer.append(episode)
        writer.append(episode)
    with h5py.File(path, "r") as handle:
        assert list(handle) == ["data"]
        data = handle["data"]
        assert sorted(data.attrs) == ["env_args", "r2s2r_schema_version", "total"]
        assert data.attrs["r2s2r_schema_version"] == SCHEMA_VERSION and data.attrs["total"] == 10
        assert sorted(data) == ["demo_0", "demo_1"]
        demo = data["demo_1"]
        assert sorted(demo) == ["actions", "obs", "timestamps_s"]
        assert sorted(demo["obs"]) == OBSERVATIONS
        assert sorted(demo.attrs) == [
            "behavior_source",
            "metadata",
            "num_samples",
            "object_type",
            "outcome",
            "source",
            "task",
        ]
        assert demo.attrs["num_samples"] == 5
    features = dataset_info(path).features
    assert sorted(features) == ["actions", *(f"obs/{k}" for k in OBSERVATIONS), "timestamps_s"]


def test_the_schema_names_are_the_on_disk_names() -> None:
    assert (schema.DATA_GROUP, schema.OBS_GROUP, schema.EPISODE_PREFIX) == ("data", "obs", "demo_")
    assert (schema.ACTIONS_KEY, schema.TIMESTAMPS_KEY) == ("actions", "timestamps_s")
    assert schema.CAMERA_KEYS == ("head_camera_rgb", "hand_camera_rgb")
    assert schema.IMAGE_KEY_OF_CAMERA == {
        "head_camera": "head_camera_rgb",
        "hand_camera": "hand_camera_rgb",
    }
    assert (
        schema.JOINT_POS_KEY,
        schema.BELT_SPEED_KEY,
        schema.OBJECT_POSE_KEY,
        schema.OBJECT_POSE_VALID_KEY,
        schema.OBJECT_TRACK_KEY,
    ) == ("joint_pos_rad", "belt_speed_mps", "object_pose", "object_pose_valid", "object_track")
    assert (
        schema.SCHEMA_VERSION_ATTR,
        schema.TOTAL_ATTR,
        schema.ENV_ARGS_ATTR,
        schema.NUM_SAMPLES_ATTR,
        schema.METADATA_ATTR,
    ) == ("r2s2r_schema_version", "total", "env_args", "num_samples", "metadata")
    assert schema.SUMMARY_ATTRS == ("source", "behavior_source", "outcome", "task", "object_type")
    assert obs_path("joint_pos_rad") == "obs/joint_pos_rad"
    assert episode_group(12) == "demo_12" and episode_group_index("demo_12") == 12
