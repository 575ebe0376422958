"""``r2s2r ground``: run the world-grounding procedure and write the artifact and the report."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click
from r2s2r_common.config import ConfigError
from r2s2r_sim.world import WorldParams, load_world

from r2s2r_calibration.artifact import format_residual_table, save_artifact
from r2s2r_calibration.procedure import (
    GroundingRun,
    ProcedureConfig,
    parse_steps,
    run_grounding,
)
from r2s2r_calibration.report import build_report, format_report, save_report


def ground_in_process_twin(
    twin_config: str | Path,
    nominal: WorldParams,
    steps: list[str],
    config: ProcedureConfig | None = None,
    progress: object = None,
) -> GroundingRun:
    """Start a twin cell in this process (the twin reads its file) and ground against it.

    The procedure sees only what the cell publishes (:class:`SimCellClient`); the twin file is
    handed to the cell, exactly as ``real_twin`` would get it as a launch argument.
    """
    os.environ.setdefault("MUJOCO_GL", "egl")
    from r2s2r_sim.cell_runtime import SimCell
    from r2s2r_sim.mujoco_backend import MujocoBackend

    from r2s2r_calibration.sim_cell_client import SimCellClient

    cell = SimCell(MujocoBackend(), load_world(twin_config), nominal)
    try:
        return run_grounding(
            SimCellClient(cell),
            nominal,
            steps,
            config,
            progress,  # type: ignore[arg-type]
        )
    finally:
        cell.close()


@click.command("ground")
@click.option(
    "--output", "-o", required=True, type=click.Path(dir_okay=False), help="Artifact YAML."
)
@click.option(
    "--steps", default="all", show_default=True, help="Comma-separated subset of the steps."
)
@click.option(
    "--nominal",
    default="config/world/nominal.yaml",
    show_default=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Nominal world file.",
)
@click.option(
    "--start-twin",
    "twin_config",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Start an in-process twin cell from this twin file (the only cell supported yet).",
)
def ground_command(output: str, steps: str, nominal: str, twin_config: str) -> None:
    """Ground the simulator against a cell: write the artifact and the grounding report."""
    try:
        step_names = parse_steps(steps)
        nominal_world = load_world(nominal)
    except (ValueError, ConfigError) as error:
        raise click.UsageError(str(error)) from None
    started = time.perf_counter()
    run = ground_in_process_twin(twin_config, nominal_world, step_names, progress=click.echo)
    wall = time.perf_counter() - started
    save_artifact(run.artifact, output)
    click.echo(format_residual_table(run.artifact))
    figures, traces = build_report(run, nominal_world)
    click.echo(format_report(figures))
    for path in save_report(figures, traces, output):
        click.echo(f"wrote {path}")
    click.echo(f"wrote {output} (steps {run.steps_run}, {wall:.1f} s)")
    if run.failures:
        for step, message in run.failures.items():
            click.echo(f"step {step} failed: {message}", err=True)
        raise SystemExit(1)
