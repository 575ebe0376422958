"""QoS profiles used across the workspace (DESIGN.md section 4)."""

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

#: Plain default (joint_states, belt speed, tracks, markers, diagnostics).
DEFAULT_QOS = QoSProfile(depth=10)
