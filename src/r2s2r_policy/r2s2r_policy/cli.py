"""Command line: ``python -m r2s2r_policy.cli train --config config/policy/cotrain.yaml ...``.

Works unchanged under ``torchrun --nproc_per_node=N -m r2s2r_policy.cli train ...`` (DDP, gloo
on CPU, NCCL on CUDA): every rank prints one ``rank R/W finished`` line; rank 0 writes the
checkpoints.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from r2s2r_common.config import load_config, parse_config

from .training import TrainConfig, resolve_device, train


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
        "final_loss": result.losses[-1] if result.losses else None,
        "samples_per_s": round(result.samples_per_s, 1),
        "checkpoint": str(result.checkpoint) if result.checkpoint else None,
    }
    click.echo(f"rank {result.rank}/{result.world_size} finished {json.dumps(summary)}")


if __name__ == "__main__":
    main()
