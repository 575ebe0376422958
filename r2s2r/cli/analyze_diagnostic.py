"""``r2s2r analyze diagnostic EXPDIR``: the diagnostic policy's style, demonstrator vs planner.

Examples::

    r2s2r experiment --preset diagnostic --out runs/diagnostic     # first: the policy
    r2s2r analyze diagnostic runs/diagnostic                      # the protocol's 50 trials
    r2s2r analyze diagnostic runs/diagnostic --trials 4           # 4 trials per condition
    r2s2r analyze diagnostic runs/diagnostic --publish results    # + results/diagnostic.*

Re-running keeps the trials already recorded by the same policy and rewrites the report
(:mod:`r2s2r.experiment.diagnostic`).
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import click
from r2s2r_policy.cli import THREADS_OPTION, TRIALS_CAP_OPTION

from r2s2r.cli.shared_options import NO_PROGRESS_OPTION, publish_option


@click.command("diagnostic")
@click.argument("experiment_dir", type=click.Path(exists=True, file_okay=False))
@TRIALS_CAP_OPTION
@THREADS_OPTION
@NO_PROGRESS_OPTION
@publish_option("Also copy the JSON and figure to DIR as diagnostic.json/.png (e.g. results/).")
def analyze_diagnostic_command(
    experiment_dir: str, trials: int | None, threads: int, no_progress: bool, publish: str | None
) -> None:
    """Measure whether the diagnostic policy moves like the demonstrator or the planner."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from r2s2r_common.config import ConfigError
    from r2s2r_policy.analysis.embeddings import AnalysisInputError

    from r2s2r.experiment.analysis import AnalysisError
    from r2s2r.experiment.diagnostic import DIAGNOSTIC_DIR, FIGURE_FILE, REPORT_FILE, run_diagnostic

    parts = ["r2s2r", "analyze", "diagnostic", str(Path(experiment_dir).resolve())]
    parts += ["--trials", str(trials)] if trials is not None else []
    try:
        run_diagnostic(experiment_dir, trials, not no_progress, shlex.join(parts), threads=threads)
    except (AnalysisError, AnalysisInputError, ConfigError) as error:
        raise click.ClickException(str(error)) from None
    if publish:
        source = Path(experiment_dir) / DIAGNOSTIC_DIR
        target = Path(publish)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / REPORT_FILE, target / REPORT_FILE)
        shutil.copyfile(source / FIGURE_FILE, target / FIGURE_FILE)
        click.echo(f"published {target / REPORT_FILE} and {FIGURE_FILE}")
