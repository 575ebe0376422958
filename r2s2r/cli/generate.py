"""``r2s2r generate``: the main job from the command line (:mod:`r2s2r.pipeline.main_job`).

Options left unset take their value from ``--params-file`` (the node's parameter file,
``sim_generate: ros__parameters:``) when given, else the schema defaults of
:class:`r2s2r_datagen.config.GenerateConfig`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from r2s2r_common.config import parse_config, read_yaml, ros_parameters_section
from r2s2r_datagen.config import GenerateConfig

from r2s2r.pipeline.main_job import run_main_job

NODE_NAME = "sim_generate"


@click.command("generate")
@click.option(
    "--params-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Parameter YAML of the sim_generate node (e.g. config/nodes/sim_generate.yaml).",
)
@click.option(
    "--configurations-file",
    "configurations_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Configurations YAML (default: the bundled config/datagen/configurations.yaml).",
)
@click.option(
    "-c",
    "--configuration",
    "configurations",
    multiple=True,
    help="Configuration to run (repeatable; default: all).",
)
@click.option("-n", "--episodes", "episodes_per_configuration", type=int, help="Per config.")
@click.option("--base-seed", type=int, help="Episode i uses seed base_seed + i.")
@click.option("-j", "--workers", type=int, help="Parallel workers.")
@click.option("--ray-address", help="Ray address ('local' starts a local Ray); default: none.")
@click.option("-o", "--output-dir", help="Run directory.")
@click.option("--resume/--no-resume", default=None, help="Continue the run in output-dir.")
@click.option(
    "--retry-failed",
    is_flag=True,
    default=None,
    help="Re-run every failed episode, also those whose generation failed (missed grasps).",
)
@click.option(
    "--retry-interrupted/--no-retry-interrupted",
    default=None,
    help="Re-run episodes lost to a failed write (full disk), a crash or a timeout (default: on).",
)
@click.option(
    "--disk-check/--no-disk-check",
    "check_disk_space",
    default=None,
    help="Refuse to start when the disk lacks the space the episodes need (default: on).",
)
@click.option("--job-timeout-s", type=float, help="Wall-clock limit per episode job.")
@click.option("--max-retries", type=int, help="Retries after a worker crash or timeout.")
@click.option("--artifact", "grounding_artifact_path", help="Grounding artifact YAML.")
@click.option(
    "--generator",
    "generator_overrides",
    multiple=True,
    help="Replace a behavior's generator: behavior=module:factory (repeatable).",
)
@click.option("--merge/--no-merge", default=None, help="Merge shards per configuration.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr.")
@click.option(
    "--prepare-demos/--no-prepare-demos",
    default=None,
    help="Record MimicGen's source demonstrations on the real twin if missing.",
)
@click.option(
    "--prepare-grounding/--no-prepare-grounding",
    default=None,
    help="Run `r2s2r ground` against the real twin if the artifact is missing.",
)
def generate_command(params_file: Path | None, **options: Any) -> None:
    """Generate simulated episodes for the four configurations (world × behavior)."""
    values: dict[str, Any] = {}
    if params_file is not None:
        values.update(ros_parameters_section(read_yaml(params_file), NODE_NAME, str(params_file)))
    for key, value in options.items():
        if value is None or (isinstance(value, tuple) and not value):
            continue
        values[key] = list(value) if isinstance(value, tuple) else value
    if isinstance(values.get("configurations_path"), Path):
        values["configurations_path"] = str(values["configurations_path"])
    config = parse_config(GenerateConfig, values, "r2s2r generate")
    summary = run_main_job(config)
    summary.print(file=sys.stdout)
    click.echo(f"summary: {Path(summary.run_dir) / 'summary.json'}")
    if summary.exit_code:
        sys.exit(summary.exit_code)
