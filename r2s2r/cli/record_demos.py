"""``r2s2r record-demos``: record demonstrations on the real twin and convert them.

The procedure is :func:`r2s2r_recorder.demos.record_demos`; the ``record_demos`` graph runs
under the one supervisor (:func:`r2s2r.pipeline.demos.run_record_graph`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from r2s2r_recorder.demos import quiet_console
from r2s2r_recorder.demos_config import MAX_DOMAIN_ID, RecordDemosConfig, RecordDemosError

from r2s2r.cli.grounded_cell import artifact_option, grounded_arguments
from r2s2r.pipeline.demos import record_demos_on_twin


@click.command("record-demos")
@click.option(
    "-n",
    "--episodes",
    type=click.IntRange(min=1),
    default=None,
    help="Takes to record, every one converted with its outcome (or use --successes).",
)
@click.option(
    "--successes",
    type=click.IntRange(min=1),
    default=None,
    help="Record until this many takes succeeded; only those are converted (failed takes are "
    "re-recorded with the next seed).",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=None,
    help="With --successes: the most takes to try (default: twice --successes). Exit code 4 "
    "when fewer succeeded.",
)
@click.option(
    "--domain-id",
    type=click.IntRange(min=0, max=MAX_DOMAIN_ID),
    default=None,
    help="ROS_DOMAIN_ID of the recording graph (default: a random private one, localhost "
    "discovery; set one to watch the recording).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder: bags/, dataset.hdf5, record_demos.json, logs/.",
)
@click.option(
    "--dataset",
    "dataset_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Dataset file to write (default: OUT/dataset.hdf5).",
)
@click.option(
    "--twin-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Hidden world of the real twin (default: config/twin/default.yaml).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed.")
@click.option(
    "--condition",
    type=click.Choice(["nominal", "lighting", "belt_speed", "unseen_object"]),
    default="nominal",
    show_default=True,
    help="Trial condition of the twin.",
)
@click.option(
    "--real-time-factor",
    type=click.FloatRange(min=0.01, max=50.0),
    default=1.0,
    show_default=True,
    help="Twin simulation speed vs wall clock.",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0.0),
    default=0.0,
    help="Wall-clock limit of the recording (default: 120 s + 60 s per episode).",
)
@click.option(
    "--launch-arg",
    "launch_args",
    multiple=True,
    help="NAME:=VALUE launch argument for the record_demos graph (repeatable).",
)
@artifact_option("Record")
@click.option("--force", is_flag=True, help="Replace bags/dataset no manifest says are ours.")
@click.option("--quiet", is_flag=True, help="Node output only to the per-node logs.")
def record_demos_command(
    episodes: int | None,
    successes: int | None,
    max_attempts: int | None,
    domain_id: int | None,
    out_dir: Path,
    dataset_path: Path | None,
    twin_config: Path | None,
    seed: int,
    condition: str,
    real_time_factor: float,
    timeout_s: float,
    launch_args: tuple[str, ...],
    artifact: Path | None,
    force: bool,
    quiet: bool,
) -> None:
    """Record demonstrations on the real twin (human-like demonstrator) and convert them.

    Runs the record_demos graph (one bag per trial), then writes OUT/dataset.hdf5: either
    --episodes N takes, or takes until --successes N succeeded (at most --max-attempts).
    A re-run with the same counts, seed, condition and twin configuration reuses the dataset.
    Exit code 3 when no episode was converted, 4 when fewer than --successes succeeded.
    """
    if (episodes is None) == (successes is None):
        raise click.UsageError("give exactly one of --episodes N and --successes N")
    if max_attempts is not None and successes is None:
        raise click.UsageError("--max-attempts goes with --successes")
    if successes is not None and max_attempts is not None and max_attempts < successes:
        raise click.UsageError(
            f"--max-attempts {max_attempts} < --successes {successes}: expected at least as "
            "many attempts as successes"
        )
    if artifact is not None:
        grounded = grounded_arguments(artifact, out_dir / "grounded_cell")
        launch_args = tuple(f"{k}:={v}" for k, v in grounded.items()) + launch_args
    config = RecordDemosConfig(
        episodes=episodes or 0,
        successes=successes or 0,
        max_attempts=max_attempts or 0,
        domain_id=domain_id,
        out_dir=str(out_dir),
        dataset_path=str(dataset_path) if dataset_path else "",
        twin_config=str(twin_config) if twin_config else "",
        seed=seed,
        condition=condition,
        real_time_factor=real_time_factor,
        timeout_s=timeout_s,
        launch_args=list(launch_args),
        force=force,
    )
    console = quiet_console() if quiet else None
    try:
        result = record_demos_on_twin(config, console=console)
    except RecordDemosError as error:
        raise click.UsageError(str(error)) from None
    finally:
        if console is not None:
            console.close()
    click.echo(result.format())
    click.echo(f"dataset: {result.dataset}" if result.dataset.is_file() else "dataset: none")
    if result.exit_code:
        sys.exit(result.exit_code)
