"""``real_twin``: the hardware stand-in, a lifecycle node serving a simulated cell through ROS.

The twin simulates the world of a hidden YAML (``twin_config_path``; no other node reads it)
and exposes exactly what a real cell exposes (docs/architecture.md, sections 4 and 6):
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
logs the ConfigError and returns FAILURE; the node stays unconfigured), warn once per twin
parameter outside the twin family (:func:`~r2s2r_sim.twin_family.twin_family_warnings`; the
twin runs all the same), build the
:class:`~r2s2r_sim.cell_runtime.SimCell` and its
:class:`~r2s2r_sim.nodes.cell_server.CellServer` (publishers, subscriptions, services; cameras
rendered only while somebody subscribes). activate: publish ``/tf_static`` and start the
stepping timer, paced to the wall clock at ``real_time_factor``. deactivate: stop stepping.
cleanup: free the simulator.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import Field
from r2s2r_common.camera_info import (
    CalibrationResolutionError,
    CameraCalibration,
    load_camera_calibration,
)
from r2s2r_common.config import ConfigError, ConfigModel, resolve_config_path
from r2s2r_common.ros.lifecycle import ComponentLifecycleNode
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_description.cameras import CAMERA_NAMES, HAND, HEAD
from r2s2r_description.frames import BASE_LINK
from r2s2r_world.world import camera_params, load_world
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import State, TransitionCallbackReturn

from r2s2r_sim.backend_config import make_backend
from r2s2r_sim.board import OperatorBoardConfig, board_scene_extra
from r2s2r_sim.cell_runtime import CellConfig, SimCell
from r2s2r_sim.nodes.cell_server import CellServer, CellServerOptions
from r2s2r_sim.twin_family import twin_family_warnings


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
    twin_family_path: str = Field(
        default="twin/family.yaml",
        description="The documented twin family: at configure, one WARN line per twin "
        "parameter outside its range (the twin still runs; the family bounds what is tested, "
        "not what may run). A missing or invalid file skips the check with one line; empty: "
        "no check. Relative paths resolve like twin_config_path.",
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
        default=HEAD.optical_frame, description="frame_id of head images and depth."
    )
    hand_camera_frame_id: str = Field(
        default=HAND.optical_frame, description="frame_id of hand images."
    )
    base_frame_id: str = Field(
        default=BASE_LINK, description="Frame of /twin/operator/object_poses."
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


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = RealTwinParams


class RealTwinNode(ComponentLifecycleNode[RealTwinParams, CellServer]):
    """The real twin; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str = "real_twin", **kwargs: Any) -> None:
        super().__init__(node_name, PARAMETER_SCHEMA, **kwargs)
        self.params: RealTwinParams | None = None

    @property
    def server(self) -> CellServer | None:
        """The cell's ROS server while configured, else None."""
        return self.component

    @property
    def cell(self) -> SimCell | None:
        """The simulated cell while configured, else None."""
        return None if self.component is None else self.component.cell

    # -- lifecycle ---------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Build params, worlds, the cell and its server; FAILURE (logged reason) on bad input."""
        try:
            params = self.config_from_parameters()
            twin_path = resolve_config_path(params.twin_config_path)
            nominal_path = resolve_config_path(params.nominal_world_path)
            twin_world = load_world(twin_path)
            nominal_world = load_world(nominal_path)
            if params.twin_family_path:
                for line in twin_family_warnings(
                    twin_world, nominal_world, twin_path.name, params.twin_family_path
                ):
                    self.get_logger().warning(line)
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
                make_backend(scene_extras=[board_scene_extra(board)] if board else []),
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
        options = CellServerOptions(
            real_time_factor=params.real_time_factor,
            tick_rate_hz=params.tick_rate_hz,
            max_lag_s=params.max_lag_s,
            reset_seed=params.seed,
            camera_frame_ids={
                HEAD.name: params.head_camera_frame_id,
                HAND.name: params.hand_camera_frame_id,
            },
            camera_calibrations=calibrations,
            publish_tf_static=params.publish_tf_static,
            publish_object_poses=True,
            object_poses_frame_id=params.base_frame_id,
            board_requests=params.board_enabled,
            status_name=f"{self.get_name()}: cell",
            hardware_id="real_twin",
        )
        self.params = params
        self.serve(CellServer(self, cell, options), params.diagnostics_rate_hz)
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
            HEAD.name: params.head_camera_info_file,
            HAND.name: params.hand_camera_info_file,
        }
        calibrations = {}
        for name in CAMERA_NAMES:
            if not files[name]:
                calibrations[name] = cell.camera_calibration(name)
                continue
            calibration = load_camera_calibration(files[name])
            sensor = camera_params(cell.world, name)
            try:  # the images the twin renders have the sensor's true size
                calibration.check_resolution(sensor.width_px, sensor.height_px, f"{name} image")
            except CalibrationResolutionError as error:
                raise ConfigError(
                    f"{name}_info_file {files[name]}: {error}; give a calibration for this camera"
                ) from None
            calibrations[name] = calibration
        return calibrations

    def release(self) -> None:
        """Free the cell, its server and the diagnostics (cleanup, shutdown)."""
        super().release()
        self.params = None


def main(args: list[str] | None = None) -> None:
    """Run the real twin; with ``autostart`` it configures and activates itself.

    Exits with code 2 when autostart fails (bad parameters or configuration files).
    """
    # Single-threaded on purpose: MuJoCo's EGL contexts are bound to the thread that made them
    # current, so rendering must stay on one thread (a multi-threaded executor moves the timer
    # callback between threads and fails with EGL_BAD_ACCESS; see bench/bench_twin.py).
    sys.exit(run_lifecycle_node(RealTwinNode, SingleThreadedExecutor, args))
