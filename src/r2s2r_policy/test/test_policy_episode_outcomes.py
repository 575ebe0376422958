"""Training leaves out failed episodes: behaviour cloning on a failed demo teaches the failure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2s2r_policy.data.sources import HDF5EpisodeSource
from r2s2r_policy.training_config import TrainConfig
from r2s2r_policy.training_data import open_sources
from r2s2r_testing.episodes import synthetic_episode, write_episodes


def write_outcomes(path: Path, outcomes: list[str], frames: int = 6) -> Path:
    """Write one episode per outcome; episode ``i`` has all actions equal to ``i``."""
    episodes = []
    for index, outcome in enumerate(outcomes):
        episode = synthetic_episode(index, frames, outcome=outcome)
        episode.actions = np.full_like(episode.actions, float(index))
        episodes.append(episode)
    return write_episodes(path, episodes)


def test_source_keeps_only_requested_outcomes(tmp_path: Path) -> None:
    path = write_outcomes(tmp_path / "real.hdf5", ["success", "failure", "success", "failure"])
    everything = HDF5EpisodeSource(path)
    assert everything.num_episodes() == 4
    kept = HDF5EpisodeSource(path, outcomes=["success"])
    assert kept.num_episodes() == 2
    assert kept.episode_indices == [0, 2]
    assert kept.excluded_outcomes == {"failure": 2}
    # Kept episode k reads the k-th successful episode's arrays, not reader episode k.
    assert float(kept.low_dim(1)["actions"][0, 0]) == 2.0


def test_training_sources_leave_out_failures_by_default(tmp_path: Path) -> None:
    path = write_outcomes(tmp_path / "real.hdf5", ["failure", "success", "failure"])
    sources, _ = open_sources(TrainConfig(real_dataset=str(path), sim_ratio=0.0))
    real = sources["real"]
    assert real.num_episodes() == 1
    assert float(real.low_dim(0)["actions"][0, 0]) == 1.0
    sources, _ = open_sources(
        TrainConfig(real_dataset=str(path), sim_ratio=0.0, episode_outcomes=["success", "failure"])
    )
    assert sources["real"].num_episodes() == 3


def test_no_kept_episode_is_a_clear_error(tmp_path: Path) -> None:
    path = write_outcomes(tmp_path / "real.hdf5", ["failure", "failure"])
    with pytest.raises(ValueError, match="no episode has an outcome in"):
        HDF5EpisodeSource(path, outcomes=["success"])
