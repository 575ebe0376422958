"""The cell's topic and service names: the one home of every name in docs/architecture.md §4.

Absolute names, as a cell's hardware (or the real twin) exposes them; nodes, their parameter
schemas' defaults, bag readers and writers import them from here. Names of one family are
built by a function: a camera's topics from its name (``head_camera``), a trajectory
controller's from its ROS name (:func:`r2s2r_description.controllers.controller_name`, which
this lowest package cannot import). Files that cannot import Python (the YAML under ``config/``,
``config/r2s2r.rviz``) spell the names; ``tests/test_topic_names.py`` checks that each one they
spell is defined here. ROS-free: plain strings.
"""

from __future__ import annotations

JOINT_STATES = "/joint_states"
"""sensor_msgs/JointState of the arm and hand (robot / twin → everyone)."""
TF = "/tf"
"""tf2_msgs/TFMessage of the moving joints (cell_state_publisher)."""
TF_STATIC = "/tf_static"
"""tf2_msgs/TFMessage of the fixed frames, latched (cell_state_publisher or the twin)."""
ROBOT_DESCRIPTION = "/robot_description"
"""std_msgs/String URDF, latched (cell_state_publisher → rviz)."""
CLOCK = "/clock"
"""rosgraph_msgs/Clock of a simulated cell (the time source under ``use_sim_time``)."""
DIAGNOSTICS = "/diagnostics"
"""diagnostic_msgs/DiagnosticArray (every node)."""

BELT_ENCODER = "/belt/encoder"
"""sensor_msgs/JointState of the belt roller (robot / twin → belt_speed, calibration)."""
BELT_SPEED = "/belt/speed"
"""geometry_msgs/TwistStamped belt speed (belt_speed → tracker, planner, policy, recorder)."""
OBJECT_TRACKS = "/objects/tracks"
"""r2s2r_interfaces/ObjectTrackArray in ``base_link`` (object_tracker → consumers)."""

TRIAL_OUTCOME = "/trial/outcome"
"""r2s2r_interfaces/TrialOutcome, the operator's judgement (twin → evaluation, recorder)."""
TRIAL_START = "/trial/start"
"""Service r2s2r_interfaces/StartTrial of the twin."""
TRIAL_RESET = "/trial/reset"
"""Service std_srvs/Trigger of the twin."""

OPERATOR_OBJECT_POSES = "/twin/operator/object_poses"
"""ObjectTrackArray of the true object poses, the twin's teleoperator view (the demonstrator's
only: nothing else may read the truth)."""
OPERATOR_BOARD_POSE = "/twin/operator/board_pose"
"""geometry_msgs/PoseStamped: the operator holding the calibration board (calibration → twin);
an empty ``frame_id`` takes the board away."""

CELL_MARKERS = "/cell/markers"
"""visualization_msgs/MarkerArray of the simulated copy (sim_bridge → rviz)."""

CALIBRATION_TRACE = "/calibration/trace"
"""std_msgs/String per procedure call in a grounding session bag (a bag's topic only)."""

HEAD_CAMERA = "head_camera"
"""The head camera's name (the namespace of its topics)."""
HAND_CAMERA = "hand_camera"
"""The hand camera's name (the namespace of its topics)."""


def camera_image(camera: str, *, relative: bool = False) -> str:
    """Return a camera's sensor_msgs/Image topic: ``head_camera`` -> ``/head_camera/image_raw``.

    Args:
        camera: The camera's name (:data:`HEAD_CAMERA`, :data:`HAND_CAMERA`).
        relative: Return the name without the leading ``/`` (resolved in the node's
            namespace, as a camera driver publishes it).

    """
    name = f"{camera}/image_raw"
    return name if relative else f"/{name}"


def camera_info(camera: str, *, relative: bool = False) -> str:
    """Return a camera's sensor_msgs/CameraInfo topic: ``/<camera>/camera_info``.

    Args:
        camera: The camera's name (:data:`HEAD_CAMERA`, :data:`HAND_CAMERA`).
        relative: Return the name without the leading ``/`` (as :func:`camera_image`).

    """
    name = f"{camera}/camera_info"
    return name if relative else f"/{name}"


def sim_camera_image(camera: str) -> str:
    """Return the topic of the simulated copy's render of a camera: ``/sim/<camera>/image_raw``."""
    return f"/sim{camera_image(camera)}"


def joint_trajectory(controller: str) -> str:
    """Return a trajectory controller's trajectory_msgs/JointTrajectory command topic.

    ros2_control's topic interface: ``arm_controller`` -> ``/arm_controller/joint_trajectory``.

    Args:
        controller: The controller's ROS name
            (:func:`r2s2r_description.controllers.controller_name` of its key).

    """
    return f"/{controller}/joint_trajectory"


HEAD_CAMERA_IMAGE = camera_image(HEAD_CAMERA)
"""``/head_camera/image_raw``."""
HEAD_CAMERA_INFO = camera_info(HEAD_CAMERA)
"""``/head_camera/camera_info``."""
HEAD_DEPTH = f"/{HEAD_CAMERA}/depth/image_raw"
"""sensor_msgs/Image (32FC1, m) registered to the head RGB image."""
HAND_CAMERA_IMAGE = camera_image(HAND_CAMERA)
"""``/hand_camera/image_raw``."""
HAND_CAMERA_INFO = camera_info(HAND_CAMERA)
"""``/hand_camera/camera_info``."""
