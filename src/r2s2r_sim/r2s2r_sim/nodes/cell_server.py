"""A :class:`~r2s2r_sim.cell_runtime.SimCell` served over ROS as a real cell's drivers serve it.

One server for every simulated cell on the graph: the real twin (the hidden twin world, the
nominal world published) and the sim bridge's generation mode (a nominal or grounded world,
published as it is). A lifecycle node builds the cell at configure and hands it to a
:class:`CellServer`, which owns the ROS side:

- publishers: ``/clock`` (the cell is the time source), ``/joint_states`` (reliable, deep
  enough for a catch-up burst), ``/belt/encoder``, ``/<camera>/image_raw``,
  ``/<camera>/camera_info``, ``/head_camera/depth/image_raw``, ``/trial/outcome`` (reliable,
  latched for the last trials), optionally ``/tf_static`` (the published world's fixed mounts)
  and ``/twin/operator/object_poses`` (the true object poses, for the demonstrator only);
- subscriptions: ``/arm_controller/joint_trajectory`` and ``/hand_controller/joint_trajectory``
  (validated like ros2_control's joint_trajectory_controller; a bad one is rejected, counted and
  reported), optionally ``/twin/operator/board_pose`` (the operator's calibration board);
- services ``/trial/start`` and ``/trial/reset`` (refused while the server is not active);
- the stepping timer, paced to the wall clock at a real-time factor
  (:class:`~r2s2r_sim.pacing.RealTimePacer`; a reset or a trial start, which hold the cell
  while its world is rebuilt, is a pause the cell resumes from, not a backlog it runs through
  faster than real time), and the values of a ``/diagnostics`` status.

Rendering is the main cost, so a camera is rendered only when it is due and somebody
subscribes to its image, camera_info or (head) depth, like a lazy driver; a subscriber gets
every frame at the world's rate from its first due instant on. Object poses are built only
while the topic has a subscriber.

Everything runs on the node's executor thread: MuJoCo's EGL contexts are bound to the thread
that made them current (see the nodes' ``main``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import (
    Point,
    Pose,
    PoseStamped,
    Quaternion,
    Transform,
    TransformStamped,
    Twist,
    Vector3,
)
from r2s2r_common.camera_info import CameraCalibration, to_camera_info_msg
from r2s2r_common.image_conversion import to_image_msg
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.qos import (
    DEFAULT_QOS,
    JOINT_STATES_QOS,
    LATCHED_QOS,
    OUTCOME_QOS,
    RELIABLE_QOS,
    SENSOR_DATA_QOS,
)
from r2s2r_common.ros.time import stamp_to_s, time_msg
from r2s2r_common.topics import (
    BELT_ENCODER,
    CLOCK,
    HAND_CAMERA_IMAGE,
    HAND_CAMERA_INFO,
    HEAD_CAMERA_IMAGE,
    HEAD_CAMERA_INFO,
    HEAD_DEPTH,
    JOINT_STATES,
    OPERATOR_BOARD_POSE,
    OPERATOR_OBJECT_POSES,
    TF_STATIC,
    TRIAL_OUTCOME,
    TRIAL_RESET,
    TRIAL_START,
    joint_trajectory,
)
from r2s2r_description.cameras import CAMERA_NAMES, HAND, HEAD
from r2s2r_description.controllers import controller_name
from r2s2r_description.frames import BASE_LINK
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.transforms import quat_to_matrix
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from r2s2r_interfaces.msg import ObjectTrack, ObjectTrackArray, TrialOutcome
from r2s2r_interfaces.srv import StartTrial
from r2s2r_sim.cell_runtime import (
    CommandRejected,
    ControlStep,
    SimCell,
    TrialRequestError,
    TrialResult,
)
from r2s2r_sim.pacing import RealTimePacer, periods_per_tick
from tf2_msgs.msg import TFMessage

ENCODER_JOINT = "belt_roller_joint"
"""Joint name of the belt encoder's roller on ``/belt/encoder``."""


@dataclass(frozen=True)
class CellServerOptions:
    """How a :class:`CellServer` serves its cell.

    Attributes:
        real_time_factor: Simulated seconds per wall-clock second.
        tick_rate_hz: Wall-clock rate of the stepping timer.
        max_lag_s: Simulated lag behind the wall clock beyond which the backlog is dropped.
        reset_seed: Seed of the idle cell after ``/trial/reset``.
        camera_frame_ids: ``frame_id`` of each camera's images (and head depth).
        camera_calibrations: ``camera_info`` published with each camera's images.
        publish_tf_static: Publish the published world's fixed mounts on ``/tf_static``.
        publish_object_poses: Publish the true object poses on :data:`OPERATOR_OBJECT_POSES`.
        object_poses_frame_id: Frame of those poses (the cell reports them in ``base_link``).
        board_requests: Take calibration-board requests on :data:`OPERATOR_BOARD_POSE`.
        status_name: Name of the ``/diagnostics`` status.
        hardware_id: Its hardware id.
        status_extra: Values listed before the cell's own (e.g. the node's mode).

    """

    real_time_factor: float
    tick_rate_hz: float
    max_lag_s: float
    reset_seed: int
    camera_frame_ids: Mapping[str, str]
    camera_calibrations: Mapping[str, CameraCalibration]
    publish_tf_static: bool = True
    publish_object_poses: bool = False
    object_poses_frame_id: str = BASE_LINK
    board_requests: bool = False
    status_name: str = "cell"
    hardware_id: str = "sim"
    status_extra: Mapping[str, str] = field(default_factory=dict)


class CellServer:
    """Serve a :class:`SimCell` on a lifecycle node (see the module docstring).

    Publishers, subscriptions and services are made at construction (the node's configure);
    :meth:`activate` starts stepping, :meth:`deactivate` stops it (the cell keeps its state),
    :meth:`close` frees everything and the cell (the node's cleanup).

    Args:
        node: The lifecycle node that owns the server.
        cell: The cell (the server closes it).
        options: What to serve and how.

    Attributes:
        lock: Held around every use of :attr:`cell` (timer, callbacks and the owner's own use).

    """

    def __init__(self, node: LifecycleNode, cell: SimCell, options: CellServerOptions):
        self.node = node
        self.cell = cell
        self.options = options
        self.lock = threading.Lock()
        self.pacer: RealTimePacer | None = None
        self._step_timer: Any = None
        self._step_group = MutuallyExclusiveCallbackGroup()
        self._io_group = MutuallyExclusiveCallbackGroup()
        self._rejected_reported = 0
        topics: list[tuple[str, Any, str, QoSProfile]] = [
            ("joint_states", JointState, JOINT_STATES, JOINT_STATES_QOS),
            ("encoder", JointState, BELT_ENCODER, SENSOR_DATA_QOS),
            ("clock", Clock, CLOCK, DEFAULT_QOS),
            ("outcome", TrialOutcome, TRIAL_OUTCOME, OUTCOME_QOS),
            (f"{HEAD.name}/image", Image, HEAD_CAMERA_IMAGE, SENSOR_DATA_QOS),
            (f"{HEAD.name}/info", CameraInfo, HEAD_CAMERA_INFO, SENSOR_DATA_QOS),
            (f"{HEAD.name}/depth", Image, HEAD_DEPTH, SENSOR_DATA_QOS),
            (f"{HAND.name}/image", Image, HAND_CAMERA_IMAGE, SENSOR_DATA_QOS),
            (f"{HAND.name}/info", CameraInfo, HAND_CAMERA_INFO, SENSOR_DATA_QOS),
        ]
        if options.publish_tf_static:
            topics.append(("tf_static", TFMessage, TF_STATIC, LATCHED_QOS))
        if options.publish_object_poses:
            topics.append(("objects", ObjectTrackArray, OPERATOR_OBJECT_POSES, DEFAULT_QOS))
        self._pubs = {
            key: node.create_lifecycle_publisher(msg_type, topic, qos)
            for key, msg_type, topic, qos in topics
        }
        group = self._io_group
        self._subscriptions = [
            node.create_subscription(
                JointTrajectory,
                joint_trajectory(controller_name(controller)),
                lambda msg, controller=controller: self._on_trajectory(controller, msg),
                RELIABLE_QOS,
                callback_group=group,
            )
            for controller in ("arm", "hand")
        ]
        if options.board_requests:
            self._subscriptions.append(
                node.create_subscription(
                    PoseStamped,
                    OPERATOR_BOARD_POSE,
                    self._on_board_pose,
                    RELIABLE_QOS,
                    callback_group=group,
                )
            )
        self._services = [
            node.create_service(
                StartTrial, TRIAL_START, self._on_start_trial, callback_group=group
            ),
            node.create_service(Trigger, TRIAL_RESET, self._on_reset, callback_group=group),
        ]

    @property
    def active(self) -> bool:
        """Whether the cell is being stepped."""
        return self._step_timer is not None

    # -- lifecycle -----------------------------------------------------------------------------
    def activate(self) -> None:
        """Publish ``/tf_static`` (when asked to) and start stepping in real time."""
        options, cell = self.options, self.cell
        if options.publish_tf_static:
            self._publish_tf_static()
        self.pacer = RealTimePacer(
            cell.control_period_s,
            options.real_time_factor,
            max_lag_s=options.max_lag_s,
            max_periods_per_call=periods_per_tick(
                options.real_time_factor, options.tick_rate_hz, cell.control_period_s
            ),
        )
        self.pacer.start(time.monotonic())
        self._step_timer = self.node.create_timer(
            1.0 / options.tick_rate_hz, self._on_tick, callback_group=self._step_group
        )

    def deactivate(self) -> None:
        """Stop stepping (the simulation pauses; the cell keeps its state)."""
        if self._step_timer is not None:
            self.node.destroy_timer(self._step_timer)
            self._step_timer = None

    def close(self) -> None:
        """Stop, free the cell and every publisher, subscription and service."""
        self.deactivate()
        with self.lock:
            self.cell.close()
        for subscription in self._subscriptions:
            self.node.destroy_subscription(subscription)
        for service in self._services:
            self.node.destroy_service(service)
        for publisher in self._pubs.values():
            self.node.destroy_lifecycle_publisher(publisher)
        self._subscriptions, self._services, self._pubs = [], [], {}

    # -- stepping ------------------------------------------------------------------------------
    def _on_tick(self) -> None:
        with self.lock:
            cell, pacer = self.cell, self.pacer
            if pacer is None:
                return
            periods = pacer.due(time.monotonic())
            if periods > 0:
                self._update_camera_demand()
            for _ in range(periods):
                step = cell.step_control()
                started = time.perf_counter()
                self._publish_step(step)
                cell.costs.publish_s += time.perf_counter() - started
            pacer.done(periods)

    def _update_camera_demand(self) -> None:
        """Render only cameras somebody subscribes to (image or depth), like a lazy driver."""
        cell = self.cell
        for name in CAMERA_NAMES:
            streams = [f"{name}/image", f"{name}/info"]
            cell.camera_demand[name] = any(
                self._pubs[key].get_subscription_count() > 0 for key in streams
            )
        head_depth = self._pubs[f"{HEAD.name}/depth"].get_subscription_count() > 0
        cell.depth_demand = head_depth
        cell.camera_demand[HEAD.name] = cell.camera_demand[HEAD.name] or head_depth

    def _publish_step(self, step: ControlStep) -> None:
        stamp = time_msg(step.time_s)
        self._pubs["clock"].publish(Clock(clock=stamp))
        joints = JointState(
            name=list(ALL_JOINT_NAMES),
            position=step.joint_positions.tolist(),
            velocity=step.joint_velocities.tolist(),
        )
        joints.header.stamp = stamp
        self._pubs["joint_states"].publish(joints)
        if step.encoder_angle_rad is not None:
            encoder = JointState(name=[ENCODER_JOINT], position=[step.encoder_angle_rad])
            encoder.header.stamp = stamp
            self._pubs["encoder"].publish(encoder)
        objects = self._pubs.get("objects")
        if objects is not None and objects.get_subscription_count() > 0:
            objects.publish(self._object_poses(stamp))
        for frame in step.frames:
            name = frame.camera_name
            frame_id = self.options.camera_frame_ids[name]
            self._pubs[f"{name}/image"].publish(to_image_msg(frame.rgb, "rgb8", stamp, frame_id))
            self._pubs[f"{name}/info"].publish(
                to_camera_info_msg(self.options.camera_calibrations[name], stamp, frame_id)
            )
            if frame.depth_m is not None:
                self._pubs[f"{name}/depth"].publish(
                    to_image_msg(frame.depth_m, "32FC1", stamp, frame_id)
                )
        if step.outcome is not None:
            self._publish_outcome(step.outcome)

    def _object_poses(self, stamp: Any) -> ObjectTrackArray:
        array = ObjectTrackArray()
        array.header.stamp = stamp
        array.header.frame_id = self.options.object_poses_frame_id
        for track in self.cell.object_tracks():
            x, y, z = track.position_m.tolist()
            qw, qx, qy, qz = track.quat_wxyz.tolist()
            vx, vy, vz = track.linear_velocity_mps.tolist()
            array.tracks.append(
                ObjectTrack(
                    id=track.track_id,
                    object_type=track.object_type,
                    pose=Pose(
                        position=Point(x=x, y=y, z=z),
                        orientation=Quaternion(w=qw, x=qx, y=qy, z=qz),
                    ),
                    twist=Twist(linear=Vector3(x=vx, y=vy, z=vz)),
                )
            )
        return array

    def _publish_outcome(self, result: TrialResult) -> None:
        msg = TrialOutcome(
            trial_id=result.trial_id,
            seed=result.seed,
            condition=result.condition,
            object_type=result.object_type,
            success=result.success,
            reason=result.reason,
            duration_s=result.duration_s,
        )
        msg.header.stamp = time_msg(result.time_s)
        self._pubs["outcome"].publish(msg)
        self.node.get_logger().info(
            f"trial {result.trial_id} (seed {result.seed}, {result.object_type}): "
            f"{result.reason} after {result.duration_s:.2f} s"
        )

    def _publish_tf_static(self) -> None:
        stamp = time_msg(self.cell.time_s)
        transforms = []
        for mount in self.cell.static_transforms():
            msg = TransformStamped(child_frame_id=mount.child, transform=Transform())
            msg.header.stamp = stamp
            msg.header.frame_id = mount.parent
            t, q = msg.transform.translation, msg.transform.rotation
            t.x, t.y, t.z = mount.translation_m
            q.w, q.x, q.y, q.z = mount.quat_wxyz
            transforms.append(msg)
        self._pubs["tf_static"].publish(TFMessage(transforms=transforms))

    # -- commands and services -----------------------------------------------------------------
    def _on_trajectory(self, controller: str, msg: JointTrajectory) -> None:
        points = msg.points
        times = [stamp_to_s(point.time_from_start) for point in points]
        positions = [list(point.positions) for point in points]
        # ros2_control: velocities are given for every point or for none.
        any_velocities = any(len(point.velocities) > 0 for point in points)
        velocities = [list(point.velocities) for point in points] if any_velocities else None
        start = stamp_to_s(msg.header.stamp)
        with self.lock:
            if not self.active:
                self.node.get_logger().warning(
                    f"{controller} trajectory dropped: the cell is not active",
                    throttle_duration_sec=5.0,
                )
                return
            try:
                self.cell.command(
                    controller,
                    list(msg.joint_names),
                    times,
                    positions,
                    velocities,
                    start_time_s=start if start > 0.0 else None,
                )
            except CommandRejected as error:
                self.node.get_logger().warning(
                    f"trajectory rejected: {error}", throttle_duration_sec=2.0
                )

    def _on_board_pose(self, msg: PoseStamped) -> None:
        """Move the board as asked (empty frame_id: take it away); log refused requests."""
        position, orientation = msg.pose.position, msg.pose.orientation
        pose = np.eye(4)
        pose[:3, :3] = quat_to_matrix((orientation.w, orientation.x, orientation.y, orientation.z))
        pose[:3, 3] = (position.x, position.y, position.z)
        with self.lock:
            try:
                if msg.header.frame_id == "":
                    self.cell.remove_board()
                else:
                    self.cell.place_board(msg.header.frame_id, pose)
            except ValueError as error:
                self.node.get_logger().warning(f"board pose refused: {error}")
                return
        where = msg.header.frame_id or "away"
        self.node.get_logger().info(f"operator: calibration board {where}")

    def _on_start_trial(
        self, request: StartTrial.Request, response: StartTrial.Response
    ) -> StartTrial.Response:
        with self.lock:
            if not self.active:
                response.success, response.message = False, "the cell is not active"
                return response
            try:
                response.trial_id = self.cell.start_trial(int(request.seed), str(request.condition))
            except TrialRequestError as error:
                response.success, response.message = False, str(error)
                return response
            finally:
                self._resume_pacing()
        response.success = True
        response.message = f"trial {response.trial_id} started (seed {request.seed})"
        self.node.get_logger().info(response.message + f", condition {request.condition!r}")
        return response

    def _resume_pacing(self) -> None:
        """After a reset or a trial start (the lock held): go on from now, no catch-up burst."""
        if self.pacer is not None:
            self.pacer.resume(time.monotonic())

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self.lock:
            if not self.active:
                response.success, response.message = False, "the cell is not active"
                return response
            self.cell.reset(self.options.reset_seed)
            self._resume_pacing()
        response.success, response.message = True, "cell reset: robot home, belt clear, idle"
        return response

    # -- diagnostics ---------------------------------------------------------------------------
    def diagnostics(self) -> DiagnosticArray:
        """Return the cell's status, stamped with cell time.

        WARN when commands were rejected since the last call, or when stepping falls behind
        the real-time factor.
        """
        with self.lock:
            cell, pacer, options = self.cell, self.pacer, self.options
            counters, costs = cell.counters, cell.costs
            achieved = pacer.achieved_rtf(time.monotonic()) if pacer is not None else 0.0
            values = {
                **options.status_extra,
                "state": "active" if self.active else "inactive",
                "real_time_factor_target": f"{options.real_time_factor:.3f}",
                "real_time_factor": f"{achieved:.3f}",
                "real_time_factor_capacity": f"{costs.rtf_capacity:.3f}",
                "sim_time_s": f"{cell.time_s:.3f}",
                "lag_resets": str(pacer.lag_resets if pacer is not None else 0),
                "commands_accepted": str(counters.accepted),
                "commands_rejected": str(counters.rejected),
                "last_rejection": counters.last_rejection,
                "trial_state": cell.trial_state.value,
                "trial_id": str(cell.trial_id),
                "trials_started": str(counters.trials_started),
                "trials_finished": str(counters.trials_finished),
                "trials_aborted": str(counters.trials_aborted),
                "physics_s": f"{costs.physics_s:.3f}",
                "render_s": f"{costs.render_s:.3f}",
                "publish_s": f"{costs.publish_s:.3f}",
            }
            newly_rejected = counters.rejected - self._rejected_reported
            self._rejected_reported = counters.rejected
            stamp = time_msg(cell.time_s)
        level, message = DiagnosticStatus.OK, f"trial {values['trial_state']}"
        if newly_rejected > 0:
            level = DiagnosticStatus.WARN
            message = f"{newly_rejected} trajectory command(s) rejected: {values['last_rejection']}"
        elif self.active and achieved < 0.9 * options.real_time_factor:
            level = DiagnosticStatus.WARN
            message = f"running slower than real time x{options.real_time_factor}: x{achieved:.2f}"
        array = diagnostics_array(
            options.status_name,
            level,
            message,
            options.hardware_id,
            values,
            stamp,
        )
        return array

    def time_s(self) -> float:
        """Return the cell time (s)."""
        with self.lock:
            return self.cell.time_s
