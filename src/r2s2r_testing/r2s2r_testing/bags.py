"""Synthetic episode bags (rosbag2, MCAP) built from real ROS message types (serialized with rclpy).

An episode's messages (:func:`episode_messages`: both cameras, joint states, both controllers'
commands, belt speed, object tracks, optionally the trial outcome) follow the periods below;
:class:`EpisodeSpec` spoils them on purpose (missing topics, an encoding switch, a non-monotonic
joint stamp, unstamped commands). :func:`write_episode_bag` writes them as the recorder does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import TwistStamped
from r2s2r_common.topics import (
    BELT_SPEED,
    HAND_CAMERA_IMAGE,
    HEAD_CAMERA_IMAGE,
    JOINT_STATES,
    OBJECT_TRACKS,
    TRIAL_OUTCOME,
    joint_trajectory,
)
from r2s2r_description.controllers import ARM as ARM_CONTROLLER
from r2s2r_description.controllers import HAND as HAND_CONTROLLER
from r2s2r_description.controllers import controller_name
from r2s2r_description.frames import BASE_LINK
from r2s2r_recorder.bag_format import EpisodeInfo
from r2s2r_recorder.bag_writer import EpisodeBagWriter
from r2s2r_recorder.msg_types import make_typestore
from rclpy.serialization import serialize_message
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

ARM = ["arm_j1", "arm_j2", "arm_j3"]
HAND = ["hand_j1", "hand_j2"]
BASE_NS = 1_700_000_000_000_000_000
RECEIVE_DELAY_NS = 1_000_000
CAM_PERIOD_NS = 33_333_333
JOINT_PERIOD_NS = 10_000_000
ARM_PERIOD_NS = 200_000_000
HAND_PERIOD_NS = 500_000_000
BELT_PERIOD_NS = 100_000_000
TRACK_PERIOD_NS = 50_000_000
ARM_START_NS = 50_000_000
HAND_START_NS = 60_000_000


def stamp_of(ns: int) -> tuple[int, int]:
    """(sec, nanosec) of a time in nanoseconds."""
    return ns // 1_000_000_000, ns % 1_000_000_000


def joint_value(name_index: int, t_ns: int) -> float:
    """Position of joint ``name_index`` in ``/joint_states`` at ``t_ns`` (rad)."""
    return math.sin((t_ns - BASE_NS) * 1e-9 + name_index)


def arm_value(k: int, j: int) -> float:
    """Position of arm joint ``j`` in the ``k``-th arm command (rad)."""
    return 0.1 * k + j


def hand_value(k: int, j: int) -> float:
    """Position of hand joint ``j`` in the ``k``-th hand command (rad)."""
    return -0.05 * k - j


def image_msg(t_ns: int, index: int, encoding: str, value_offset: int) -> Image:
    """Make a 64×48 camera image stamped ``t_ns``; its red channel is ``index`` mod 256."""
    msg = Image()
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_of(t_ns)
    msg.header.frame_id = "cam_optical_frame"
    msg.height, msg.width = 48, 64
    msg.encoding = encoding
    msg.step = 64 * 3
    rgb = np.zeros((48, 64, 3), dtype=np.uint8)
    rgb[..., 0] = index % 256
    rgb[..., 1] = value_offset
    rgb[..., 2] = 200
    if encoding == "bgr8":
        rgb = rgb[..., ::-1]
    msg.data = np.ascontiguousarray(rgb).tobytes()
    return msg


def tracks_bytes(typestore: Any, t_ns: int) -> bytes:
    """CDR bytes of one ``ObjectTrackArray`` (a cube moving at 0.1 m/s) stamped ``t_ns``."""
    T = typestore.types
    sec, nanosec = stamp_of(t_ns)
    x = 0.1 * (t_ns - BASE_NS) * 1e-9
    track = T["r2s2r_interfaces/msg/ObjectTrack"](
        id=7,
        object_type="cube",
        pose=T["geometry_msgs/msg/Pose"](
            position=T["geometry_msgs/msg/Point"](x=x, y=0.5, z=0.02),
            orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
        twist=T["geometry_msgs/msg/Twist"](
            linear=T["geometry_msgs/msg/Vector3"](x=0.1, y=0.0, z=0.0),
            angular=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
        ),
    )
    msg = T["r2s2r_interfaces/msg/ObjectTrackArray"](
        header=T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=BASE_LINK
        ),
        tracks=[track],
    )
    return bytes(typestore.serialize_cdr(msg, "r2s2r_interfaces/msg/ObjectTrackArray"))


@dataclass
class EpisodeSpec:
    """What an episode bag holds, and what is wrong with it on purpose."""

    duration_ns: int = 1_500_000_000
    outcome: str = "success"
    omit_topics: set[str] = field(default_factory=set)
    hand_encoding: str = "bgr8"
    switch_encoding_at: int | None = None
    non_monotonic_joint_at: int | None = None
    outcome_message: str | None = None
    zero_stamp_commands: bool = False


def episode_messages(spec: EpisodeSpec) -> list[tuple[int, str, str, bytes]]:
    """All messages of an episode as (receive_ns, topic, msgtype, cdr), time-ordered."""
    typestore = make_typestore()
    out: list[tuple[int, str, str, bytes]] = []

    def add(t_ns: int, topic: str, msgtype: str, data: bytes) -> None:
        out.append((t_ns + RECEIVE_DELAY_NS, topic, msgtype, data))

    end = BASE_NS + spec.duration_ns
    for i, t in enumerate(range(BASE_NS, end, CAM_PERIOD_NS)):
        add(
            t,
            HEAD_CAMERA_IMAGE,
            "sensor_msgs/msg/Image",
            serialize_message(image_msg(t, i, "rgb8", 10)),
        )
        encoding = spec.hand_encoding
        if spec.switch_encoding_at is not None and i >= spec.switch_encoding_at:
            encoding = "rgb8" if encoding == "bgr8" else "bgr8"
        add(
            t + 2_000_000,
            HAND_CAMERA_IMAGE,
            "sensor_msgs/msg/Image",
            serialize_message(image_msg(t + 2_000_000, i, encoding, 20)),
        )
    for i, t in enumerate(range(BASE_NS, end, JOINT_PERIOD_NS)):
        msg = JointState()
        stamp_ns = t
        if spec.non_monotonic_joint_at is not None and i == spec.non_monotonic_joint_at:
            stamp_ns = t - 5 * JOINT_PERIOD_NS
        msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_of(stamp_ns)
        msg.name = ARM + HAND + ["belt_roller"]
        msg.position = [joint_value(j, t) for j in range(len(ARM + HAND))] + [0.0]
        add(t, JOINT_STATES, "sensor_msgs/msg/JointState", serialize_message(msg))
    for k, t in enumerate(range(BASE_NS + ARM_START_NS, end, ARM_PERIOD_NS)):
        add(
            t,
            joint_trajectory(controller_name(ARM_CONTROLLER)),
            "trajectory_msgs/msg/JointTrajectory",
            serialize_message(
                trajectory(t, ARM, [arm_value(k, j) for j in range(3)], spec.zero_stamp_commands)
            ),
        )
    for k, t in enumerate(range(BASE_NS + HAND_START_NS, end, HAND_PERIOD_NS)):
        add(
            t,
            joint_trajectory(controller_name(HAND_CONTROLLER)),
            "trajectory_msgs/msg/JointTrajectory",
            serialize_message(
                trajectory(t, HAND, [hand_value(k, j) for j in range(2)], spec.zero_stamp_commands)
            ),
        )
    for k, t in enumerate(range(BASE_NS, end, BELT_PERIOD_NS)):
        msg = TwistStamped()
        msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_of(t)
        msg.twist.linear.x = 0.1 + 0.001 * k
        add(t, BELT_SPEED, "geometry_msgs/msg/TwistStamped", serialize_message(msg))
    for t in range(BASE_NS, end, TRACK_PERIOD_NS):
        add(
            t,
            OBJECT_TRACKS,
            "r2s2r_interfaces/msg/ObjectTrackArray",
            tracks_bytes(typestore, t),
        )
    if spec.outcome_message is not None:
        add(
            end - 1,
            TRIAL_OUTCOME,
            "std_msgs/msg/String",
            serialize_message(String(data=spec.outcome_message)),
        )
    out = [m for m in out if m[1] not in spec.omit_topics]
    out.sort(key=lambda m: m[0])
    return out


def trajectory(
    t_ns: int, names: list[str], positions: list[float], zero_stamp: bool
) -> JointTrajectory:
    """Make a one-point command for ``names`` (unstamped when ``zero_stamp``)."""
    msg = JointTrajectory()
    if not zero_stamp:
        msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_of(t_ns)
    msg.joint_names = names
    point = JointTrajectoryPoint()
    point.positions = positions
    point.time_from_start = Duration(sec=0, nanosec=200_000_000)
    msg.points = [point]
    return msg


def write_episode_bag(bag_dir: Path, spec: EpisodeSpec, episode_id: str | None = None) -> Path:
    """Write the episode's messages as a finished episode bag at ``bag_dir``; return it."""
    info = EpisodeInfo(
        episode_id=episode_id or bag_dir.name,
        object_type="cube",
        belt_speed_mps=0.1,
        outcome=spec.outcome,  # type: ignore[arg-type]
        operator_notes="synthetic",
    )
    writer = EpisodeBagWriter(bag_dir, info)
    for receive_ns, topic, msgtype, data in episode_messages(spec):
        writer.add_topic(topic, msgtype, "sensor_data" if "image" in topic else "default")
        writer.write(topic, data, receive_ns)
    writer.close()
    return bag_dir
