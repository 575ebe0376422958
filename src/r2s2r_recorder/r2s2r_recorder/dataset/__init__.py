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
from .object_track import (
    OBJECT_TRACK_KEY,
    TRACKER_SOURCE,
    ObjectTrackLatch,
    TrackView,
    object_track_fields,
    type_names_of,
    yaw_from_quat,
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
    "OBJECT_TRACK_KEY",
    "SCHEMA_VERSION",
    "TRACKER_SOURCE",
    "DatasetError",
    "DatasetInfo",
    "Episode",
    "EpisodeDataset",
    "EpisodeMetadata",
    "EpisodeWriter",
    "MergeReport",
    "ObjectTrackLatch",
    "TrackView",
    "dataset_info",
    "merge_shards",
    "object_track_fields",
    "type_names_of",
    "yaw_from_quat",
]
