"""``real_twin``: the hardware stand-in, a lifecycle node serving a simulated cell through ROS.

The twin simulates the world of a hidden YAML (``twin_config_path``; no other node reads it)
and exposes exactly what a real cell exposes (see DESIGN.md section 4 and the twin contract):
camera images with camera_info from a camera_calibration file when given one
(``head_camera_info_file``/``hand_camera_info_file``, as a camera driver publishes the calibration
file it is given, e.g. the grounding export) and else the NOMINAL datasheet intrinsics, registered
head depth, ``/joint_states``, the two joint_trajectory_controller command topics, the belt
encoder, ``/tf_static`` from the NOMINAL description (``publish_tf_static``; off in graphs where
the description's cell_state_publisher owns the cell's static frames, as on hardware),
``/clock`` (the twin is the time source; it does not use sim time itself), ``/trial/outcome``,
the ``/trial/start`` and ``/trial/reset`` services, the demonstrator-only
``/twin/operator/object_poses`` and ``/diagnostics``.

The operator also holds the calibration board (on hardware a person with a printed chessboard):
``/twin/operator/board_pose`` (geometry_msgs/PoseStamped, reliable) puts the board at the pose in
``header.frame_id`` (``world``, ``flange``/``palm_link`` = clamped to the hand, or a camera's
optical frame = put down in front of it); an empty frame_id takes it away. The board's geometry
comes from the ``board_*`` parameters (the print's datasheet; the calibration node is given the
same values), it is rendered in every camera and in depth.

configure: parameters -> :class:`RealTwinParams`, load the twin and nominal worlds (a bad file
logs the ConfigError and returns FAILURE; the node stays unconfigured), build the
:class:`~r2s2r_sim.cell_runtime.SimCell`, publishers, subscriptions and services. activate:
publish ``/tf_static`` and start the stepping timer, paced to the wall clock at
``real_time_factor``. deactivate: stop stepping. cleanup: free the simulator.

Rendering is the main cost, so a camera is rendered only when it is due and somebody
subscribes to its image, camera_info or (head) depth; a subscriber gets every frame at the
world's rate from its first due instant on. ``/twin/operator/object_poses`` is built only while
it has a subscriber (the demonstrator).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
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
from pydantic import Field
from r2s2r_common.camera_info import (
    CalibrationResolutionError,
    CameraCalibration,
    load_camera_calibration,
    to_camera_info_msg,
)
from r2s2r_common.config import ConfigError, ConfigModel, resolve_config_path
from r2s2r_common.image_conversion import to_image_msg
from r2s2r_common.ros.params import (
    add_schema_validation,
    config_from_parameters,
    declare_schema_parameters,
)
from r2s2r_common.ros.qos import DEFAULT_QOS, LATCHED_QOS, RELIABLE_QOS, SENSOR_DATA_QOS
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.transforms import quat_to_matrix
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from r2s2r_interfaces.msg import ObjectTrack, ObjectTrackArray, TrialOutcome
from r2s2r_interfaces.srv import StartTrial
from r2s2r_sim.cell_runtime import (
    CAMERA_NAMES,
    CellConfig,
    CommandRejected,
    ControlStep,
    OperatorBoardConfig,
    RealTimePacer,
    SimCell,
    TrialRequestError,
    TrialResult,
    board_scene_extra,
)
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.world import load_world
from tf2_msgs.msg import TFMessage

OUTCOME_QOS = QoSProfile(
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
    history=HistoryPolicy.KEEP_LAST,
)
"""``/trial/outcome``: reliable and latched for the last 10 trials."""

JOINT_STATES_QOS = QoSProfile(
    depth=500,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
    history=HistoryPolicy.KEEP_LAST,
)
"""``/joint_states``: reliable, one second of history at 500 Hz (catch-up bursts)."""

ENCODER_JOINT = "belt_roller_joint"
"""Joint name of the belt encoder's roller on ``/belt/encoder``."""


class RealTwinParams(ConfigModel):
    """Parameters of the ``real_twin`` node (each one a declared ROS parameter)."""

    twin_config_path: str = Field(
        default="twin/default.yaml",
        description="Hidden twin world YAML (WorldParams schema); relative paths resolve "
        "against the r2s2r share config/ folder, then the source tree's config/.",
    )
    nominal_world_path: str = Field(
        default="world/nominal.yaml",
        description="Nominal world (datasheet intrinsics, CAD mounts) for camera_info and "
        "/tf_static; relative paths resolve like twin_config_path.",
    )
    real_time_factor: float = Field(
        default=1.0, gt=0.0, le=1000.0, description="Simulated seconds per wall-clock second."
    )
    autostart: bool = Field(
        default=True, description="Configure and activate at start-up (no lifecycle manager)."
    )
    tick_rate_hz: float = Field(
        default=100.0, ge=1.0, le=1000.0, description="Wall-clock rate of the stepping timer."
    )
    max_lag_s: float = Field(
        default=0.25,
        gt=0.0,
        le=10.0,
        description="Simulated lag behind the wall clock beyond which the backlog is dropped.",
    )
    encoder_rate_hz: float = Field(
        default=100.0, gt=0.0, le=1000.0, description="Belt encoder publishing rate (sim time)."
    )
    publish_depth: bool = Field(
        default=True, description="Publish registered head depth with every head frame."
    )
    diagnostics_rate_hz: float = Field(
        default=1.0, gt=0.0, le=50.0, description="Rate of /diagnostics (wall clock)."
    )
    seed: int = Field(default=0, ge=0, description="Seed of the idle cell at configure/reset.")
    head_camera_frame_id: str = Field(
        default="head_camera_optical_frame", description="frame_id of head images and depth."
    )
    hand_camera_frame_id: str = Field(
        default="hand_camera_optical_frame", description="frame_id of hand images."
    )
    base_frame_id: str = Field(
        default="base_link", description="Frame of /twin/operator/object_poses."
    )
    head_camera_info_file: str = Field(
        default="",
        description="camera_calibration YAML published as /head_camera/camera_info (what a "
        "camera driver is given, e.g. exported from the grounding artifact); empty: the "
        "nominal world's datasheet intrinsics.",
    )
    hand_camera_info_file: str = Field(
        default="",
        description="camera_calibration YAML published as /hand_camera/camera_info; empty: "
        "the nominal world's datasheet intrinsics.",
    )
    publish_tf_static: bool = Field(
        default=True,
        description="Publish the NOMINAL description's fixed frames on /tf_static. Turn off "
        "where cell_state_publisher publishes the cell's (grounded) static frames: on hardware "
        "no driver publishes them, and two publishers of one frame conflict.",
    )
    board_enabled: bool = Field(
        default=True,
        description="The operator has a calibration board (/twin/operator/board_pose).",
    )
    board_squares_x: int = Field(default=7, ge=3, le=32, description="Board squares along x.")
    board_squares_y: int = Field(default=6, ge=3, le=32, description="Board squares along y.")
    board_square_length_m: float = Field(
        default=0.04, gt=0.0, le=0.5, description="Printed side of one board square (m)."
    )


def time_msg(seconds: float) -> Time:
    """``builtin_interfaces/Time`` of a time in seconds (cell time)."""
    nanoseconds = round(seconds * 1e9)
    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def time_s(stamp: Time) -> float:
    """Seconds of a ``builtin_interfaces/Time``."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def periods_per_tick(real_time_factor: float, tick_rate_hz: float, control_period_s: float) -> int:
    """Most control periods one timer tick may run: two ticks' worth of simulated time."""
    return max(1, math.ceil(2.0 * real_time_factor / (tick_rate_hz * control_period_s)))


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = RealTwinParams


class RealTwinNode(LifecycleNode):
    """The real twin; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str = "real_twin", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._schema = declare_schema_parameters(self, PARAMETER_SCHEMA)
        add_schema_validation(self, self._schema)
        self.params: RealTwinParams | None = None
        self.cell: SimCell | None = None
        self._lock = threading.Lock()
        self._pacer: RealTimePacer | None = None
        self._step_group = MutuallyExclusiveCallbackGroup()
        self._io_group = MutuallyExclusiveCallbackGroup()
        self._pubs: dict[str, Any] = {}
        self._entities: list[Any] = []
        self._step_timer: Any = None
        self._diagnostics_timer: Any = None
        self._rejected_reported = 0
        self._calibrations: dict[str, CameraCalibration] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Build params, worlds and the cell; FAILURE (logged reason) on bad input."""
        try:
            params = config_from_parameters(self, self._schema, RealTwinParams)
            twin_path = resolve_config_path(params.twin_config_path)
            nominal_path = resolve_config_path(params.nominal_world_path)
            twin_world = load_world(twin_path)
            nominal_world = load_world(nominal_path)
            board = (
                OperatorBoardConfig(
                    squares_x=params.board_squares_x,
                    squares_y=params.board_squares_y,
                    square_length_m=params.board_square_length_m,
                )
                if params.board_enabled
                else None
            )
            cell = SimCell(
                MujocoBackend(scene_extras=[board_scene_extra(board)] if board else []),
                twin_world,
                nominal_world,
                CellConfig(
                    encoder_rate_hz=params.encoder_rate_hz, render_depth=params.publish_depth
                ),
                seed=params.seed,
                board=board,
            )
        except ConfigError as error:
            self.get_logger().error(f"configure failed: {error}")
            return TransitionCallbackReturn.FAILURE
        try:
            calibrations = self._camera_calibrations(params, cell)
        except ConfigError as error:
            cell.close()
            self.get_logger().error(f"configure failed: {error}")
            return TransitionCallbackReturn.FAILURE
        self.params, self.cell = params, cell
        self._calibrations = calibrations
        self._create_interfaces(params)
        self.get_logger().info(
            f"configured: twin world {twin_path.name}, published (nominal) world "
            f"{nominal_path.name}, real-time factor {params.real_time_factor}"
        )
        return TransitionCallbackReturn.SUCCESS

    @staticmethod
    def _camera_calibrations(params: RealTwinParams, cell: SimCell) -> dict[str, CameraCalibration]:
        """camera_info per camera: the given calibration file, else the nominal datasheet.

        Raises:
            ConfigError: A file that is missing or invalid, or made for another resolution than
                the camera's images.

        """
        files = {
            "head_camera": params.head_camera_info_file,
            "hand_camera": params.hand_camera_info_file,
        }
        calibrations = {}
        for name in CAMERA_NAMES:
            if not files[name]:
                calibrations[name] = cell.camera_calibration(name)
                continue
            calibration = load_camera_calibration(files[name])
            sensor = cell.world.cameras.head if name == "head_camera" else cell.world.cameras.hand
            try:  # the images the twin renders have the sensor's true size
                calibration.check_resolution(sensor.width_px, sensor.height_px, f"{name} image")
            except CalibrationResolutionError as error:
                raise ConfigError(
                    f"{name}_info_file {files[name]}: {error}; give a calibration for this camera"
                ) from None
            calibrations[name] = calibration
        return calibrations

    def _create_interfaces(self, params: RealTwinParams) -> None:
        publishers: list[tuple[str, Any, str, QoSProfile]] = [
            # Reliable with a history as deep as one catch-up burst of the pacer: a late tick
            # publishes up to max_periods_per_call states at once, and a depth-10 writer
            # history would overwrite unacknowledged ones (gaps in a sysid log).
            ("joint_states", JointState, "/joint_states", JOINT_STATES_QOS),
            ("encoder", JointState, "/belt/encoder", SENSOR_DATA_QOS),
            ("clock", Clock, "/clock", DEFAULT_QOS),
            ("outcome", TrialOutcome, "/trial/outcome", OUTCOME_QOS),
            ("objects", ObjectTrackArray, "/twin/operator/object_poses", DEFAULT_QOS),
            ("head_camera/image", Image, "/head_camera/image_raw", SENSOR_DATA_QOS),
            ("head_camera/info", CameraInfo, "/head_camera/camera_info", SENSOR_DATA_QOS),
            ("head_camera/depth", Image, "/head_camera/depth/image_raw", SENSOR_DATA_QOS),
            ("hand_camera/image", Image, "/hand_camera/image_raw", SENSOR_DATA_QOS),
            ("hand_camera/info", CameraInfo, "/hand_camera/camera_info", SENSOR_DATA_QOS),
        ]
        if params.publish_tf_static:
            publishers.append(("tf_static", TFMessage, "/tf_static", LATCHED_QOS))
        self._pubs = {
            key: self.create_lifecycle_publisher(msg_type, topic, qos)
            for key, msg_type, topic, qos in publishers
        }
        self._pubs["diagnostics"] = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        group = self._io_group
        self._entities = [
            self.create_subscription(
                JointTrajectory,
                "/arm_controller/joint_trajectory",
                lambda msg: self._on_trajectory("arm", msg),
                RELIABLE_QOS,
                callback_group=group,
            ),
            self.create_subscription(
                JointTrajectory,
                "/hand_controller/joint_trajectory",
                lambda msg: self._on_trajectory("hand", msg),
                RELIABLE_QOS,
                callback_group=group,
            ),
            self.create_service(
                StartTrial, "/trial/start", self._on_start_trial, callback_group=group
            ),
            self.create_service(Trigger, "/trial/reset", self._on_reset, callback_group=group),
        ]
        if params.board_enabled:
            self._entities.append(
                self.create_subscription(
                    PoseStamped,
                    "/twin/operator/board_pose",
                    self._on_board_pose,
                    RELIABLE_QOS,
                    callback_group=group,
                )
            )
        self._diagnostics_timer = self.create_timer(
            1.0 / params.diagnostics_rate_hz, self._publish_diagnostics, callback_group=group
        )

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Publish ``/tf_static`` and start stepping in real time."""
        result = super().on_activate(state)
        cell, params = self.cell, self.params
        assert cell is not None and params is not None
        if params.publish_tf_static:
            self._publish_tf_static(cell)
        self._pacer = RealTimePacer(
            cell.control_period_s,
            params.real_time_factor,
            max_lag_s=params.max_lag_s,
            max_periods_per_call=periods_per_tick(
                params.real_time_factor, params.tick_rate_hz, cell.control_period_s
            ),
        )
        self._pacer.start(time.monotonic())
        self._step_timer = self.create_timer(
            1.0 / params.tick_rate_hz, self._on_tick, callback_group=self._step_group
        )
        return result

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop stepping (the simulation pauses; the cell keeps its state)."""
        self._stop_stepping()
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Free the simulator and every publisher, subscription, service and timer."""
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Stop and release everything."""
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _stop_stepping(self) -> None:
        if self._step_timer is not None:
            self.destroy_timer(self._step_timer)
            self._step_timer = None

    def _release(self) -> None:
        self._stop_stepping()
        with self._lock:
            if self.cell is not None:
                self.cell.close()
            self.cell = None
        for entity in self._entities:
            if hasattr(entity, "srv_type"):
                self.destroy_service(entity)
            else:
                self.destroy_subscription(entity)
        self._entities = []
        if self._diagnostics_timer is not None:
            self.destroy_timer(self._diagnostics_timer)
            self._diagnostics_timer = None
        for key, publisher in self._pubs.items():
            if key == "diagnostics":
                self.destroy_publisher(publisher)
            else:
                self.destroy_lifecycle_publisher(publisher)
        self._pubs = {}
        self.params = None

    def autostart(self) -> bool:
        """Configure and activate (no lifecycle manager needed); False if configure failed."""
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            return False
        return self.trigger_activate() == TransitionCallbackReturn.SUCCESS

    # -- stepping ----------------------------------------------------------------------------
    def _on_tick(self) -> None:
        with self._lock:
            cell, pacer = self.cell, self._pacer
            if cell is None or pacer is None:
                return
            periods = pacer.due(time.monotonic())
            if periods > 0:
                self._update_camera_demand(cell)
            for _ in range(periods):
                step = cell.step_control()
                started = time.perf_counter()
                self._publish_step(cell, step)
                cell.costs.publish_s += time.perf_counter() - started
            pacer.done(periods)

    def _update_camera_demand(self, cell: SimCell) -> None:
        """Render only cameras somebody subscribes to (image or depth), like a lazy driver."""
        for name in CAMERA_NAMES:
            streams = [f"{name}/image", f"{name}/info"]
            cell.camera_demand[name] = any(
                self._pubs[key].get_subscription_count() > 0 for key in streams
            )
        head_depth = self._pubs["head_camera/depth"].get_subscription_count() > 0
        cell.depth_demand = head_depth
        cell.camera_demand["head_camera"] = cell.camera_demand["head_camera"] or head_depth

    def _frame(self, camera_name: str) -> str:
        params = self.params
        assert params is not None
        if camera_name == "head_camera":
            return params.head_camera_frame_id
        return params.hand_camera_frame_id

    def _publish_step(self, cell: SimCell, step: ControlStep) -> None:
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
        if self._pubs["objects"].get_subscription_count() > 0:  # only the demonstrator reads it
            self._publish_objects(cell, stamp)
        for frame in step.frames:
            frame_id = self._frame(frame.camera_name)
            self._pubs[f"{frame.camera_name}/image"].publish(
                to_image_msg(frame.rgb, "rgb8", stamp, frame_id)
            )
            self._pubs[f"{frame.camera_name}/info"].publish(
                to_camera_info_msg(self._calibrations[frame.camera_name], stamp, frame_id)
            )
            if frame.depth_m is not None:
                self._pubs[f"{frame.camera_name}/depth"].publish(
                    to_image_msg(frame.depth_m, "32FC1", stamp, frame_id)
                )
        if step.outcome is not None:
            self._publish_outcome(step.outcome)

    def _publish_objects(self, cell: SimCell, stamp: Time) -> None:
        params = self.params
        assert params is not None
        array = ObjectTrackArray()
        array.header.stamp = stamp
        array.header.frame_id = params.base_frame_id
        for track in cell.object_tracks():
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
        self._pubs["objects"].publish(array)

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
        self.get_logger().info(
            f"trial {result.trial_id} (seed {result.seed}, {result.object_type}): "
            f"{result.reason} after {result.duration_s:.2f} s"
        )

    def _publish_tf_static(self, cell: SimCell) -> None:
        stamp = time_msg(cell.time_s)
        transforms = []
        for mount in cell.static_transforms():
            msg = TransformStamped(child_frame_id=mount.child, transform=Transform())
            msg.header.stamp = stamp
            msg.header.frame_id = mount.parent
            t, q = msg.transform.translation, msg.transform.rotation
            t.x, t.y, t.z = mount.translation_m
            q.w, q.x, q.y, q.z = mount.quat_wxyz
            transforms.append(msg)
        self._pubs["tf_static"].publish(TFMessage(transforms=transforms))

    # -- commands and services ---------------------------------------------------------------
    def _on_trajectory(self, controller: str, msg: JointTrajectory) -> None:
        points = msg.points
        times = [time_s(point.time_from_start) for point in points]  # type: ignore[arg-type]
        positions = [list(point.positions) for point in points]
        # ros2_control: velocities are given for every point or for none.
        any_velocities = any(len(point.velocities) > 0 for point in points)
        velocities = [list(point.velocities) for point in points] if any_velocities else None
        start = time_s(msg.header.stamp)
        with self._lock:
            cell = self.cell
            if cell is None or self._step_timer is None:
                self.get_logger().warning(
                    f"{controller} trajectory dropped: the twin is not active",
                    throttle_duration_sec=5.0,
                )
                return
            try:
                cell.command(
                    controller,
                    list(msg.joint_names),
                    times,
                    positions,
                    velocities,
                    start_time_s=start if start > 0.0 else None,
                )
            except CommandRejected as error:
                self.get_logger().warning(
                    f"trajectory rejected: {error}", throttle_duration_sec=2.0
                )

    def _on_board_pose(self, msg: PoseStamped) -> None:
        """Move the board as asked (empty frame_id: take it away); log refused requests."""
        position, orientation = msg.pose.position, msg.pose.orientation
        pose = np.eye(4)
        pose[:3, :3] = quat_to_matrix((orientation.w, orientation.x, orientation.y, orientation.z))
        pose[:3, 3] = (position.x, position.y, position.z)
        with self._lock:
            cell = self.cell
            if cell is None:
                return
            try:
                if msg.header.frame_id == "":
                    cell.remove_board()
                else:
                    cell.place_board(msg.header.frame_id, pose)
            except ValueError as error:
                self.get_logger().warning(f"board pose refused: {error}")
                return
        where = msg.header.frame_id or "away"
        self.get_logger().info(f"operator: calibration board {where}")

    def _on_start_trial(
        self, request: StartTrial.Request, response: StartTrial.Response
    ) -> StartTrial.Response:
        with self._lock:
            cell = self.cell
            if cell is None or self._step_timer is None:
                response.success, response.message = False, "the twin is not active"
                return response
            try:
                response.trial_id = cell.start_trial(int(request.seed), str(request.condition))
            except TrialRequestError as error:
                response.success, response.message = False, str(error)
                return response
        response.success = True
        response.message = f"trial {response.trial_id} started (seed {request.seed})"
        self.get_logger().info(response.message + f", condition {request.condition!r}")
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            cell, params = self.cell, self.params
            if cell is None or params is None or self._step_timer is None:
                response.success, response.message = False, "the twin is not active"
                return response
            cell.reset(params.seed)
        response.success, response.message = True, "cell reset: robot home, belt clear, idle"
        return response

    # -- diagnostics -------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self._lock:
            cell, pacer, params = self.cell, self._pacer, self.params
            if cell is None or params is None:
                return
            counters = cell.counters
            achieved = pacer.achieved_rtf(time.monotonic()) if pacer is not None else 0.0
            costs = cell.costs
            values = {
                "state": "active" if self._step_timer is not None else "inactive",
                "real_time_factor_target": f"{params.real_time_factor:.3f}",
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
            time_stamp = time_msg(cell.time_s)
        level, message = DiagnosticStatus.OK, f"trial {values['trial_state']}"
        if newly_rejected > 0:
            level = DiagnosticStatus.WARN
            message = f"{newly_rejected} trajectory command(s) rejected: {values['last_rejection']}"
        elif self._step_timer is not None and achieved < 0.9 * params.real_time_factor:
            level = DiagnosticStatus.WARN
            message = f"running slower than real time x{params.real_time_factor}: x{achieved:.2f}"
        status = DiagnosticStatus(
            level=level,
            name=f"{self.get_name()}: cell",
            message=message,
            hardware_id="real_twin",
            values=[KeyValue(key=key, value=value) for key, value in values.items()],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = time_stamp
        self._pubs["diagnostics"].publish(array)


def main(args: list[str] | None = None) -> None:
    """Run the real twin; with ``autostart`` it configures and activates itself.

    Exits with code 2 when autostart fails (bad parameters or configuration files).
    """
    # Single-threaded on purpose: MuJoCo's EGL contexts are bound to the thread that made them
    # current, so rendering must stay on one thread (a multi-threaded executor moves the timer
    # callback between threads and fails with EGL_BAD_ACCESS; see bench/bench_twin.py).
    sys.exit(run_lifecycle_node(RealTwinNode, SingleThreadedExecutor, args))
