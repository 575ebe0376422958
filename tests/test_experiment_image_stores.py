"""The experiment's image stores: one per dataset and size under the experiment, shared by the
policies, outside the training stage's key (a throughput setting: cached policies stay)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from r2s2r.experiment.config import ExperimentConfig
from r2s2r.experiment.products import DatasetProduct
from r2s2r.experiment.runner import open_session
from r2s2r.experiment.training import train_policy

pytestmark = pytest.mark.graph  # the session asks git for its commit


def no_commands(command: list[str], _timeout_s: float, _log: Path) -> tuple[int, str]:
    raise AssertionError(f"no command expected: {command}")


def session_of(config: ExperimentConfig, folder: Path, lines: list[str]) -> Any:
    return open_session(config, folder, lines.append, False, no_commands)


def test_policies_share_one_store_per_dataset_and_the_key_ignores_it(
    tmp_path: Path, smoke_config: ExperimentConfig
) -> None:
    overrides = dict(smoke_config.train_overrides, image_store_dir="image_stores")
    stored = smoke_config.model_copy(update={"train_overrides": overrides})
    real = DatasetProduct(smoke_config.real_dataset, "real-fingerprint")
    sim = DatasetProduct(smoke_config.sim_datasets["nominal_planner"], "sim-fingerprint")
    lines: list[str] = []
    session = session_of(stored, tmp_path / "exp", lines)
    first = train_policy(session, "real_only", real, None)
    stores = tmp_path / "exp" / "image_stores"
    (real_store,) = stores.iterdir()
    assert real_store.name.startswith("real-32px-")
    built = (real_store / "head_camera_rgb.npy").stat().st_mtime_ns
    train_policy(session, "nominal_planner", real, sim)
    train_policy(session, "capacity", None, sim, sim_ratio=1.0)
    names = sorted(p.name for p in stores.iterdir())
    assert len(names) == 2 and names[1].startswith("sim-32px-")  # one store per dataset
    assert (real_store / "head_camera_rgb.npy").stat().st_mtime_ns == built  # built once

    # The same policy with the in-memory cache: the same stage key and loss.
    cached = session_of(smoke_config, tmp_path / "cached", [])
    again = train_policy(cached, "real_only", real, None)
    assert again.fingerprint == first.fingerprint
    loss = session.state.training["real_only"]["final_loss"]
    assert cached.state.training["real_only"]["final_loss"] == loss
    # ... so an experiment trained with the cache keeps its policies when it moves to stores.
    moved = session_of(stored, tmp_path / "cached", [])
    train_policy(moved, "real_only", real, None)
    assert moved.stages.skipped == ["policies/real_only"]
