"""``real_twin``: the hardware stand-in, a lifecycle node serving a simulated cell through ROS.

The twin simulates the world of a hidden YAML (``twin_config_path``; no other node reads it)
and exposes exactly what a real cell exposes (see DESIGN.md section 4 and the twin contract):
camera images with NOMINAL camera_info (a datasheet), registered head depth, ``/joint_states``,
the two joint_trajectory_controller command topics, the belt encoder, ``/tf_static`` from the
NOMINAL description, ``/clock`` (the twin is the time source; it does not use sim time
itself), ``/trial/outcome``, the ``/trial/start`` and ``/trial/reset`` services, the
demonstrator-only ``/twin/operator/object_poses`` and ``/diagnostics``.

The operator also holds the calibration board (on hardware a person with a printed chessboard):
``/twin/operator/board_pose`` (geometry_msgs/PoseStamped, reliable) puts the board at the pose in
``header.frame_id`` (``world``, ``flange``/``palm_link`` = clamped to the hand, or a camera's
optical frame = put down in front of it); an empty frame_id takes it away. The board's geometry
comes from the ``board_*`` parameters (the print's datasheet; the calibration node is given the
same values), it is rendered in every camera and in depth.

configure: parameters -> :class:`RealTwinParams`, load the twin and nominal worlds (a bad file
logs the ConfigError and returns FAILURE; the node stays unconfigured), build the
:class:`~r2s2r_sim.cell_runtime.SimCell`, publishers, subscriptions and services (the cell's
interface is :class:`~r2s2r_sim.nodes.cell_server.CellServer`, shared with ``sim_bridge``; the
operator topics are added here only). activate:
publish ``/tf_static`` and start the stepping timer, paced to the wall clock at
``real_time_factor``. deactivate: stop stepping. cleanup: free the simulator.

Rendering is the main cost, so a camera is rendered only when it is due and somebody
subscribes to its image, camera_info or (head) depth; a subscriber gets every frame at the
world's rate from its first due instant on. ``/twin/operator/object_poses`` is built only while
it has a subscriber (the demonstrator).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion, Twist, Vector3
from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_common.ros.params import (
    add_schema_validation,
    config_from_parameters,
    declare_schema_parameters,
)
from r2s2r_common.ros.qos import DEFAULT_QOS, RELIABLE_QOS
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_description.transforms import quat_to_matrix
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import State, TransitionCallbackReturn

from r2s2r_interfaces.msg import ObjectTrack, ObjectTrackArray
from r2s2r_sim.cell_runtime import (
    CellConfig,
    OperatorBoardConfig,
    SimCell,
    board_scene_extra,
    resolve_config_path,
)
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.nodes.cell_server import (
    OUTCOME_QOS,
    CellNode,
    CellServer,
    CellServerSettings,
    time_msg,
)
from r2s2r_sim.world import load_world

__all__ = ["OUTCOME_QOS", "RealTwinNode", "RealTwinParams", "main"]


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
    board_enabled: bool = Field(
        default=True,
        description="The operator has a calibration board (/twin/operator/board_pose).",
    )
    board_squares_x: int = Field(default=7, ge=3, le=32, description="Board squares along x.")
    board_squares_y: int = Field(default=6, ge=3, le=32, description="Board squares along y.")
    board_square_length_m: float = Field(
        default=0.04, gt=0.0, le=0.5, description="Printed side of one board square (m)."
    )


class _TwinCellServer(CellServer):
    """The cell's interface plus the twin-only operator: object poses and calibration board."""

    def __init__(self, node: RealTwinNode, cell: SimCell, params: RealTwinParams):
        super().__init__(
            node,
            cell,
            CellServerSettings(
                label="the twin",
                camera_frame_ids={
                    "head_camera": params.head_camera_frame_id,
                    "hand_camera": params.hand_camera_frame_id,
                },
                reset_seed=params.seed,
                real_time_factor=params.real_time_factor,
                tick_rate_hz=params.tick_rate_hz,
                max_lag_s=params.max_lag_s,
                render_on_demand=True,
                diagnostics_name="cell",
                hardware_id="real_twin",
                diagnostics_values={},
                callback_group=node.io_group,
            ),
        )
        self.base_frame_id = params.base_frame_id
        self.pubs["objects"] = node.create_lifecycle_publisher(
            ObjectTrackArray, "/twin/operator/object_poses", DEFAULT_QOS
        )
        self.open_inputs()
        if params.board_enabled:
            self.add_input(
                node.create_subscription(
                    PoseStamped,
                    "/twin/operator/board_pose",
                    self.on_board_pose,
                    RELIABLE_QOS,
                    callback_group=node.io_group,
                )
            )

    def publish_extras(self, stamp: Time) -> None:
        """Publish the operator's object poses while somebody (the demonstrator) listens."""
        if self.pubs["objects"].get_subscription_count() == 0:
            return
        array = ObjectTrackArray()
        array.header.stamp = stamp
        array.header.frame_id = self.base_frame_id
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
        self.pubs["objects"].publish(array)

    def on_board_pose(self, msg: PoseStamped) -> None:
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


class RealTwinNode(CellNode):
    """The real twin; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str = "real_twin", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._schema = declare_schema_parameters(self, RealTwinParams)
        add_schema_validation(self, self._schema)
        self.params: RealTwinParams | None = None
        self.server: CellServer | None = None
        self._step_group = MutuallyExclusiveCallbackGroup()
        self.io_group = MutuallyExclusiveCallbackGroup()

    @property
    def cell(self) -> SimCell | None:
        """The simulated cell between configure and cleanup, else None."""
        return self.server.cell if self.server is not None else None

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
        self.params = params
        self.server = _TwinCellServer(self, cell, params)
        self._start_diagnostics(params.diagnostics_rate_hz, callback_group=self.io_group)
        self.get_logger().info(
            f"configured: twin world {twin_path.name}, published (nominal) world "
            f"{nominal_path.name}, real-time factor {params.real_time_factor}"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Publish ``/tf_static`` and start stepping in real time."""
        result = super().on_activate(state)
        assert self.server is not None
        self.server.start_stepping(callback_group=self._step_group)
        return result

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop stepping (the simulation pauses; the cell keeps its state)."""
        if self.server is not None:
            self.server.stop_stepping()
        return super().on_deactivate(state)

    def _free(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.params = None

    def _diagnostics(self) -> tuple[DiagnosticStatus, Time] | None:
        server = self.server
        if server is None:
            return None
        return server.diagnostic_status(), time_msg(server.cell.time_s)


def main(args: list[str] | None = None) -> None:
    """Run the real twin; with ``autostart`` it configures and activates itself.

    Exits with code 2 when autostart fails (bad parameters or configuration files).
    """
    # Single-threaded on purpose: MuJoCo's EGL contexts are bound to the thread that made them
    # current, so rendering must stay on one thread (a multi-threaded executor moves the timer
    # callback between threads and fails with EGL_BAD_ACCESS; see bench/bench_twin.py).
    sys.exit(run_lifecycle_node(RealTwinNode, SingleThreadedExecutor, args))
