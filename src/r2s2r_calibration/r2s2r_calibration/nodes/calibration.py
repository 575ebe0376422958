"""``calibration``: a lifecycle node that grounds the simulator against a running cell over ROS.

configure: parameters -> :class:`CalibrationParams` (a bad value or an unreadable nominal world
returns FAILURE with the reason), the :class:`~.ros_client.RosCellClient` subscriptions,
publishers and service clients. activate: the procedure
(:func:`r2s2r_calibration.procedure.run_grounding`) starts in a worker thread; when it ends the
artifact and the grounding report are written next to ``output_path`` and :attr:`done` is set.
deactivate/cleanup: a running procedure is not interrupted mid-step (it finishes its step);
cleanup releases the camera streams. The node reads no twin file: everything comes from the
cell's topics and the nominal world (the datasheet).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Any

import rclpy
from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel, resolve_config_path
from r2s2r_common.errors import ExitCode
from r2s2r_common.ros.lifecycle import SchemaLifecycleNode
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_world.world import load_world
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.lifecycle import State, TransitionCallbackReturn

from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.intrinsics import ChessboardConfig
from r2s2r_calibration.nodes.ros_client import CellTimeoutError, RosCellClient, SecondCellError
from r2s2r_calibration.procedure import parse_steps, run_grounding
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig
from r2s2r_calibration.report import write_grounding_outputs
from r2s2r_calibration.session_bag import RecordingCellClient


class CalibrationParams(ConfigModel):
    """Parameters of the ``calibration`` node (each one a declared ROS parameter)."""

    output_path: str = Field(
        default="runs/grounding/artifact.yaml", description="Grounding artifact YAML to write."
    )
    steps: str = Field(default="all", description="Comma-separated steps, or 'all'.")
    nominal_world_path: str = Field(
        default="world/nominal.yaml",
        description="Nominal world (datasheet); relative paths resolve against config/.",
    )
    board_operator: bool = Field(
        default=True,
        description="The cell's operator places the board on /twin/operator/board_pose.",
    )
    board_squares_x: int = Field(default=7, ge=3, le=64, description="Board squares along x.")
    board_squares_y: int = Field(default=6, ge=3, le=64, description="Board squares along y.")
    board_square_length_m: float = Field(
        default=0.04, gt=0.0, le=1.0, description="Printed side of one board square (m)."
    )
    cell_name: str = Field(
        default="",
        description="The lab's name for the cell, recorded in the artifact ('' = unnamed): "
        "a graph started with another cell_name refuses the artifact.",
    )
    timeout_s: float = Field(
        default=30.0, gt=0.0, le=600.0, description="Wall-clock limit of each wait on the cell."
    )
    record_bag: str = Field(
        default="",
        description="Record everything the procedure observes to this new rosbag2 (MCAP) "
        "directory, to re-run steps later with `r2s2r ground --from-bag` ('' = do not record).",
    )
    autostart: bool = Field(
        default=True, description="Configure and activate at start-up (no lifecycle manager)."
    )
    shutdown_when_done: bool = Field(
        default=True, description="Shut down (exit) once the artifact is written."
    )


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = CalibrationParams


class CalibrationNode(SchemaLifecycleNode[CalibrationParams]):
    """The grounding procedure as a lifecycle node; see the module docstring.

    Args:
        node_name: ROS node name.
        progress: Extra progress callback (the CLI prints with it); the log always gets it.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str = "calibration", progress: Any = None, **kwargs: Any) -> None:
        super().__init__(node_name, PARAMETER_SCHEMA, **kwargs)
        self.params: CalibrationParams | None = None
        self.client: RosCellClient | None = None
        self._progress = progress
        self._steps: list[str] = []
        self._nominal: Any = None
        self._worker: threading.Thread | None = None
        self.done = threading.Event()
        self.run: GroundingRun | None = None
        self.error: str | None = None
        self.wall_s = 0.0

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Parameters, nominal world and the cell client; FAILURE (logged) on bad input."""
        try:
            params = self.config_from_parameters()
            self._steps = parse_steps(params.steps)
            self._nominal = load_world(resolve_config_path(params.nominal_world_path))
            board = ChessboardConfig(
                squares_x=params.board_squares_x,
                squares_y=params.board_squares_y,
                square_length_m=params.board_square_length_m,
            )
        except (ConfigError, ValueError) as error:
            self.get_logger().error(f"configure failed: {error}")
            return TransitionCallbackReturn.FAILURE
        self.params = params
        self.procedure_config = ProcedureConfig(
            board_steps=BoardStepsConfig(board=board), cell_name=params.cell_name or None
        )
        self.client = RosCellClient(self, params.board_operator, params.timeout_s)
        self.get_logger().info(f"configured: steps {self._steps} -> {params.output_path}")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Start the procedure in a worker thread."""
        self.done.clear()
        self._worker = threading.Thread(target=self._work, name="grounding", daemon=True)
        self._worker.start()
        return super().on_activate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Release the cell's streams."""
        if self.client is not None:
            self.client.close()
            self.client = None
        return TransitionCallbackReturn.SUCCESS

    def _say(self, message: str) -> None:
        self.get_logger().info(message)
        if self._progress is not None:
            self._progress(message)

    def _work(self) -> None:
        params, client = self.params, self.client
        assert params is not None and client is not None
        started = time.perf_counter()
        recorder: RecordingCellClient | None = None
        try:
            self._say(
                f"waiting up to {params.timeout_s:.0f} s for the cell: /joint_states, "
                "/tf_static (base_link) and its controllers' command topics"
            )
            client.wait_for_cell()
            cell: CellClient = client
            if params.record_bag:
                recorder = RecordingCellClient(client, params.record_bag)
                cell = recorder
                self._say(f"recording the session to {params.record_bag}")
            try:
                run = run_grounding(
                    cell, self._nominal, self._steps, self.procedure_config, self._say
                )
            finally:
                if recorder is not None:
                    recorder.close()
            self.wall_s = time.perf_counter() - started
            write_grounding_outputs(run, self._nominal, params.output_path, self.wall_s, self._say)
            for step, message in run.failures.items():
                self.get_logger().error(f"step {step} failed: {message}")
            self.run = run
        except (CellTimeoutError, SecondCellError) as error:  # said in one line, no traceback
            self.error = str(error)
            self.get_logger().error(f"grounding failed: {self.error}")
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"
            self.get_logger().error(f"grounding failed: {self.error}\n{traceback.format_exc()}")
        finally:
            self.wall_s = time.perf_counter() - started
            self.done.set()


def spin_until_done(
    node: CalibrationNode, executor: Executor, stop: threading.Event | None = None
) -> None:
    """Spin until the procedure finished, ROS shuts down or ``stop`` is set."""
    while (
        rclpy.ok(context=node.context)
        and not node.done.is_set()
        and not (stop is not None and stop.is_set())
    ):
        executor.spin_once(timeout_sec=0.1)


def main(args: list[str] | None = None) -> None:
    """Run the calibration node; with ``autostart`` it grounds at once and (by default) exits.

    Exit codes: 0 done (or stopped by Ctrl-C), 1 when autostart, the procedure or a step failed
    (with ``shutdown_when_done``), 2 on bad parameters.
    """

    def done(node: CalibrationNode) -> bool:
        return bool(node.get_parameter("shutdown_when_done").value) and node.done.is_set()

    def outcome(node: CalibrationNode) -> int:
        failed = node.error is not None or bool(node.run and node.run.failures)
        return ExitCode.FAILED if failed else ExitCode.OK

    # One executor thread is enough (the procedure has its own worker thread) and the only
    # choice that keeps up with 500 Hz /joint_states: rclpy's MultiThreadedExecutor spends a
    # whole core and drops most samples at that rate.
    sys.exit(
        run_lifecycle_node(
            CalibrationNode,
            SingleThreadedExecutor,
            args,
            autostart_failed_exit_code=ExitCode.FAILED,
            until=done,
            exit_code=outcome,
        )
    )
