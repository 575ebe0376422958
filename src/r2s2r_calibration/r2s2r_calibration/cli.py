"""Grounding against a running cell over ROS (or a recorded session): the core of ``r2s2r ground``.

The cell runs in another terminal (``r2s2r launch real_deploy``); the bring-up's ``r2s2r
ground`` adds ``--launch GRAPH`` / ``--launch-arg NAME:=VALUE`` and starts the graph around this
command (``r2s2r.cli.ground``). The procedure runs in the ``calibration`` lifecycle node, in
this process, and writes the artifact and the grounding report.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click
from r2s2r_common.errors import ExitCode, Terminated, sigterm_as_flag


@click.command("ground")
@click.option(
    "--output", "-o", required=True, type=click.Path(dir_okay=False), help="Artifact YAML."
)
@click.option(
    "--steps",
    default="all",
    show_default=True,
    help="Comma-separated subset of the steps "
    "(intrinsics, extrinsics, registration, bins, sysid, belt).",
)
@click.option(
    "--nominal",
    default="world/nominal.yaml",
    show_default=True,
    help="Nominal world file (relative paths resolve against config/).",
)
@click.option(
    "--no-board-operator",
    is_flag=True,
    help="The cell has no board operator topic (board steps then fail with a reason).",
)
@click.option(
    "--cell-name",
    default="",
    help="The lab's name for this cell, recorded in the artifact: a graph started with "
    "another cell_name refuses the artifact (unnamed: the static scene still identifies it).",
)
@click.option(
    "--timeout-s", default=60.0, show_default=True, help="Limit of each wait on the cell (s)."
)
@click.option(
    "--record-bag",
    default="",
    type=click.Path(file_okay=False),
    help="Record everything the procedure observes to this new rosbag2 (MCAP) directory.",
)
@click.option(
    "--from-bag",
    default="",
    type=click.Path(file_okay=False),
    help="Run the steps from a session recorded with --record-bag instead of a live cell "
    "(no ROS needed; --launch is ignored).",
)
def ground_command(
    output: str,
    steps: str,
    nominal: str,
    no_board_operator: bool,
    cell_name: str,
    timeout_s: float,
    record_bag: str,
    from_bag: str,
) -> None:
    """Ground the simulator against a running cell (or a recorded session): artifact + report."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from r2s2r_calibration.procedure import parse_steps

    try:
        parse_steps(steps)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if cell_name and not cell_name.strip():
        raise click.UsageError(f"--cell-name {cell_name!r}: expected a name, or none")
    if from_bag:
        if record_bag:
            raise click.UsageError("--record-bag and --from-bag exclude each other")
        _ground_from_bag(output, steps, nominal, from_bag, cell_name)
        return
    # The procedure's log is progress (stdout, once: the node's log lines, without the ROS
    # timestamp); stderr gets the one line of a failure.
    os.environ.setdefault("RCUTILS_LOGGING_USE_STDOUT", "1")
    os.environ.setdefault("RCUTILS_CONSOLE_OUTPUT_FORMAT", "[{severity}] [{name}]: {message}")
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from r2s2r_calibration.nodes.calibration import CalibrationNode, spin_until_done

    if record_bag and Path(record_bag).exists():
        raise click.UsageError(f"--record-bag {record_bag}: exists; give a new directory")
    started = time.perf_counter()
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = CalibrationNode(
            context=context,
            parameter_overrides=[
                Parameter("output_path", value=str(output)),
                Parameter("steps", value=steps),
                Parameter("nominal_world_path", value=nominal),
                Parameter("board_operator", value=not no_board_operator),
                Parameter("cell_name", value=cell_name),
                Parameter("timeout_s", value=float(timeout_s)),
                Parameter("record_bag", value=str(record_bag)),
            ],
        )
        # One thread: the procedure runs in its own worker thread and only waits on the
        # buffers; rclpy's multi-threaded executor cannot keep up with 500 Hz joint states.
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        if not node.autostart():
            raise click.UsageError("the calibration node failed to configure (see the log)")
        # SIGTERM while spinning: stop the loop, clean up, then end as Terminated (raised
        # from inside rclpy it would come out as another error).
        with sigterm_as_flag() as terminated:
            spin_until_done(node, executor, terminated)
        executor.shutdown()
        node.destroy_node()
        if terminated.is_set():
            raise Terminated("SIGTERM")
    finally:
        rclpy.shutdown(context=context)
    click.echo(f"r2s2r ground: {time.perf_counter() - started:.1f} s wall in all")
    if node.error is not None:
        _fail(f"grounding failed: {node.error}")
    if node.run is not None and node.run.failures:
        _fail_steps(node.run.failures, output)


def _fail(message: str) -> None:
    """One line on stderr, exit code 1 (a failed run)."""
    click.echo(f"r2s2r ground: error: {message}", err=True)
    raise SystemExit(ExitCode.FAILED)


def _fail_steps(failures: dict[str, str], output: str) -> None:
    """Every failed step in one line (the artifact, if written, holds the others)."""
    steps = "; ".join(f"{step}: {message}" for step, message in failures.items())
    _fail(f"{len(failures)} step(s) failed ({steps}); {output}, if written, lacks them")


def _ground_from_bag(output: str, steps: str, nominal: str, bag: str, cell_name: str) -> None:
    """Run grounding steps from a recorded session bag; exit 1 if a step failed."""
    from r2s2r_common.config import resolve_config_path
    from r2s2r_world.world import load_world

    from r2s2r_calibration.procedure import parse_steps, run_grounding
    from r2s2r_calibration.procedure_types import ProcedureConfig
    from r2s2r_calibration.report import write_grounding_outputs
    from r2s2r_calibration.session_bag import BagCellClient, SessionBagError

    try:
        client = BagCellClient(bag)
    except SessionBagError as error:
        raise click.UsageError(str(error)) from None
    names = parse_steps(steps)
    if steps == "all":
        names = [name for name in names if name in client.steps]
    click.echo(f"r2s2r ground: steps {names} from {bag} (recorded: {client.steps})")
    world = load_world(resolve_config_path(nominal))
    started = time.perf_counter()
    config = ProcedureConfig(cell_name=cell_name or None)
    run = run_grounding(client, world, names, config, progress=click.echo)
    write_grounding_outputs(run, world, output, time.perf_counter() - started, click.echo)
    if run.failures:
        _fail_steps(run.failures, output)
