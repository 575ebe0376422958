"""``planner``: plans a planner-style pick of the currently tracked object on request.

Service ``~/plan_pick`` (std_srvs/Trigger): takes the newest ``/objects/tracks`` (object pose in
``base_link``), ``/joint_states`` and ``/belt/speed``, plans with :class:`PickPlanner` (OMPL, or
MoveIt where installed) on the world of ``world_path`` (grounded by ``grounding_artifact`` when
given: base, belt and bins where the cell's TF has them) and publishes the result on
``/arm_controller/joint_trajectory`` and ``/hand_controller/joint_trajectory``, stamped to
start ``start_delay_s`` after the request: the controllers hold until then, so planning and
transport do not delay the motion. The response's ``message``
gives the plan summary or the refusal reason.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Literal

import numpy as np
from geometry_msgs.msg import TwistStamped
from pydantic import Field
from r2s2r_common.config import ConfigModel, resolve_config_path
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.runner import run_node
from r2s2r_common.stamps import set_stamp, stamp_to_s
from r2s2r_common.topics import BELT_SPEED, JOINT_STATES, OBJECT_TRACKS, joint_trajectory
from r2s2r_description.controllers import ARM, HAND, controller_name
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.transforms import quat_to_matrix
from r2s2r_world.grounding import load_cell_world
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from r2s2r_planner.config import PlannerConfig, load_planner_config
from r2s2r_planner.intercept import BeltObjectState
from r2s2r_planner.motion import make_planner
from r2s2r_planner.pick import JointCommand, PickError, PickPlanner


class PlannerNodeConfig(ConfigModel):
    """Parameters of the ``planner`` node."""

    world_path: str = Field(
        default="world/nominal.yaml",
        description="World YAML (nominal or grounded); relative paths are under config/.",
    )
    grounding_artifact: str = Field(
        default="",
        description="Grounding artifact YAML whose world_overrides ground world_path (plan on "
        "the grounded cell); empty = world_path as it is.",
    )
    planner_config_path: str = Field(
        default="", description="Planner core YAML (config/planner/planner.yaml); empty: defaults."
    )
    backend: Literal["ompl", "moveit"] = Field(default="ompl", description="Planning backend.")
    track_timeout_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="Tracks older than this are not planned on."
    )
    start_delay_s: float = Field(
        default=1.0,
        gt=0.0,
        le=10.0,
        description="The plan starts this long after the request (header.stamp; the "
        "controllers hold until then); planning that takes longer (wall clock) is re-planned "
        "once, then refused.",
    )


def to_trajectory_msg(command: JointCommand, start_s: float = 0.0) -> JointTrajectory:
    """Convert a :class:`JointCommand` to a JointTrajectory message.

    Args:
        command: The command.
        start_s: ``header.stamp``: when the controller starts it (ROS time, s); 0 = on receipt.

    """
    message = JointTrajectory()
    if start_s > 0.0:
        set_stamp(message.header.stamp, start_s)
    message.joint_names = list(command.joint_names)
    for index, time_s in enumerate(command.times_s):
        point = JointTrajectoryPoint()
        point.positions = [float(v) for v in command.positions[index]]
        if command.velocities is not None:
            point.velocities = [float(v) for v in command.velocities[index]]
        set_stamp(point.time_from_start, float(time_s))
        message.points.append(point)
    return message


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = PlannerNodeConfig


class PlannerNode(Node):
    """See the module docstring.

    Raises:
        r2s2r_common.config.ConfigError: Bad parameters or config files (startup fails).

    """

    def __init__(self, node_name: str = "planner", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, PARAMETER_SCHEMA)
        world = load_cell_world(
            resolve_config_path(self.config.world_path), self.config.grounding_artifact
        )
        core = (
            load_planner_config(self.config.planner_config_path)
            if self.config.planner_config_path
            else PlannerConfig()
        )
        planner = make_planner(self.config.backend, world.layout(), core.motion, core.timing)
        self.pick_planner = PickPlanner(world, core, planner)
        self._base_pose = world.robot.base_pose.to_pose().matrix()
        self._lock = threading.Lock()
        self._tracks: Any = None
        self._joints: dict[str, float] = {}
        self._belt_speed_mps: float | None = None
        sensors = MutuallyExclusiveCallbackGroup()
        planning = MutuallyExclusiveCallbackGroup()
        try:
            from r2s2r_interfaces.msg import ObjectTrackArray
        except ImportError:  # built by the workspace; without it the node can only refuse
            self.get_logger().error("r2s2r_interfaces not importable: no /objects/tracks")
        else:
            self.create_subscription(
                ObjectTrackArray, OBJECT_TRACKS, self._on_tracks, 10, callback_group=sensors
            )
        self.create_subscription(
            JointState, JOINT_STATES, self._on_joints, 10, callback_group=sensors
        )
        self.create_subscription(
            TwistStamped, BELT_SPEED, self._on_belt, 10, callback_group=sensors
        )
        self._arm_pub = self.create_publisher(
            JointTrajectory, joint_trajectory(controller_name(ARM)), 10
        )
        self._hand_pub = self.create_publisher(
            JointTrajectory, joint_trajectory(controller_name(HAND)), 10
        )
        self.create_service(Trigger, "~/plan_pick", self._on_plan_pick, callback_group=planning)
        self.get_logger().info(f"planner ready ({planner.name} backend)")

    def _on_tracks(self, msg: Any) -> None:
        # The newest message that saw an object: a frame the tracker missed does not hide it
        # (track_timeout_s refuses one that is too old).
        if msg.tracks:
            with self._lock:
                self._tracks = msg

    def _on_joints(self, msg: JointState) -> None:
        with self._lock:
            self._joints.update(zip(msg.name, map(float, msg.position), strict=False))

    def _on_belt(self, msg: TwistStamped) -> None:
        with self._lock:
            self._belt_speed_mps = float(msg.twist.linear.x)

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def plan_pick(self) -> tuple[bool, str]:
        """Plan and publish a pick of the first tracked object; returns (success, message).

        A plan that took longer than ``start_delay_s`` (wall-clock seconds: its motion would
        start late) is planned again once from the newest inputs; one late again is not sent.
        """
        budget_s = self.config.start_delay_s
        message = ""
        for _ in range(2):
            # Wall time: with use_sim_time the ROS clock stands still while this callback runs.
            started_s = time.monotonic()
            ok, message, plan = self._plan_once()
            if not ok or plan is None:
                return False, message
            took_s = time.monotonic() - started_s
            if took_s <= budget_s:
                start_s = plan.arm.send_time_s
                self._arm_pub.publish(to_trajectory_msg(plan.arm, start_s))
                self._hand_pub.publish(to_trajectory_msg(plan.hand, start_s))
                return True, f"{message}; planned in {took_s:.2f} s"
            message = (
                f"planning took {took_s:.2f} s, more than start_delay_s = {budget_s:.2f} s: "
                "not sent (the motion would start late)"
            )
        return False, message

    def _plan_once(self) -> tuple[bool, str, Any]:
        """Plan on the newest inputs: (success, message, the plan or None)."""
        with self._lock:
            tracks, joints, speed = self._tracks, dict(self._joints), self._belt_speed_mps
        if tracks is None:
            return False, f"no tracked object on {OBJECT_TRACKS}", None
        missing = [n for n in ALL_JOINT_NAMES if n not in joints]
        if missing:
            return False, f"no {JOINT_STATES} for {missing}", None
        if speed is None:
            return False, f"no {BELT_SPEED}", None
        now = self._now_s()
        # The plan starts start_delay_s from now, stamped so: the controllers hold until then,
        # so the time spent planning and sending does not make the motion late.
        start_s = now + self.config.start_delay_s
        stamp = stamp_to_s(tracks.header.stamp) or now
        if now - stamp > self.config.track_timeout_s:
            limit_s = self.config.track_timeout_s
            return False, f"no tracked object in the last {limit_s} s ({now - stamp:.2f} s)", None
        track = tracks.tracks[0]
        pose = np.eye(4)
        q = track.pose.orientation
        pose[:3, :3] = quat_to_matrix([q.w, q.x, q.y, q.z])
        pose[:3, 3] = [track.pose.position.x, track.pose.position.y, track.pose.position.z]
        in_world = self._base_pose @ pose
        state = BeltObjectState(in_world[:3, 3], stamp, self.pick_planner.belt_pose, speed)
        current = np.array([joints[n] for n in ALL_JOINT_NAMES])
        try:
            plan = self.pick_planner.plan_pick(
                track.object_type, state, in_world[:3, :3], current, start_s
            )
        except PickError as error:
            return False, str(error), None
        phases = plan.phase_times_s
        return (
            True,
            f"pick of {track.object_type} (track {track.id}) into {plan.target_bin}: grasp at "
            f"{phases['grasp'] - now:.2f} s, released at {phases['released'] - now:.2f} s",
            plan,
        )

    def _on_plan_pick(
        self, request: Trigger.Request, response: Trigger.Response
    ) -> Trigger.Response:
        del request
        response.success, response.message = self.plan_pick()
        # Two call sites: rclpy refuses one call site logging at two severities.
        if response.success:
            self.get_logger().info(response.message)
        else:
            self.get_logger().warning(response.message)
        return response


def main(args: list[str] | None = None) -> None:
    """Run the planner node on a single-threaded executor.

    A plan uses the joint states, tracks and belt speed received before the request; newer
    ones wait in their queues. rclpy's MultiThreadedExecutor would update them during planning
    but spends a whole core and drops most samples of the 500 Hz ``/joint_states``.
    """
    sys.exit(run_node(PlannerNode, SingleThreadedExecutor, args))
