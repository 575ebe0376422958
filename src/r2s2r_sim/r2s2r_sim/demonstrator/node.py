"""ROS wrapper of the human-like demonstrator: drives the real twin like a teleoperator.

Reads ``/joint_states`` and the twin's operator view ``/twin/operator/object_poses`` (the
operator's eyes; twin only), acts only through ``/arm_controller/joint_trajectory`` and
``/hand_controller/joint_trajectory``, starts trials with ``/trial/start`` (seed + i,
condition) and reads ``/trial/outcome``. One demonstrator (seed + i) per trial.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.qos import DEFAULT_QOS, RELIABLE_QOS
from r2s2r_description.robot import ALL_JOINT_NAMES
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from r2s2r_sim.cell_runtime import resolve_config_path
from r2s2r_sim.demonstrator.config import DemonstratorStyle
from r2s2r_sim.demonstrator.core import (
    HumanLikeDemonstrator,
    JointCommand,
    ObjectObservation,
    Observation,
)
from r2s2r_sim.world import load_world

OUTCOME_QOS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class DemonstratorNodeConfig(ConfigModel):
    """Parameters of the ``demonstrator`` node."""

    trials: int = Field(default=20, ge=0, le=100000, description="Trials to run (0: none).")
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the first trial.")
    condition: str = Field(
        default="nominal",
        description="Trial condition: '', nominal, lighting, belt_speed or unseen_object.",
    )
    act_rate_hz: float = Field(default=50.0, gt=0.0, le=500.0, description="Look-and-act rate.")
    reach_world_path: str = Field(
        default="world/nominal.yaml",
        description="World file the operator believes in (the NOMINAL world, never the twin's); "
        "relative paths resolve against the config/ folder.",
    )
    style: DemonstratorStyle = Field(default_factory=DemonstratorStyle)


def to_trajectory_msg(command: JointCommand) -> JointTrajectory:
    """Convert a :class:`JointCommand` to a JointTrajectory (zero stamp: start now)."""
    msg = JointTrajectory()
    msg.joint_names = list(command.joint_names)
    for t, positions in zip(command.times_s, command.positions, strict=True):
        seconds = int(t)
        msg.points.append(
            JointTrajectoryPoint(
                positions=[float(p) for p in positions],
                time_from_start=Duration(sec=seconds, nanosec=round((t - seconds) * 1e9)),
            )
        )
    return msg


def joint_vector(msg: JointState) -> np.ndarray | None:
    """Positions in :data:`ALL_JOINT_NAMES` order, or None if a joint is missing."""
    index = {name: i for i, name in enumerate(msg.name)}
    if any(n not in index for n in ALL_JOINT_NAMES) or len(msg.position) != len(msg.name):
        return None
    return np.array([msg.position[index[n]] for n in ALL_JOINT_NAMES])


def objects_from_msg(msg: Any) -> tuple[ObjectObservation, ...]:
    """ObjectTrackArray → observations (ids as strings)."""
    result = []
    for track in msg.tracks:
        p, q, v = track.pose.position, track.pose.orientation, track.twist.linear
        result.append(
            ObjectObservation(
                object_id=str(track.id),
                type_name=track.object_type,
                position_m=np.array([p.x, p.y, p.z]),
                quat_wxyz=np.array([q.w, q.x, q.y, q.z]),
                velocity_mps=np.array([v.x, v.y, v.z]),
            )
        )
    return tuple(result)


def stamp_s(stamp: Any) -> float:
    """Convert a builtin_interfaces/Time to seconds."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


class DemonstratorNode(Node):
    """Runs ``trials`` demonstrations on the twin through its controller topics."""

    def __init__(self) -> None:
        super().__init__("demonstrator")
        from r2s2r_interfaces.msg import ObjectTrackArray, TrialOutcome
        from r2s2r_interfaces.srv import StartTrial

        self.config = declare_config(self, DemonstratorNodeConfig)
        self.reach_world = load_world(resolve_config_path(self.config.reach_world_path))
        self._start_type = StartTrial
        self.arm_pub = self.create_publisher(
            JointTrajectory, "/arm_controller/joint_trajectory", RELIABLE_QOS
        )
        self.hand_pub = self.create_publisher(
            JointTrajectory, "/hand_controller/joint_trajectory", RELIABLE_QOS
        )
        self.create_subscription(JointState, "/joint_states", self._on_joints, DEFAULT_QOS)
        self.create_subscription(
            ObjectTrackArray, "/twin/operator/object_poses", self._on_objects, DEFAULT_QOS
        )
        self.create_subscription(TrialOutcome, "/trial/outcome", self._on_outcome, OUTCOME_QOS)
        self.start_client: Any = self.create_client(StartTrial, "/trial/start")
        self.joints: np.ndarray | None = None
        self.joints_time_s = 0.0
        self.objects: tuple[ObjectObservation, ...] = ()
        self.demonstrator: HumanLikeDemonstrator | None = None
        self.trial_index = 0
        self.trial_id: int | None = None
        self.pending_start = False
        self.outcomes: list[tuple[int, bool, str, float]] = []
        self.commands_sent = 0
        self.create_timer(1.0 / self.config.act_rate_hz, self._tick)

    # -- inputs ----------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        vector = joint_vector(msg)
        if vector is None:
            self.get_logger().warn("joint_states without all 18 joints: ignored", once=True)
            return
        self.joints = vector
        self.joints_time_s = stamp_s(msg.header.stamp)

    def _on_objects(self, msg: Any) -> None:
        self.objects = objects_from_msg(msg)

    def _on_outcome(self, msg: Any) -> None:
        if self.trial_id is None or int(msg.trial_id) != self.trial_id:
            return
        self.outcomes.append((self.trial_id, bool(msg.success), str(msg.reason), msg.duration_s))
        successes = sum(1 for o in self.outcomes if o[1])
        self.get_logger().info(
            f"trial {msg.trial_id}: {msg.reason} after {msg.duration_s:.2f} s "
            f"({successes}/{len(self.outcomes)} successes)"
        )
        self.trial_id = None
        self.demonstrator = None
        self.trial_index += 1

    # -- trials ----------------------------------------------------------------------------
    def _start_next_trial(self) -> None:
        if self.pending_start or not self.start_client.service_is_ready():
            return
        request = self._start_type.Request()
        request.seed = self.config.seed + self.trial_index
        request.condition = self.config.condition
        self.pending_start = True
        self.start_client.call_async(request).add_done_callback(self._on_started)

    def _on_started(self, future: Any) -> None:
        self.pending_start = False
        response = future.result()
        if response is None or not response.success:
            self.get_logger().error(f"/trial/start failed: {getattr(response, 'message', '')}")
            return
        self.trial_id = int(response.trial_id)
        self.objects = ()
        self.demonstrator = HumanLikeDemonstrator(
            self.reach_world, self.config.seed + self.trial_index, self.config.style
        )

    def _tick(self) -> None:
        if self.trial_id is None:
            if self.trial_index < self.config.trials:
                self._start_next_trial()
            return
        if self.demonstrator is None or self.joints is None:
            return
        observation = Observation(self.joints_time_s, self.joints, self.objects)
        for command in self.demonstrator.act(observation):
            publisher = self.arm_pub if command.controller == "arm" else self.hand_pub
            publisher.publish(to_trajectory_msg(command))
            self.commands_sent += 1


def main(args: list[str] | None = None) -> None:
    """Run the demonstrator node."""
    rclpy.init(args=args)
    node = DemonstratorNode()
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
