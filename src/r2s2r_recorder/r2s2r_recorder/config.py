"""Typed configuration of the recorder node and of bag → dataset conversion."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from r2s2r_common.config import ConfigModel
from r2s2r_common.topics import (
    BELT_ENCODER,
    BELT_SPEED,
    HAND_CAMERA_IMAGE,
    HAND_CAMERA_INFO,
    HEAD_CAMERA_IMAGE,
    HEAD_CAMERA_INFO,
    JOINT_STATES,
    OBJECT_TRACKS,
    TF,
    TF_STATIC,
    TRIAL_OUTCOME,
    joint_trajectory,
)
from r2s2r_description.controllers import ARM, HAND, controller_name

from .bag_format import QOS_PROFILE_NAMES

DEFAULT_TOPICS: tuple[str, ...] = (
    HEAD_CAMERA_IMAGE,
    HEAD_CAMERA_INFO,
    HAND_CAMERA_IMAGE,
    HAND_CAMERA_INFO,
    JOINT_STATES,
    joint_trajectory(controller_name(ARM)),
    joint_trajectory(controller_name(HAND)),
    BELT_SPEED,
    BELT_ENCODER,
    OBJECT_TRACKS,
    TF,
    TF_STATIC,
    TRIAL_OUTCOME,
)
"""Topics recorded by default (docs/architecture.md, section 4: topics and frames)."""


def parse_qos_overrides(entries: list[str]) -> dict[str, str]:
    """Parse ``"<topic>=<profile>"`` entries into a mapping.

    Raises:
        ValueError: Naming the entry when it is malformed or the profile is unknown.

    """
    result: dict[str, str] = {}
    for entry in entries:
        topic, sep, profile = entry.partition("=")
        topic, profile = topic.strip(), profile.strip()
        if not sep or not topic.startswith("/") or not profile:
            raise ValueError(f"qos_overrides entry {entry!r}: expected '/topic=<profile>'")
        if profile not in QOS_PROFILE_NAMES:
            raise ValueError(
                f"qos_overrides entry {entry!r}: profile {profile!r} not in {QOS_PROFILE_NAMES}"
            )
        result[topic] = profile
    return result


class EpisodeDefaults(ConfigModel):
    """Episode metadata the operator sets (ROS parameters ``episode.*``), read at start/stop."""

    task: str = Field(default="pick_sort", description="Task name.")
    object_type: str = Field(default="unknown", description="Object type on the belt.")
    belt_speed_mps: float = Field(default=0.0, ge=-5.0, le=5.0, description="Belt speed (m/s).")
    outcome: Literal["success", "failure", "unknown"] = Field(
        default="unknown",
        description="Outcome given at stop; 'unknown' means take the last /trial/outcome message.",
    )
    operator_notes: str = Field(default="", description="Free text stored with the episode.")
    source: Literal["real", "sim"] = Field(default="real", description="Real cell or simulator.")
    world_config_id: str = Field(default="real", description="World configuration identifier.")


class RecorderConfig(ConfigModel):
    """Parameters of the ``recorder`` node."""

    output_dir: str = Field(
        default="runs/demos", description="Directory that receives one bag directory per episode."
    )
    topics: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TOPICS), description="Topics to record."
    )
    default_qos_profile: str = Field(
        default="default",
        description=f"QoS profile for topics without override; one of {QOS_PROFILE_NAMES}.",
    )
    qos_overrides: list[str] = Field(
        default_factory=list, description="Per-topic QoS profile, entries '/topic=<profile>'."
    )
    latched_topics: list[str] = Field(
        default_factory=lambda: [TF_STATIC],
        description="Topics whose last messages are re-written at the start of every episode.",
    )
    outcome_topic: str = Field(
        default=TRIAL_OUTCOME, description="Topic whose last message gives the outcome."
    )
    queue_size: int = Field(
        default=4000, ge=10, le=1_000_000, description="Messages buffered for the writer thread."
    )
    flush_period_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="Longest time between MCAP chunk flushes."
    )
    discovery_period_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="How often to look for configured topics."
    )
    episode: EpisodeDefaults = Field(
        default_factory=EpisodeDefaults, description="Episode metadata."
    )

    @field_validator("default_qos_profile")
    @classmethod
    def _check_profile(cls, value: str) -> str:
        if value not in QOS_PROFILE_NAMES:
            raise ValueError(f"expected one of {QOS_PROFILE_NAMES}")
        return value

    @field_validator("qos_overrides")
    @classmethod
    def _check_overrides(cls, value: list[str]) -> list[str]:
        parse_qos_overrides(value)
        return value

    def qos_profile(self, topic: str) -> str:
        """QoS profile name for ``topic``."""
        return parse_qos_overrides(self.qos_overrides).get(topic, self.default_qos_profile)


class ConversionConfig(ConfigModel):
    """Bag → dataset conversion settings."""

    control_rate_hz: float = Field(
        default=10.0, gt=0.0, le=1000.0, description="Rate of the dataset frames (policy rate)."
    )
    image_width_px: int = Field(default=128, ge=8, le=4096, description="Policy image width.")
    image_height_px: int = Field(default=128, ge=8, le=4096, description="Policy image height.")
    head_camera_topic: str = Field(default=HEAD_CAMERA_IMAGE, description="Head camera.")
    hand_camera_topic: str = Field(default=HAND_CAMERA_IMAGE, description="Hand camera.")
    joint_states_topic: str = Field(default=JOINT_STATES, description="Joint states.")
    arm_command_topic: str = Field(
        default=joint_trajectory(controller_name(ARM)), description="Arm JointTrajectory commands."
    )
    hand_command_topic: str = Field(
        default=joint_trajectory(controller_name(HAND)),
        description="Hand JointTrajectory commands.",
    )
    belt_speed_topic: str = Field(default=BELT_SPEED, description="Belt speed TwistStamped.")
    object_tracks_topic: str = Field(
        default=OBJECT_TRACKS, description="Object tracks (optional in a bag)."
    )
    object_track_types: list[str] = Field(
        default_factory=lambda: ["cube", "cylinder", "block", "sphere"],
        min_length=1,
        description="Type columns of obs/object_track: the object tracker's catalogue names "
        "(config/nodes/object_tracker.yaml catalogue.names), in that order.",
    )
    outcome_topic: str = Field(default=TRIAL_OUTCOME, description="Trial outcome topic.")
    arm_joint_names: list[str] = Field(
        default_factory=list, description="Arm joint order; from the first arm command if empty."
    )
    hand_joint_names: list[str] = Field(
        default_factory=list, description="Hand joint order; from the first hand command if empty."
    )
    max_staleness_s: float = Field(
        default=0.5,
        gt=0.0,
        le=10.0,
        description="Largest age of the latest sample of a sensor stream at a frame time.",
    )
    require_outcome: bool = Field(
        default=True, description="Skip episodes whose outcome is unknown."
    )
    time_source: Literal["header", "receive"] = Field(
        default="header",
        description="Synchronise on header stamps or on the recorder's receive times.",
    )
    source: Literal["real", "sim"] = Field(default="real", description="Dataset source label.")
    world_config_id: str = Field(default="real", description="World configuration identifier.")
    compression_level: int = Field(default=1, ge=0, le=9, description="gzip level for images.")
