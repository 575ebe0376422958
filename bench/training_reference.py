"""The reference training run: 40 steps whose losses a refactor must leave bit-identical.

Trains one policy for 40 steps on one thread and prints the SHA-256 of its losses (each written
with ``repr``, so any change in the last bit changes the hash), the first and last loss. Run it
before and after a change that must not change training (a module split, a moved function) and
compare the hashes; different CPUs or torch builds may round differently, so compare on one
machine.

    python bench/training_reference.py                    # two synthetic datasets (r2s2r_testing)
    python bench/training_reference.py --config EXP/policies/real_only/train_config.yaml

``--config`` takes a saved ``train_config.yaml`` of an experiment (its datasets are read from
where it names them); without it, a real and a simulated dataset are synthesized with the test
factory and trained with ``config/policy/cotrain.yaml`` at 32 px.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import benchlib
import torch
import yaml

STEPS = 40


def synthetic_config(folder: Path) -> dict[str, Any]:
    """``config/policy/cotrain.yaml`` at 32 px on two synthesized datasets (real, sim)."""
    from r2s2r_testing.episodes import write_robot_dataset

    config = yaml.safe_load((benchlib.REPO / "config" / "policy" / "cotrain.yaml").read_text())
    config["real_dataset"] = str(write_robot_dataset(folder / "real.hdf5", "real", 0, 4))
    config["sim_dataset"] = str(write_robot_dataset(folder / "sim.hdf5", "sim", 1, 4))
    config["sim_ratio"] = 0.5
    config["batch_size"] = 8
    config["policy"]["image_height_px"] = config["policy"]["image_width_px"] = 32
    return config


def main() -> None:
    """Train the reference run and print its figures."""
    args_parser = benchlib.parser(__doc__)
    args_parser.add_argument("--config", type=Path, help="a saved train_config.yaml")
    args = args_parser.parse_args()
    from r2s2r_common.config import parse_config
    from r2s2r_policy.training import train
    from r2s2r_policy.training_config import TrainConfig

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        data = yaml.safe_load(args.config.read_text()) if args.config else synthetic_config(folder)
        data.update(
            steps=STEPS, num_threads=1, progress_bar=False, checkpoint_every_steps=STEPS, seed=0
        )
        result = train(parse_config(TrainConfig, data, "reference run"), folder / "run")
    losses = json.dumps([repr(loss) for loss in result.losses])
    benchlib.report(
        "training_reference",
        [
            benchlib.Figure("losses_sha256", hashlib.sha256(losses.encode()).hexdigest()),
            benchlib.Figure("steps", len(result.losses), "steps", STEPS),
            benchlib.Figure("first_loss", result.losses[0]),
            benchlib.Figure("last_loss", result.losses[-1]),
        ],
        config=str(args.config) if args.config else "synthetic",
    )


if __name__ == "__main__":
    main()
