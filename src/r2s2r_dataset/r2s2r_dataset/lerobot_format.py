"""LeRobot v3.0 dataset format: version, file paths, feature names and per-frame columns.

The layout (as LeRobot's ``LeRobotDataset`` reads it, codebase version ``v3.0``)::

    OUT/meta/info.json                              fps, features, chunking, paths
    OUT/meta/stats.json                             per feature: min max mean std count q01..q99
    OUT/meta/tasks.parquet                          index: task string; column task_index
    OUT/meta/episodes/chunk-000/file-000.parquet    one row per episode (ranges, files, stats)
    OUT/data/chunk-000/file-000.parquet             one row per frame (states, actions, indices)
    OUT/videos/observation.images.<camera>/chunk-000/file-000.mp4   episodes back to back
    OUT/README.md                                   what was exported, co-training weights

Paths hold a chunk and a file index (``chunk-000/file-000``); the ``timestamp`` column is
``frame_index / fps`` (the recorded times are kept as ``r2s2r.timestamp_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .hdf5 import DatasetError
from .schema import CAMERA_KEYS, Episode, EpisodeMetadata

CODEBASE_VERSION = "v3.0"
"""LeRobot dataset format version written (``info.json["codebase_version"]``)."""
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
README_NAME = "README.md"

STATE_KEY = "observation.state"
ACTION_KEY = "action"
RECORDED_TIME_KEY = "r2s2r.timestamp_s"
IMAGE_FEATURE_PREFIX = "observation.images."
INDEX_KEYS = ("frame_index", "episode_index", "index", "task_index")
"""Index columns of every data file (int64, one per frame)."""


class ExportError(DatasetError):
    """The export cannot be made: its output is in the way, or the input cannot be exported."""


@dataclass(frozen=True)
class Column:
    """A per-frame feature of the data files: its LeRobot name, dtype, shape and names."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    names: list[str] | None

    def spec(self) -> dict[str, Any]:
        """Return the feature's ``info.json`` entry."""
        return {"dtype": self.dtype, "shape": list(self.shape), "names": self.names}


def episode_columns(episode: Episode) -> dict[str, np.ndarray]:
    """One episode's per-frame arrays by LeRobot feature name (no videos, no index columns)."""
    n = episode.num_frames
    columns: dict[str, np.ndarray] = {
        STATE_KEY: episode.joint_pos_rad.astype(np.float32),
        "observation.belt_speed_mps": episode.belt_speed_mps.reshape(n).astype(np.float32),
    }
    if episode.object_pose is not None and episode.object_pose_valid is not None:
        columns["observation.object_pose"] = episode.object_pose.astype(np.float32)
        columns["observation.object_pose_valid"] = episode.object_pose_valid.reshape(n).astype(
            np.bool_
        )
    for key, values in sorted(episode.extra_obs.items()):
        if values.ndim > 2:
            raise ExportError(
                f"obs/{key}: per-frame shape {values.shape[1:]} is not a vector (only the "
                f"cameras {list(CAMERA_KEYS)} are exported as videos)"
            )
        columns[f"observation.{key}"] = (
            values.reshape(n) if values.ndim == 2 and values.shape[1] == 1 else values
        )
    columns[ACTION_KEY] = episode.actions.astype(np.float32)
    # float32: LeRobot hands every number to torch as float32 (float64 columns included).
    columns[RECORDED_TIME_KEY] = episode.timestamps_s.astype(np.float32)
    return columns


def column_specs(columns: dict[str, np.ndarray], metadata: EpisodeMetadata) -> dict[str, Column]:
    """Return the feature spec of each column, named from the episode metadata."""
    names: dict[str, list[str]] = {
        STATE_KEY: list(metadata.joint_names),
        ACTION_KEY: list(metadata.action_names),
        "observation.object_pose": ["x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"],
    }
    if metadata.object_track_fields:
        names["observation.object_track"] = list(metadata.object_track_fields)
    specs = {}
    for key, values in columns.items():
        shape = (1,) if values.ndim == 1 else tuple(int(d) for d in values.shape[1:])
        specs[key] = Column(key, str(values.dtype), shape, names.get(key))
    return specs


def camera_feature(key: str, shape: tuple[int, ...], video_info: dict[str, Any]) -> dict[str, Any]:
    """Return a camera's ``info.json`` feature entry (a video of ``shape`` frames)."""
    return {
        "dtype": "video",
        "shape": list(shape),
        "names": ["height", "width", "channels"],
        "info": video_info,
    }


def video_feature_key(camera_key: str) -> str:
    """LeRobot feature name of a camera image key: ``observation.images.<camera>``."""
    return IMAGE_FEATURE_PREFIX + camera_key.removesuffix("_rgb")
