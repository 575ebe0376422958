"""Episode datasets shared by the recorder, data generation and policy training.

Import from here: the schema (:class:`Episode`, :class:`EpisodeMetadata`), the shard writer
(:class:`EpisodeWriter`), the lazy reader (:class:`EpisodeDataset`), :func:`merge_shards` and
:func:`dataset_info`. The storage format is robomimic-style HDF5; :mod:`.hdf5` says why.
"""

from .hdf5 import (
    DatasetError,
    DatasetInfo,
    EpisodeDataset,
    EpisodeWriter,
    MergeReport,
    dataset_info,
    merge_shards,
)
from .schema import (
    BELT_SPEED_KEY,
    CAMERA_KEYS,
    JOINT_POS_KEY,
    OBJECT_POSE_KEY,
    OBJECT_POSE_VALID_KEY,
    SCHEMA_VERSION,
    Episode,
    EpisodeMetadata,
)

__all__ = [
    "BELT_SPEED_KEY",
    "CAMERA_KEYS",
    "JOINT_POS_KEY",
    "OBJECT_POSE_KEY",
    "OBJECT_POSE_VALID_KEY",
    "SCHEMA_VERSION",
    "DatasetError",
    "DatasetInfo",
    "Episode",
    "EpisodeDataset",
    "EpisodeMetadata",
    "EpisodeWriter",
    "MergeReport",
    "dataset_info",
    "merge_shards",
]
