"""The one episode schema shared by every r2s2r dataset (real demos, MimicGen, planner).

An episode is ``T`` frames sampled at the control rate. Observations and actions are aligned
by index: ``actions[t]`` is the joint target in force at ``timestamps_s[t]``, when
``obs[...][t]`` was observed.

Arrays (``T`` frames, ``J`` joints = arm joints then hand joints):

- ``obs/head_camera_rgb``, ``obs/hand_camera_rgb``: uint8 ``(T, H, W, 3)`` RGB.
- ``obs/joint_pos_rad``: float32 ``(T, J)`` measured joint positions, order ``joint_names``.
- ``obs/belt_speed_mps``: float32 ``(T, 1)`` belt speed along ``belt_link`` x.
- ``obs/object_pose`` (optional): float32 ``(T, 7)`` tracked object pose in ``base_link``
  (x, y, z in m, then quaternion x, y, z, w); ``obs/object_pose_valid`` bool ``(T,)``.
- ``obs/object_track`` (optional): float32 ``(T, F)`` the tracked-object observation (what a
  consumer of ``/objects/tracks`` knows at each frame; columns ``metadata.object_track_fields``,
  made as ``metadata.object_track_source`` says; see :mod:`.object_track`).
- ``actions``: float32 ``(T, J)`` arm + hand joint position targets (rad), order
  ``action_names``.

``obs/object_pose`` is what the recording knew of the episode's object (the tracker in real
data, simulator truth in simulated data: MimicGen and analysis use it); it is not a policy
input. Policy inputs are the camera images, joints, ``obs/belt_speed_mps`` (as
``metadata.belt_speed_source`` says) and ``obs/object_track``.
- ``timestamps_s``: float64 ``(T,)`` frame times, seconds since the episode's first frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.cameras import CAMERAS, HAND, HEAD

SCHEMA_VERSION = 1
"""Version of the episode schema written into every dataset file."""

# The names a dataset file spells, defined here once: the writer, the readers (this package's,
# MimicGen's source reader, the policy's sources) and the policy's batch keys import them.
# Observation keys (``obs/<key>`` in a file; the same keys name a policy's inputs):
# The camera image keys are the cameras' (:mod:`r2s2r_description.cameras`), named here too.
HEAD_CAMERA_KEY = HEAD.image_key
HAND_CAMERA_KEY = HAND.image_key
CAMERA_KEYS: tuple[str, ...] = tuple(camera.image_key for camera in CAMERAS)
"""Observation keys holding camera images."""
IMAGE_KEY_OF_CAMERA: dict[str, str] = {camera.name: camera.image_key for camera in CAMERAS}
"""The cell's camera name (``/<camera>/image_raw``, the simulator's camera) → its image key."""
JOINT_POS_KEY = "joint_pos_rad"
BELT_SPEED_KEY = "belt_speed_mps"
OBJECT_POSE_KEY = "object_pose"
OBJECT_POSE_VALID_KEY = "object_pose_valid"
OBJECT_TRACK_KEY = "object_track"
"""Observation key of the tracked-object vector (float32 ``(T, F)``, :mod:`.object_track`)."""

# Arrays of an episode beside its observations:
ACTIONS_KEY = "actions"
TIMESTAMPS_KEY = "timestamps_s"

# Groups and attributes of a file (the layout is :mod:`.hdf5`'s docstring):
DATA_GROUP = "data"
"""The group holding the episodes; attributes :data:`SCHEMA_VERSION_ATTR`, :data:`TOTAL_ATTR`,
:data:`ENV_ARGS_ATTR`."""
EPISODE_PREFIX = "demo_"
"""Episode groups are ``data/demo_<k>`` (:func:`episode_group`, :func:`episode_group_index`)."""
OBS_GROUP = "obs"
"""The group of an episode holding its observations."""
SCHEMA_VERSION_ATTR = "r2s2r_schema_version"
TOTAL_ATTR = "total"
"""Frames in the file."""
ENV_ARGS_ATTR = "env_args"
NUM_SAMPLES_ATTR = "num_samples"
"""Frames of one episode."""
METADATA_ATTR = "metadata"
"""One episode's :class:`EpisodeMetadata` as JSON."""
MANIFEST_ATTR = "r2s2r_manifest"
"""What a file holds, as JSON on :data:`DATA_GROUP`: one entry per episode written from a
source (``group``, ``episode_id``, ``content_hash`` of the source bag, ``source`` path), so a
rerun knows what is there and :func:`~.hdf5.dataset_info` can tell a file cut short."""
PARTIAL_SUFFIX = ".partial"
"""A file being written is ``.<name>.partial`` beside its final name
(:func:`~.hdf5.partial_path`) until it is complete."""
SUMMARY_ATTRS: tuple[str, ...] = ("source", "behavior_source", "outcome", "task", "object_type")
"""Fields of :class:`EpisodeMetadata` also stored as attributes of their own (read without JSON)."""


def obs_path(key: str) -> str:
    """Path of an observation in an episode group, ``obs/<key>`` (as ``dataset_info`` names it)."""
    return f"{OBS_GROUP}/{key}"


def episode_group(index: int) -> str:
    """Name of episode ``index``'s group inside :data:`DATA_GROUP`: ``demo_<index>``."""
    return f"{EPISODE_PREFIX}{index}"


def episode_group_index(name: str) -> int:
    """Index of an episode group's name (inverse of :func:`episode_group`)."""
    return int(name[len(EPISODE_PREFIX) :])


Source = Literal["real", "sim"]
BehaviorSource = Literal["demo", "mimicgen", "planner"]
Outcome = Literal["success", "failure", "unknown"]


class EpisodeMetadata(ConfigModel):
    """Per-episode metadata stored with every episode.

    ``provenance`` says where the frames came from: for a recorded bag
    ``{"bag_path": ..., "start_time_ns": ..., "end_time_ns": ...}``; for a MimicGen episode
    ``{"source_demo": ..., "subtask_boundaries": [...]}``. Values must be JSON-serialisable.
    """

    source: Source = Field(description="Where the frames were produced: real cell or simulator.")
    world_config_id: str = Field(
        description="Identifier of the world configuration (e.g. 'real', 'nominal', a grounding "
        "artifact hash)."
    )
    behavior_source: BehaviorSource = Field(description="What produced the motion.")
    task: str = Field(description="Task name, e.g. 'pick_sort'.")
    object_type: str = Field(description="Object type name, e.g. 'cube'.")
    belt_speed_mps: float = Field(ge=-5.0, le=5.0, description="Nominal belt speed (m/s).")
    outcome: Outcome = Field(description="Trial outcome.")
    joint_names: list[str] = Field(description="Names of the columns of obs/joint_pos_rad.")
    action_names: list[str] = Field(description="Names of the columns of actions.")
    control_rate_hz: float = Field(gt=0.0, le=1000.0, description="Frame rate of the episode.")
    provenance: dict[str, Any] = Field(
        default_factory=dict, description="Bag path + time range, or MimicGen source + subtasks."
    )
    belt_speed_source: str = Field(
        default="",
        description="What made obs/belt_speed_mps: 'belt_speed' (the belt_speed estimator, as "
        "the node publishes it), 'commanded' (the simulator's set speed), '' unknown (old data).",
    )
    object_track_source: str = Field(
        default="",
        description="What made obs/object_track: 'object_tracker' (the tracker core on camera "
        "images) or '' when the episode has none.",
    )
    object_track_fields: list[str] = Field(
        default_factory=list, description="Columns of obs/object_track (empty: none)."
    )


@dataclass
class Episode:
    """One episode in memory (a few hundred frames; never a whole dataset).

    Attributes:
        metadata: Episode metadata.
        timestamps_s: float64 ``(T,)`` seconds since the first frame, strictly increasing.
        images: Camera key (see :data:`CAMERA_KEYS`) → uint8 ``(T, H, W, 3)`` RGB.
        joint_pos_rad: float32 ``(T, J)``.
        belt_speed_mps: float32 ``(T,)`` or ``(T, 1)``.
        actions: float32 ``(T, J_action)``.
        object_pose: Optional float32 ``(T, 7)`` (xyz m, quaternion xyzw) in ``base_link``.
        object_pose_valid: Optional bool ``(T,)``; False where no track was available.

    """

    metadata: EpisodeMetadata
    timestamps_s: np.ndarray
    images: dict[str, np.ndarray]
    joint_pos_rad: np.ndarray
    belt_speed_mps: np.ndarray
    actions: np.ndarray
    object_pose: np.ndarray | None = None
    object_pose_valid: np.ndarray | None = None
    extra_obs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        """Number of frames ``T``."""
        return int(self.timestamps_s.shape[0])

    def validate(self) -> None:
        """Check shapes, dtypes and timestamps against the schema.

        Raises:
            ValueError: Naming the array, its shape or dtype, and what was expected.

        """
        n = self.num_frames
        if n < 1:
            raise ValueError("episode.timestamps_s: expected at least 1 frame, got 0")
        if self.timestamps_s.ndim != 1:
            raise ValueError(
                f"episode.timestamps_s: expected shape (T,), got {self.timestamps_s.shape}"
            )
        if n > 1 and not np.all(np.diff(self.timestamps_s) > 0):
            raise ValueError("episode.timestamps_s: expected strictly increasing times")
        for key in CAMERA_KEYS:
            if key not in self.images:
                raise ValueError(f"episode.images: missing camera {key!r}")
        for key, image in self.images.items():
            if image.dtype != np.uint8 or image.ndim != 4 or image.shape[3] != 3:
                raise ValueError(
                    f"episode.images[{key!r}]: expected uint8 (T, H, W, 3), "
                    f"got {image.dtype} {image.shape}"
                )
            if image.shape[0] != n:
                raise ValueError(
                    f"episode.images[{key!r}]: expected {n} frames, got {image.shape[0]}"
                )
        joints = len(self.metadata.joint_names)
        if self.joint_pos_rad.shape != (n, joints):
            raise ValueError(
                f"episode.joint_pos_rad: expected shape {(n, joints)}, "
                f"got {self.joint_pos_rad.shape}"
            )
        actions = len(self.metadata.action_names)
        if self.actions.shape != (n, actions):
            raise ValueError(
                f"episode.actions: expected shape {(n, actions)}, got {self.actions.shape}"
            )
        if self.belt_speed_mps.reshape(-1).shape != (n,):
            raise ValueError(
                f"episode.belt_speed_mps: expected {n} values, got {self.belt_speed_mps.shape}"
            )
        if self.object_pose is not None:
            if self.object_pose.shape != (n, 7):
                raise ValueError(
                    f"episode.object_pose: expected shape {(n, 7)}, got {self.object_pose.shape}"
                )
            if self.object_pose_valid is None or self.object_pose_valid.shape != (n,):
                raise ValueError("episode.object_pose_valid: expected bool (T,) with object_pose")
        for key, values in self.extra_obs.items():
            if values.shape[0] != n:
                raise ValueError(
                    f"episode.extra_obs[{key!r}]: expected {n} frames, got {values.shape[0]}"
                )


def non_finite_problem(values: np.ndarray) -> str | None:
    """Say how many NaN/Inf values an episode's array holds and where the first is; None if none.

    Training (``r2s2r_policy.data.sources``) and the LeRobot export refuse such arrays with it.
    """
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    return (
        f"{int(bad.sum())} NaN/Inf values, the first at frame {int(np.argwhere(bad)[0][0])}; a "
        "policy cannot learn from them: convert or generate the episode again, or leave it out"
    )
