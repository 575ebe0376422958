"""``r2s2r experiment``: the 2×2 co-training experiment, end to end, resumable.

Examples::

    r2s2r experiment                                   # reduced scale (~1 h on 2 CPU cores)
    r2s2r experiment --preset paper --out runs/experiment_paper
    r2s2r experiment --real-demos 100 --sim-episodes 1500 --steps 20000 --image-px 128
    r2s2r experiment --preset smoke --out /tmp/smoke  # minutes: checks the pipeline
    r2s2r experiment --ros                             # evaluate through the ROS graph

Re-running the same command skips every stage whose outputs exist and whose inputs are
unchanged; changing a size re-runs only the stages that depend on it. The options that set
the experiment's config are one table (:mod:`r2s2r.experiment.options`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from r2s2r_common.errors import ExitCode

from r2s2r.cli.shared_options import NO_PROGRESS_OPTION, publish_option
from r2s2r.experiment.config import PRESETS
from r2s2r.experiment.options import config_from_options, config_options, reproduce_command


@click.command("experiment")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="runs/experiment",
    show_default=True,
    help="Experiment directory (stages cache their outputs here; rerun to resume).",
)
@click.option(
    "--preset",
    type=click.Choice(PRESETS),
    default="reduced",
    show_default=True,
    help="Sizes: reduced (~1 h on 2 CPU cores), paper (100 real + 1500 sim), smoke (minutes), "
    "diagnostic (10 real + nominal-world planner data only; r2s2r analyze diagnostic).",
)
@click.option("--smoke", is_flag=True, help="Same as --preset smoke.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="ExperimentConfig YAML instead of a preset (e.g. a saved experiment.yaml).",
)
@config_options
@NO_PROGRESS_OPTION
@publish_option(
    "Also copy the summary JSON and the bar plot to DIR as experiment_<preset>.json/.png "
    "(e.g. results/)."
)
@click.option(
    "--publish-name",
    default=None,
    help="File stem of --publish (default experiment_<preset>), e.g. experiment_family_outer1 "
    "for a run on another twin.",
)
def experiment_command(
    out_dir: str,
    preset: str,
    smoke: bool,
    config_path: str | None,
    no_progress: bool,
    publish: str | None,
    publish_name: str | None,
    **options: Any,
) -> None:
    """Train real-only and four co-trained policies, evaluate them, write the paper's table."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    config = config_from_options("smoke" if smoke else preset, config_path, options)
    from r2s2r.experiment.runner import run_experiment
    from r2s2r.experiment.validation import validate_experiment

    validate_experiment(config)  # before any stage: a typo costs seconds, not hours
    command = reproduce_command(config, out_dir)
    click.echo(f"experiment {config.preset}: {Path(out_dir).resolve()}")
    if config.translation is not None:
        from r2s2r.experiment.runner import open_session
        from r2s2r.experiment.translation import run_translation

        session = open_session(config, out_dir, progress_bars=not no_progress)
        policies = run_translation(session, config.translation, command)
    else:
        policies = run_experiment(
            config, out_dir, command=command, progress_bars=not no_progress
        ).policies
    if publish:
        import shutil

        target = Path(publish)
        target.mkdir(parents=True, exist_ok=True)
        stem = publish_name or f"experiment_{config.preset}"
        shutil.copyfile(Path(out_dir) / "summary.json", target / f"{stem}.json")
        shutil.copyfile(Path(out_dir) / "results.png", target / f"{stem}.png")
        click.echo(f"published {target / stem}.json and .png")
    if not any(p.ran for p in policies):
        raise SystemExit(ExitCode.FAILED)
