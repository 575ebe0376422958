"""The episode bag format shared by the writer, the readers and the repair.

Episode bag directory ``<root>/episode_<NNNNNN>/``::

    episode_<NNNNNN>.mcap   MCAP storage (rosbag2 format version 9)
    metadata.yaml           rosbag2 metadata, written on clean close; episode metadata in
                            ``custom_data`` (key ``r2s2r.episode``, JSON)
    episode.yaml            sidecar: episode metadata, topics (type, QoS, type hash), cadence
                            report; written atomically at start and again at close
    INCOMPLETE              marker present while recording; removed on clean close

Written by :class:`~r2s2r_recorder.bag_writer.EpisodeBagWriter`, read by
:mod:`r2s2r_recorder.bag_reading`, rewritten when unfinished by :mod:`r2s2r_recorder.bag_repair`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from r2s2r_common.config import ConfigModel
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)

INCOMPLETE_MARKER = "INCOMPLETE"
SIDECAR_NAME = "episode.yaml"
CUSTOM_DATA_KEY = "r2s2r.episode"

QosProfileName = Literal[
    "sensor_data", "default", "reliable", "best_effort", "reliable_transient_local"
]
QOS_PROFILE_NAMES: tuple[str, ...] = (
    "sensor_data",
    "default",
    "reliable",
    "best_effort",
    "reliable_transient_local",
)


def qos_for_profile(profile: str, depth: int | None = None) -> Qos:
    """Return the rosbags QoS record for a profile name (stored as ``offered_qos_profiles``).

    Args:
        profile: One of :data:`QOS_PROFILE_NAMES`.
        depth: History depth; the profile's default when None.

    Raises:
        ValueError: If the profile name is unknown.

    """
    # rosbag2's spelling of "infinite" for deadline, lifespan and lease duration.
    infinite = QosTime(9223372036, 854775807)
    table = {
        "sensor_data": (QosReliability.BEST_EFFORT, QosDurability.VOLATILE, 5),
        "default": (QosReliability.RELIABLE, QosDurability.VOLATILE, 10),
        "reliable": (QosReliability.RELIABLE, QosDurability.VOLATILE, 10),
        "best_effort": (QosReliability.BEST_EFFORT, QosDurability.VOLATILE, 10),
        "reliable_transient_local": (QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL, 1),
    }
    if profile not in table:
        raise ValueError(f"qos profile = {profile!r}: expected one of {QOS_PROFILE_NAMES}")
    reliability, durability, default_depth = table[profile]
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=default_depth if depth is None else depth,
        reliability=reliability,
        durability=durability,
        deadline=infinite,
        lifespan=infinite,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=infinite,
        avoid_ros_namespace_conventions=False,
    )


class EpisodeInfo(ConfigModel):
    """Episode metadata stored with every bag (task, object, belt speed, outcome, notes)."""

    episode_id: str = Field(description="Episode directory name, e.g. 'episode_000003'.")
    task: str = Field(default="pick_sort", description="Task name.")
    object_type: str = Field(default="unknown", description="Object type on the belt.")
    belt_speed_mps: float = Field(default=0.0, ge=-5.0, le=5.0, description="Belt speed (m/s).")
    outcome: Literal["success", "failure", "unknown"] = Field(
        default="unknown", description="Trial outcome; 'unknown' until judged."
    )
    operator_notes: str = Field(default="", description="Free text from the operator.")
    source: Literal["real", "sim"] = Field(default="real", description="Real cell or simulator.")
    world_config_id: str = Field(default="real", description="World configuration identifier.")
    behavior_source: Literal["demo", "mimicgen", "planner"] = Field(
        default="demo", description="What produced the motion."
    )
