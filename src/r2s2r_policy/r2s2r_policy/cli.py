"""Command line: ``python -m r2s2r_policy.cli train --config config/policy/cotrain.yaml ...``.

Works unchanged under ``torchrun --nproc_per_node=N -m r2s2r_policy.cli train ...`` (DDP, gloo
on CPU, NCCL on CUDA): every rank prints one ``rank R/W finished`` line; rank 0 writes the
checkpoints.

:func:`analyze_index_command` is ``r2s2r analyze index``: it ships the live real/sim monitor's
latent index in a checkpoint (:mod:`r2s2r_policy.analysis.index`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click
from r2s2r_common.config import load_config, parse_config
from r2s2r_common.console import progress_reporter
from r2s2r_common.errors import one_line
from r2s2r_common.files import write_atomic

from .training import train
from .training_config import TrainConfig
from .training_device import resolve_device

if TYPE_CHECKING:
    from .analysis.embeddings import FrameSet
    from .data.sources import EpisodeSource
    from .models import Policy


@click.group()
def main() -> None:
    """r2s2r policy tools."""


@main.command("train")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="Training config YAML (TrainConfig schema).",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Run directory (checkpoints, resume).",
)
@click.option("--real", "real_dataset", default=None, help="Override real_dataset.")
@click.option("--sim", "sim_dataset", default=None, help="Override sim_dataset.")
@click.option("--sim-ratio", type=float, default=None, help="Override sim_ratio (0..1).")
@click.option("--steps", type=int, default=None, help="Override steps.")
@click.option("--seed", type=int, default=None, help="Override seed.")
@click.option(
    "--device",
    default=None,
    help="Override device: auto, cpu, cuda, cuda:N (CUDA unverified: no GPU on the dev machines).",
)
@click.option("--no-resume", is_flag=True, help="Ignore existing checkpoints in --run-dir.")
@click.option(
    "--losses-out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Rank 0 writes every step's loss (the global batch's) run here to this JSON file.",
)
def train_command(
    config_path: str,
    run_dir: str,
    real_dataset: str | None,
    sim_dataset: str | None,
    sim_ratio: float | None,
    steps: int | None,
    seed: int | None,
    device: str | None,
    no_resume: bool,
    losses_out: str | None,
) -> None:
    """Train or resume a co-trained policy."""
    config = load_config(TrainConfig, config_path)
    overrides = {
        key: value
        for key, value in {
            "real_dataset": real_dataset,
            "sim_dataset": sim_dataset,
            "sim_ratio": sim_ratio,
            "steps": steps,
            "seed": seed,
            "device": device,
        }.items()
        if value is not None
    }
    if overrides:
        config = parse_config(
            TrainConfig, {**config.model_dump(), **overrides}, source=f"{config_path} + options"
        )
    try:
        resolve_device(config.device, int(os.environ.get("LOCAL_RANK", "0")))
    except ValueError as error:
        raise click.ClickException(str(error)) from error
    result = train(config, Path(run_dir), resume=not no_resume)
    summary = {
        "rank": result.rank,
        "world_size": result.world_size,
        "steps": [result.start_step, result.step],
        "final_loss": result.final_loss,
        "samples_per_s": round(result.samples_per_s, 1),
        "checkpoint": str(result.checkpoint) if result.checkpoint else None,
    }
    if losses_out and result.rank == 0:
        record = {
            "start_step": result.start_step,
            "world_size": result.world_size,
            "losses": result.losses,
        }
        write_atomic(losses_out, json.dumps(record) + "\n")  # whole or not at all
    click.echo(f"rank {result.rank}/{result.world_size} finished {json.dumps(summary)}")


def _dataset_path(given: str | None, recorded: dict[str, object], domain: str) -> str:
    """Return one domain's dataset: the option, else the one the checkpoint was trained on.

    Raises:
        click.ClickException: Neither given nor recorded (a real-only policy has no sim data),
            or the recorded one is gone.

    """
    option = f"--{domain}"
    if given is not None:
        return given
    ratio = float(recorded.get("sim_ratio", 0.5))  # type: ignore[arg-type]
    used = ratio < 1.0 if domain == "real" else ratio > 0.0
    path = recorded.get(f"{domain}_dataset")
    if not used or not path:
        raise click.ClickException(
            f"the index needs both domains: no {option} given and the checkpoint was trained "
            f"without {domain} data (sim_ratio {ratio:g}); a policy trained on one domain has "
            f"nothing to tell it from: give {option} DATASET to compare against one anyway"
        )
    if not Path(str(path)).exists():
        raise click.ClickException(
            f"{option}: the checkpoint's {domain}_dataset {path} does not exist here; "
            f"give {option} DATASET"
        )
    return str(path)


def _sample_frames(
    source: EpisodeSource, policy: Policy, domain: str, stride: int, path: str, bars: bool
) -> FrameSet:
    """Sample a dataset's frames for the index, with a progress bar over its episodes."""
    from .analysis.embeddings import sample_frames

    bar = progress_reporter(f"{domain} frames", source.num_episodes(), bars, unit="ep")
    try:
        return sample_frames(
            source,
            policy.spec,
            domain,
            stride,
            name=path,
            progress=lambda done, _: bar.update(done),
        )
    finally:
        bar.close()


# Options the ``r2s2r analyze`` commands share (one meaning, one default, written once).
STRIDE_OPTION = click.option(
    "--stride",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Take every STRIDE-th frame of each training episode.",
)
K_OPTION = click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Nearest neighbours judged per latent (the kNN real share).",
)
TRIALS_CAP_OPTION = click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=None,
    help="At most this many trials per condition (default: the experiment's protocol).",
)
THREADS_OPTION = click.option(
    "--threads",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="torch intra-op threads (0: torch's default; 1 on a loaded 2-core machine).",
)


@click.command("index")
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--real",
    "real_dataset",
    type=click.Path(exists=True),
    default=None,
    help="Real dataset (file or shard folder); default: the one the checkpoint was trained on.",
)
@click.option(
    "--sim",
    "sim_dataset",
    type=click.Path(exists=True),
    default=None,
    help="Simulated dataset; default: the one the checkpoint was trained on.",
)
@STRIDE_OPTION
@click.option(
    "--per-domain",
    type=click.IntRange(min=1),
    default=2048,
    show_default=True,
    help="Most frames per domain (both domains keep as many, subsampled deterministically).",
)
@K_OPTION
@click.option("--progress/--no-progress", default=True, help="Progress bars on a terminal.")
def analyze_index_command(
    checkpoint: str,
    real_dataset: str | None,
    sim_dataset: str | None,
    stride: int,
    per_domain: int,
    k: int,
    progress: bool,
) -> None:
    """Ship a real/sim latent index in CHECKPOINT (the policy_inference node's live monitor).

    Frames of the policy's real and simulated training data (the datasets it was trained on
    unless --real/--sim say otherwise, the episodes its training kept) are embedded with the
    policy and written as CHECKPOINT/latent_index.npz; the node then publishes, per inference,
    the share of real frames among the k nearest latents on /diagnostics.
    """
    from r2s2r_dataset import DatasetError

    from .analysis.embeddings import REAL, SIM, AnalysisInputError
    from .analysis.index import build_latent_index
    from .checkpoint import CheckpointError, load_checkpoint
    from .data.sources import HDF5EpisodeSource, MissingFeatureError

    try:
        loaded = load_checkpoint(checkpoint)
        recorded = dict(loaded.config.training.get("config", {}))
        outcomes = recorded.get("episode_outcomes")
        frames = {}
        for domain, given in ((REAL, real_dataset), (SIM, sim_dataset)):
            path = _dataset_path(given, recorded, domain)
            try:
                source = HDF5EpisodeSource(path, name=domain, outcomes=outcomes)
            except ValueError as error:  # no (kept) episode, names that disagree
                raise click.ClickException(f"--{domain}: {one_line(str(error))}") from None
            frames[domain] = _sample_frames(source, loaded.policy, domain, stride, path, progress)
        count = min(len(frames[REAL]), len(frames[SIM]), per_domain)
        bar = progress_reporter("embedding", 2 * count, progress, unit="frame")
        try:
            index = build_latent_index(
                loaded.policy,
                frames[REAL],
                frames[SIM],
                k=k,
                per_domain=per_domain,
                progress=lambda done, _total: bar.update(done),
            )
        finally:
            bar.close()
    except (CheckpointError, AnalysisInputError, MissingFeatureError, DatasetError) as error:
        raise click.ClickException(one_line(str(error))) from None
    written = index.save(checkpoint)
    real_shares, sim_shares = index.leave_one_out()
    click.echo(
        f"latent index: {index.per_domain} real + {index.per_domain} sim frames (of "
        f"{len(frames[REAL])} / {len(frames[SIM])} at stride {stride}), width "
        f"{index.latent_dim}, k {index.k} -> {written}; leave-one-out real-likeness: real frames "
        f"{real_shares.mean():.2f}, sim frames {sim_shares.mean():.2f} "
        "(1 / 0: the policy tells them apart, 0.5: it does not)"
    )


if __name__ == "__main__":
    main()
