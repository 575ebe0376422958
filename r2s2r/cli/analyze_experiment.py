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


@click.command("experiment")
@click.argument("experiment_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--stride",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Keep every N-th frame of each training episode.",
)
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many trials per condition (default: the experiment's protocol).",
)
@click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Neighbours of the kNN real share.",
)
@click.option(
    "--projection",
    type=click.Choice(["pca", "umap", "tsne"]),
    default="pca",
    show_default=True,
    help="2-D map (UMAP/openTSNE when installed, else PCA).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="torch intra-op threads (0: torch's default; 1 on a loaded 2-core machine).",
)
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@click.option(
    "--publish",
    type=click.Path(file_okay=False),
    default=None,
    help="Also copy the JSON and figures to DIR (e.g. results/).",
)
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
