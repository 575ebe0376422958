"""The ROS interface of a simulated cell, shared by ``real_twin`` and ``sim_bridge`` (generation).

:class:`CellServer` serves a :class:`~r2s2r_sim.cell_runtime.SimCell` through a lifecycle node
with exactly the topics a real cell has (see DESIGN.md section 4 and the twin contract): camera
images with the cell's published camera_info, registered head depth, ``/joint_states``, the belt
encoder, ``/clock``, ``/tf_static``, ``/trial/outcome``, the two joint_trajectory_controller
command topics (validated by the cell; rejections counted), the ``/trial/start`` and
``/trial/reset`` services and the cell's diagnostic status. It paces the cell to the wall clock
with a timer (never a sleep loop).

It knows nothing of the twin's hidden world or the twin-only operator topics: the twin adds
those in its own module (the bridge must never offer them).

Threading: every callback takes :attr:`CellServer.lock`; the node must run on a
single-threaded executor (MuJoCo's EGL contexts are bound to the thread that made them
current, so rendering must stay on one thread).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Transform, TransformStamped
from r2s2r_common.camera_info import to_camera_info_msg
from r2s2r_common.image_conversion import to_image_msg
from r2s2r_common.ros.qos import DEFAULT_QOS, LATCHED_QOS, RELIABLE_QOS, SENSOR_DATA_QOS
from r2s2r_description.robot import ALL_JOINT_NAMES
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from r2s2r_interfaces.msg import TrialOutcome
from r2s2r_interfaces.srv import StartTrial
from r2s2r_sim.cell_runtime import (
    CAMERA_NAMES,
    CommandRejected,
    ControlStep,
    RealTimePacer,
    SimCell,
    TrialRequestError,
    TrialResult,
)
from tf2_msgs.msg import TFMessage

OUTCOME_QOS = QoSProfile(
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    history=HistoryPolicy.KEEP_LAST,
)
"""``/trial/outcome``: reliable and latched for the last 10 trials."""

ENCODER_JOINT = "belt_roller_joint"
"""Joint name of the belt encoder's roller on ``/belt/encoder``."""

_PUBLISHERS: tuple[tuple[str, Any, str, QoSProfile], ...] = (
    ("joint_states", JointState, "/joint_states", DEFAULT_QOS),
    ("encoder", JointState, "/belt/encoder", SENSOR_DATA_QOS),
    ("clock", Clock, "/clock", DEFAULT_QOS),
    ("tf_static", TFMessage, "/tf_static", LATCHED_QOS),
    ("outcome", TrialOutcome, "/trial/outcome", OUTCOME_QOS),
    ("head_camera/image", Image, "/head_camera/image_raw", SENSOR_DATA_QOS),
    ("head_camera/info", CameraInfo, "/head_camera/camera_info", SENSOR_DATA_QOS),
    ("head_camera/depth", Image, "/head_camera/depth/image_raw", SENSOR_DATA_QOS),
    ("hand_camera/image", Image, "/hand_camera/image_raw", SENSOR_DATA_QOS),
    ("hand_camera/info", CameraInfo, "/hand_camera/camera_info", SENSOR_DATA_QOS),
)
"""Publishers of a cell: (key, type, absolute topic, QoS)."""


def time_msg(seconds: float) -> Time:
    """``builtin_interfaces/Time`` of a time in seconds (cell time)."""
    nanoseconds = round(seconds * 1e9)
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def time_s(stamp: Any) -> float:
    """Seconds of a ``builtin_interfaces/Time`` or ``Duration``."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def periods_per_tick(real_time_factor: float, tick_rate_hz: float, control_period_s: float) -> int:
    """Most control periods one timer tick may run: two ticks' worth of simulated time."""
    return max(1, math.ceil(2.0 * real_time_factor / (tick_rate_hz * control_period_s)))


@dataclass(frozen=True)
class CellServerSettings:
    """How a node serves its cell.

    Attributes:
        label: The cell in messages (``"the twin"``): ``"<label> is not active"``.
        camera_frame_ids: Camera name -> frame_id of its images, camera_info and depth.
        reset_seed: Seed of the idle cell after ``/trial/reset``.
        real_time_factor: Simulated seconds per wall-clock second.
        tick_rate_hz: Wall-clock rate of the stepping timer.
        max_lag_s: Simulated lag beyond which the pacer drops the backlog.
        render_on_demand: Render a camera only while somebody subscribes to its image,
            camera_info or (head) depth, like a lazy driver; False renders every due frame.
        diagnostics_name: Status name suffix: ``"<node name>: <diagnostics_name>"``.
        hardware_id: ``hardware_id`` of the diagnostic status.
        diagnostics_values: Key/values put first in the diagnostic status (e.g. the mode).
        callback_group: Group of the command subscriptions and services (None: the node's
            default group).

    """

    label: str
    camera_frame_ids: Mapping[str, str]
    reset_seed: int
    real_time_factor: float
    tick_rate_hz: float
    max_lag_s: float
    render_on_demand: bool
    diagnostics_name: str
    hardware_id: str
    diagnostics_values: Mapping[str, str]
    callback_group: Any = None


class CellServer:
    """Publishers, command subscriptions, services and stepping of one simulated cell.

    Construct it in ``on_configure`` (it creates the lifecycle publishers), call
    :meth:`open_inputs` when commands should be received (the twin at configure, the bridge at
    activate), :meth:`start_stepping` in ``on_activate``, :meth:`stop_stepping` in
    ``on_deactivate`` and :meth:`close` in ``on_cleanup``/``on_shutdown``.

    Args:
        node: The lifecycle node that owns the interfaces.
        cell: The simulated cell (the server closes it in :meth:`close`).
        settings: Frames, labels and diagnostics of this node.

    """

    def __init__(self, node: LifecycleNode, cell: SimCell, settings: CellServerSettings):
        self.node = node
        self.cell = cell
        self.settings = settings
        self.lock = threading.Lock()
        self.pacer: RealTimePacer | None = None
        self._step_timer: Any = None
        self._inputs: list[Any] = []
        self._rejected_reported = 0
        self.camera_info = {
            name: to_camera_info_msg(
                cell.camera_calibration(name), frame_id=settings.camera_frame_ids[name]
            )
            for name in CAMERA_NAMES
        }
        self.pubs: dict[str, Any] = {
            key: node.create_lifecycle_publisher(msg_type, topic, qos)
            for key, msg_type, topic, qos in _PUBLISHERS
        }

    @property
    def active(self) -> bool:
        """Whether the cell is being stepped (between :meth:`start_stepping` and stop)."""
        return self._step_timer is not None

    # -- life cycle ---------------------------------------------------------------------------
    def open_inputs(self) -> None:
        """Create the controller subscriptions and the trial services."""
        node, group = self.node, self.settings.callback_group
        self._inputs += [
            node.create_subscription(
                JointTrajectory,
                "/arm_controller/joint_trajectory",
                lambda msg: self.on_trajectory("arm", msg),
                RELIABLE_QOS,
                callback_group=group,
            ),
            node.create_subscription(
                JointTrajectory,
                "/hand_controller/joint_trajectory",
                lambda msg: self.on_trajectory("hand", msg),
                RELIABLE_QOS,
                callback_group=group,
            ),
            node.create_service(
                StartTrial, "/trial/start", self.on_start_trial, callback_group=group
            ),
            node.create_service(Trigger, "/trial/reset", self.on_reset, callback_group=group),
        ]

    def add_input(self, entity: Any) -> None:
        """Hand a node's own subscription or service to the server (destroyed with the inputs)."""
        self._inputs.append(entity)

    def close_inputs(self) -> None:
        """Destroy the subscriptions and services of :meth:`open_inputs` and :meth:`add_input`."""
        for entity in self._inputs:
            if hasattr(entity, "srv_type"):
                self.node.destroy_service(entity)
            else:
                self.node.destroy_subscription(entity)
        self._inputs = []

    def start_stepping(self, callback_group: Any = None) -> None:
        """Publish ``/tf_static`` and step the cell at the real-time factor with a timer.

        Args:
            callback_group: Group of the stepping timer (None: the node's default group).

        """
        self.publish_tf_static()
        settings, period_s = self.settings, self.cell.control_period_s
        rtf, tick_rate_hz = settings.real_time_factor, settings.tick_rate_hz
        self.pacer = RealTimePacer(
            period_s,
            rtf,
            max_lag_s=settings.max_lag_s,
            max_periods_per_call=periods_per_tick(rtf, tick_rate_hz, period_s),
        )
        self.pacer.start(time.monotonic())
        self._step_timer = self.node.create_timer(
            1.0 / tick_rate_hz, self.on_tick, callback_group=callback_group
        )

    def stop_stepping(self) -> None:
        """Stop the stepping timer (the cell keeps its state)."""
        if self._step_timer is not None:
            self.node.destroy_timer(self._step_timer)
            self._step_timer = None

    def close(self) -> None:
        """Stop stepping, destroy every input and publisher and free the simulator."""
        self.stop_stepping()
        self.close_inputs()
        for publisher in self.pubs.values():
            self.node.destroy_lifecycle_publisher(publisher)
        self.pubs = {}
        with self.lock:
            self.cell.close()

    # -- stepping -----------------------------------------------------------------------------
    def on_tick(self) -> None:
        """Run the control periods that are due and publish each one."""
        with self.lock:
            pacer = self.pacer
            if pacer is None:
                return
            periods = pacer.due(time.monotonic())
            if periods > 0 and self.settings.render_on_demand:
                self._update_camera_demand()
            for _ in range(periods):
                step = self.cell.step_control()
                started = time.perf_counter()
                self.publish_step(step)
                self.cell.costs.publish_s += time.perf_counter() - started
            pacer.done(periods)

    def _update_camera_demand(self) -> None:
        cell = self.cell
        for name in CAMERA_NAMES:
            streams = [f"{name}/image", f"{name}/info"]
            cell.camera_demand[name] = any(
                self.pubs[key].get_subscription_count() > 0 for key in streams
            )
        head_depth = self.pubs["head_camera/depth"].get_subscription_count() > 0
        cell.depth_demand = head_depth
        cell.camera_demand["head_camera"] = cell.camera_demand["head_camera"] or head_depth

    def publish_step(self, step: ControlStep) -> None:
        """Publish one control period: clock, joints, encoder, camera frames and outcome."""
        stamp = time_msg(step.time_s)
        self.pubs["clock"].publish(Clock(clock=stamp))
        joints = JointState(
            name=list(ALL_JOINT_NAMES),
            position=step.joint_positions.tolist(),
            velocity=step.joint_velocities.tolist(),
        )
        joints.header.stamp = stamp
        self.pubs["joint_states"].publish(joints)
        if step.encoder_angle_rad is not None:
            encoder = JointState(name=[ENCODER_JOINT], position=[step.encoder_angle_rad])
            encoder.header.stamp = stamp
            self.pubs["encoder"].publish(encoder)
        self.publish_extras(stamp)
        for frame in step.frames:
            frame_id = self.settings.camera_frame_ids[frame.camera_name]
            self.pubs[f"{frame.camera_name}/image"].publish(
                to_image_msg(frame.rgb, "rgb8", stamp, frame_id)
            )
            info = self.camera_info[frame.camera_name]
            info.header.stamp = stamp
            self.pubs[f"{frame.camera_name}/info"].publish(info)
            if frame.depth_m is not None:
                self.pubs[f"{frame.camera_name}/depth"].publish(
                    to_image_msg(frame.depth_m, "32FC1", stamp, frame_id)
                )
        if step.outcome is not None:
            self.publish_outcome(step.outcome)

    def publish_extras(self, stamp: Time) -> None:
        """Publish a node's own per-period topics (a hook; called with the lock held)."""

    def publish_outcome(self, result: TrialResult) -> None:
        """Publish a finished trial on ``/trial/outcome`` and log it."""
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
        self.pubs["outcome"].publish(msg)
        self.node.get_logger().info(
            f"trial {result.trial_id} (seed {result.seed}, {result.object_type}): "
            f"{result.reason} after {result.duration_s:.2f} s"
        )

    def publish_tf_static(self) -> None:
        """Publish the cell's fixed mounts (published description) on ``/tf_static``."""
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
        self.pubs["tf_static"].publish(TFMessage(transforms=transforms))

    # -- commands and services ----------------------------------------------------------------
    def on_trajectory(self, controller: str, msg: JointTrajectory) -> None:
        """Hand a controller's trajectory to the cell; rejections are logged and counted."""
        points = msg.points
        times = [time_s(point.time_from_start) for point in points]
        positions = [list(point.positions) for point in points]
        # ros2_control: velocities are given for every point or for none.
        any_velocities = any(len(point.velocities) > 0 for point in points)
        velocities = [list(point.velocities) for point in points] if any_velocities else None
        start = time_s(msg.header.stamp)
        with self.lock:
            if not self.active:
                self.node.get_logger().warning(
                    f"{controller} trajectory dropped: {self.settings.label} is not active",
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

    def on_start_trial(
        self, request: StartTrial.Request, response: StartTrial.Response
    ) -> StartTrial.Response:
        """``/trial/start``: reset the cell with the seed and condition and start a trial."""
        with self.lock:
            if not self.active:
                response.success = False
                response.message = f"{self.settings.label} is not active"
                return response
            try:
                response.trial_id = self.cell.start_trial(int(request.seed), str(request.condition))
            except TrialRequestError as error:
                response.success, response.message = False, str(error)
                return response
        response.success = True
        response.message = f"trial {response.trial_id} started (seed {request.seed})"
        self.node.get_logger().info(response.message + f", condition {request.condition!r}")
        return response

    def on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """``/trial/reset``: robot home, belt clear, idle."""
        with self.lock:
            if not self.active:
                response.success = False
                response.message = f"{self.settings.label} is not active"
                return response
            self.cell.reset(self.settings.reset_seed)
        response.success, response.message = True, "cell reset: robot home, belt clear, idle"
        return response

    # -- diagnostics --------------------------------------------------------------------------
    def diagnostic_status(self) -> DiagnosticStatus:
        """Real-time factor, commands, trial state and costs; WARN on new rejections or lag."""
        rtf = self.settings.real_time_factor
        with self.lock:
            cell, pacer = self.cell, self.pacer
            counters, costs = cell.counters, cell.costs
            achieved = pacer.achieved_rtf(time.monotonic()) if pacer is not None else 0.0
            values = {
                **self.settings.diagnostics_values,
                "state": "active" if self.active else "inactive",
                "real_time_factor_target": f"{rtf:.3f}",
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
        level, message = DiagnosticStatus.OK, f"trial {values['trial_state']}"
        if newly_rejected > 0:
            level = DiagnosticStatus.WARN
            message = f"{newly_rejected} trajectory command(s) rejected: {values['last_rejection']}"
        elif self.active and achieved < 0.9 * rtf:
            level = DiagnosticStatus.WARN
            message = f"running slower than real time x{rtf}: x{achieved:.2f}"
        return DiagnosticStatus(
            level=level,
            name=f"{self.node.get_name()}: {self.settings.diagnostics_name}",
            message=message,
            hardware_id=self.settings.hardware_id,
            values=[KeyValue(key=key, value=value) for key, value in values.items()],
        )


class CellNode(LifecycleNode):
    """Lifecycle plumbing shared by the simulator nodes: autostart, release and diagnostics.

    A subclass frees its own resources in :meth:`_free` (called at cleanup and shutdown) and
    gives its diagnostic status in :meth:`_diagnostics`; it starts ``/diagnostics`` with
    :meth:`_start_diagnostics` in ``on_configure``.
    """

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._diagnostics_pub: Any = None
        self._diagnostics_timer: Any = None

    def _start_diagnostics(self, rate_hz: float, callback_group: Any = None) -> None:
        """Create the ``/diagnostics`` publisher and its wall-clock timer."""
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", DEFAULT_QOS)
        self._diagnostics_timer = self.create_timer(
            1.0 / rate_hz, self._publish_diagnostics, callback_group=callback_group
        )

    def _diagnostics(self) -> tuple[DiagnosticStatus, Time] | None:
        """Return the status to publish and its stamp, or None when there is nothing to report."""
        raise NotImplementedError

    def _free(self) -> None:
        """Free the subclass's simulator and interfaces (idempotent)."""
        raise NotImplementedError

    def _publish_diagnostics(self) -> None:
        publisher, report = self._diagnostics_pub, self._diagnostics()
        if publisher is None or report is None:
            return
        status, stamp = report
        array = DiagnosticArray(status=[status])
        array.header.stamp = stamp
        publisher.publish(array)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Free the simulator and every publisher, subscription, service and timer."""
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Stop and release everything."""
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        self._free()
        if self._diagnostics_timer is not None:
            self.destroy_timer(self._diagnostics_timer)
            self._diagnostics_timer = None
        if self._diagnostics_pub is not None:
            self.destroy_publisher(self._diagnostics_pub)
            self._diagnostics_pub = None

    def autostart(self) -> bool:
        """Configure and activate (no lifecycle manager needed); False if configure failed."""
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            return False
        return self.trigger_activate() == TransitionCallbackReturn.SUCCESS
