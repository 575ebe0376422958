"""Fixtures of the bring-up's tests: the smoke experiment, configured and run once per session.

The smoke experiment end to end is one run and two reruns in one folder (its stage cache):

1. ``smoke_first_run``: every stage runs (tests/test_experiment_smoke_results.py,
   tests/test_experiment_smoke_console.py);
2. ``smoke_cached_rerun``: the same inputs again, no stage does any work
   (tests/test_experiment_smoke_cache.py);
3. ``smoke_cli_rerun``: ``r2s2r experiment`` with a changed protocol, only the evaluations re-run
   (tests/test_experiment_smoke_cli.py).

Each later run depends on the earlier ones, so they run in this order whichever test asks
first; each run's folder is copied as it left it (``snapshot``), since the next run rewrites the
published files.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMMAND = "r2s2r experiment ..."
"""The command line the smoke runs record (as ``r2s2r experiment`` would)."""


def short_twin(folder: Path, timeout_s: float = 0.5) -> Path:
    """Write the shipped twin with a short trial limit and the object arriving at once."""
    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["task"]["trial_timeout_s"] = timeout_s
    data["randomization"]["arrival_time_s"] = [0.0, 0.0]
    path = folder / "short_twin.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def make_smoke_config(folder: Path) -> Any:
    """The smoke preset on tiny robot datasets under ``folder``: 4 steps, 1 trial a condition."""
    import torch
    from r2s2r_testing.episodes import write_robot_dataset

    from r2s2r.experiment.config import load_preset

    torch.set_num_threads(1)
    data = folder / "data"
    data.mkdir()
    sims = {
        name: str(write_robot_dataset(data / f"{name}.hdf5", "sim", seed))
        for seed, name in enumerate(
            ["grounded_mimicgen", "grounded_planner", "nominal_mimicgen", "nominal_planner"], 1
        )
    }
    return load_preset("smoke").model_copy(
        update={
            "real_dataset": str(write_robot_dataset(data / "real.hdf5", "real", 0)),
            "sim_datasets": sims,
            "train_steps": 4,
            "batch_size": 4,
            "trials_per_condition": {
                "nominal": 1,
                "lighting": 1,
                "belt_speed": 1,
                "unseen_object": 1,
            },
            "twin_config": str(short_twin(folder)),
            "capacity_trials": 1,
            "capacity_world": str(short_twin(folder)),
        }
    )


@pytest.fixture()
def smoke_config(tmp_path: Path) -> Any:
    """The smoke experiment's config on tiny datasets (a fresh one for each test)."""
    return make_smoke_config(tmp_path)


@dataclass
class SmokeRun:
    """One run of the smoke experiment and what it left."""

    config: Any
    """The experiment's config (``ExperimentConfig``)."""
    out: Path
    """The experiment's folder, shared by the runs (its stage cache)."""
    snapshot: Path
    """A copy of ``out`` as this run left it."""
    results: Any
    """What the run returned (``ExperimentResults``; for the command line, its ``Result``)."""
    lines: list[str]
    """What it said on the console, line by line."""


@pytest.fixture(scope="session")
def smoke_first_run(tmp_path_factory: pytest.TempPathFactory) -> SmokeRun:
    """Run the smoke experiment from nothing: every stage runs."""
    from r2s2r.experiment.runner import run_experiment

    folder = tmp_path_factory.mktemp("smoke")
    config = make_smoke_config(folder)
    out = folder / "exp"
    lines: list[str] = []
    results = run_experiment(config, out, COMMAND, lines.append, False)
    snapshot = shutil.copytree(out, folder / "after_first_run")
    return SmokeRun(config, out, snapshot, results, lines)


@pytest.fixture(scope="session")
def smoke_cached_rerun(smoke_first_run: SmokeRun) -> SmokeRun:
    """Run it again with the same inputs (every stage up to date)."""
    from r2s2r.experiment.runner import run_experiment

    first = smoke_first_run
    lines: list[str] = []
    again = run_experiment(first.config, first.out, COMMAND, lines.append, False)
    snapshot = shutil.copytree(first.out, first.out.parent / "after_cached_rerun")
    return SmokeRun(first.config, first.out, snapshot, again, lines)


@pytest.fixture(scope="session")
def smoke_cli_rerun(smoke_cached_rerun: SmokeRun) -> SmokeRun:
    """Run ``r2s2r experiment`` on the same folder and inputs but one nominal trial per policy."""
    from click.testing import CliRunner

    from r2s2r.cli.experiment import experiment_command

    config, out = smoke_cached_rerun.config, smoke_cached_rerun.out
    args = ["--smoke", "--out", str(out), "--steps", "4", "--batch-size", "4", "--no-progress"]
    args += ["--real-dataset", config.real_dataset, "--trials", "nominal=1"]
    args += ["--twin-config", config.twin_config]
    for name, path in config.sim_datasets.items():
        args += ["--sim-dataset", f"{name}={path}"]
    result = CliRunner().invoke(experiment_command, args)
    snapshot = shutil.copytree(out, out.parent / "after_cli_rerun")
    return SmokeRun(config, out, snapshot, result, result.output.splitlines())
