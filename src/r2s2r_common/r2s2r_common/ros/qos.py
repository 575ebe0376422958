"""QoS profiles used across the workspace (docs/architecture.md, section 4: topics and frames)."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

#: Cameras, depth, encoder: best effort, keep last 5.
SENSOR_DATA_QOS: QoSProfile = qos_profile_sensor_data

#: Commands and outcomes: reliable, keep last 10.
RELIABLE_QOS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST
)

#: Rarely-changing state (robot_description, calibration, /tf_static): latched.
LATCHED_QOS = QoSProfile(
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    history=HistoryPolicy.KEEP_LAST,
)

#: Plain default (belt speed, tracks, markers, diagnostics).
DEFAULT_QOS = QoSProfile(depth=10)

#: ``/trial/outcome``: reliable and latched for the last 10 trials (a late subscriber still
#: gets the outcome of the trial it asked for).
OUTCOME_QOS = QoSProfile(
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    history=HistoryPolicy.KEEP_LAST,
)

#: A simulated cell's ``/joint_states``: reliable, one second of history at 500 Hz. A late
#: stepping tick publishes one catch-up burst at once, and a depth-10 writer history would
#: overwrite states not yet acknowledged (gaps in a sysid log). Subscribers keep their own depth.
JOINT_STATES_QOS = QoSProfile(
    depth=500,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
    history=HistoryPolicy.KEEP_LAST,
)
