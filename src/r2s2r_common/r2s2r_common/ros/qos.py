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

#: ``/tf`` publishers and listeners: reliable, volatile, deep enough for bursts of 500 Hz joint
#: states (as tf2_ros uses).
TF_QOS = QoSProfile(depth=100)

#: A listener of every latched ``/tf_static`` publisher's last message (one per publisher).
TF_STATIC_LISTENER_QOS = QoSProfile(
    depth=100,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

#: A listener of ``/joint_states``: reliable, 100 deep (0.2 s of 500 Hz states, ten batch
#: periods).
JOINT_STATES_LISTENER_QOS = QoSProfile(depth=100)

#: Grounding's ``/joint_states`` stream (a sysid log): reliable, 2000 deep (4 s at 500 Hz), so
#: no state is lost while the batched subscription drains.
JOINT_STATES_STREAM_QOS = QoSProfile(
    depth=2000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST
)

#: Grounding's belt encoder stream: best effort as the sensor publishes, 200 deep.
ENCODER_STREAM_QOS = QoSProfile(
    depth=200, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST
)

#: The recorder's subscriptions, by the profile a bag records for a topic
#: (``r2s2r_recorder.bag_format.QOS_PROFILE_NAMES``): latched topics keep their last 10 ...
RECORDED_LATCHED_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
#: ... best-effort topics other than sensor data, 10 ...
RECORDED_BEST_EFFORT_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
#: ... and every other topic is recorded reliably, 100 deep.
RECORDED_RELIABLE_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
