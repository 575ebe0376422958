"""``r2s2r analyze experiment EXPDIR``: the latent-space report of a finished experiment.

Examples::

    r2s2r analyze experiment runs/experiment                  # every co-trained policy
    r2s2r analyze experiment runs/experiment --trials 4       # 4 trials per condition
    r2s2r analyze experiment runs/experiment --publish results --publish-name latent_reduced

Re-running skips the cached analysis stages (sim-only references, rollouts, frames) and
rewrites the report (:mod:`r2s2r.experiment.analysis`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import click
from r2s2r_policy.cli import K_OPTION, STRIDE_OPTION, THREADS_OPTION, TRIALS_CAP_OPTION

from r2s2r.cli.shared_options import NO_PROGRESS_OPTION, publish_option


@click.command("experiment")
@click.argument("experiment_dir", type=click.Path(exists=True, file_okay=False))
@STRIDE_OPTION
@TRIALS_CAP_OPTION
@K_OPTION
@click.option(
    "--projection",
    type=click.Choice(["pca", "umap", "tsne"]),
    default="pca",
    show_default=True,
    help="2-D map (UMAP/openTSNE when installed, else PCA).",
)
@THREADS_OPTION
@NO_PROGRESS_OPTION
@publish_option("Also copy the JSON and figures to DIR (e.g. results/).")
@click.option("--publish-name", default="latent", show_default=True, help="File stem of --publish.")
def analyze_experiment_command(
    experiment_dir: str,
    stride: int,
    trials: int | None,
    k: int,
    projection: str,
    threads: int,
    no_progress: bool,
    publish: str | None,
    publish_name: str,
) -> None:
    """Measure the mixture in a finished experiment: latents, attribution, probes, maps."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from r2s2r.experiment.analysis import AnalysisOptions
    from r2s2r.experiment.analysis_report import run_analysis

    options = AnalysisOptions(
        stride=stride, trials=trials, k=k, projection=projection, threads=threads
    )
    command = "r2s2r analyze " + shlex.join(sys.argv[2:]) if len(sys.argv) > 2 else ""
    data = run_analysis(experiment_dir, options, progress_bars=not no_progress, command=command)
    if publish:
        report = Path(experiment_dir) / "analysis" / "report"
        target = Path(publish)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(report / "latent.json", target / f"{publish_name}.json")
        for name in ["summary.png"] + [
            figure
            for row in data["policies"].values()
            for figure in row.get("figures", {}).values()
        ]:
            if (report / name).exists():
                shutil.copyfile(report / name, target / f"{publish_name}_{name}")
        click.echo(f"published {target / publish_name}.json and figures")
