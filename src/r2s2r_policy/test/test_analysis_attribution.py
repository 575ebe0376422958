"""Per-step attribution, frame sets and rollouts: known answers and refusals."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from r2s2r_policy.analysis.attribution import (
    behavior_real_likeness,
    group_interval,
    spearman,
    state_attribution,
)
from r2s2r_policy.analysis.domain import fit_probe
from r2s2r_policy.analysis.embeddings import (
    AnalysisInputError,
    embed_frames,
    load_frame_set,
    observation_keys,
    predict_chunks,
    sample_frames,
)
from r2s2r_policy.data.sources import HDF5EpisodeSource
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec, untrained_policy
from r2s2r_policy.evaluation.rollouts import EVENTS, load_rollout, record_rollouts
from r2s2r_policy.evaluation.trials import EvaluationConfig
from r2s2r_policy.inference.trace import load_trace
from r2s2r_testing.episodes import write_robot_dataset

os.environ.setdefault("MUJOCO_GL", "egl")
REPO = Path(__file__).resolve().parents[3]


def test_two_separated_clusters_attribute_zero_and_one() -> None:
    rng = np.random.default_rng(0)
    real = rng.normal(0.0, 0.1, (200, 6))
    sim = rng.normal(5.0, 0.1, (300, 6))
    probe = fit_probe(real, sim, "mlp")
    assert probe.accuracy == pytest.approx(1.0)
    queries = np.vstack([rng.normal(0.0, 0.1, (20, 6)), rng.normal(5.0, 0.1, (20, 6))])
    state = state_attribution(real, sim, queries, probe, k=10)
    assert np.all(state.knn_real_share[:20] == 1.0) and np.all(state.knn_real_share[20:] == 0.0)
    assert np.all(state.probe_p_real[:20] > 0.99) and np.all(state.probe_p_real[20:] < 0.01)
    # On the demonstrations' support: about as close as real frames are to each other; far off.
    assert np.median(state.nearest_real_ratio[:20]) < 3.0
    assert np.all(state.nearest_real_ratio[20:] > 20.0)


def test_one_mixed_cluster_attributes_one_half() -> None:
    rng = np.random.default_rng(1)
    real = rng.normal(0.0, 1.0, (600, 4))
    sim = rng.normal(0.0, 1.0, (2000, 4))  # more sim frames: the kNN set is class-balanced
    probe = fit_probe(real, sim, "linear")
    assert 0.4 < probe.accuracy < 0.6
    state = state_attribution(real, sim, rng.normal(0.0, 1.0, (400, 4)), probe, k=10)
    assert np.mean(state.knn_real_share) == pytest.approx(0.5, abs=0.05)
    assert np.mean(state.probe_p_real) == pytest.approx(0.5, abs=0.1)


def test_behavior_is_one_on_the_real_reference_and_zero_on_the_sim_one() -> None:
    rng = np.random.default_rng(2)
    real_chunks = rng.normal(size=(5, 4, 3))
    sim_chunks = rng.normal(size=(5, 4, 3))
    assert np.all(behavior_real_likeness(real_chunks, real_chunks, sim_chunks) == 1.0)
    assert np.all(behavior_real_likeness(sim_chunks, real_chunks, sim_chunks) == 0.0)
    halfway = 0.5 * (real_chunks + sim_chunks)
    assert np.allclose(behavior_real_likeness(halfway, real_chunks, sim_chunks), 0.5)
    assert np.all(behavior_real_likeness(real_chunks, real_chunks, real_chunks) == 0.5)
    with pytest.raises(ValueError, match="expected equal"):
        behavior_real_likeness(real_chunks, real_chunks[:2], sim_chunks)


def test_group_interval_is_over_trials_and_spearman_ranks() -> None:
    trials = [np.full(100, 1.0), np.full(3, 0.0)]  # a long trial does not outweigh a short one
    mean, low, high = group_interval(trials)
    assert mean == pytest.approx(0.5) and low <= mean <= high
    assert all(np.isnan(v) for v in group_interval([]))
    x = np.arange(10.0)
    assert spearman(x, x**3) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert np.isnan(spearman(x[:2], x[:2]))


def _policy() -> torch.nn.Module:
    torch.set_num_threads(1)
    return untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)


def test_frame_sets_embed_like_the_policy_and_refuse_what_does_not_fit(tmp_path: Path) -> None:
    policy = _policy()
    path = write_robot_dataset(tmp_path / "sim.hdf5", "sim", seed=1, episodes=2)
    source = HDF5EpisodeSource(path, name="sim")
    frames = sample_frames(source, policy.spec, "sim", stride=3)
    assert len(frames) == 2 * 4  # frames 0, 3, 6, 9 of 10 per episode
    assert list(frames.frame[:4]) == [0, 3, 6, 9]
    saved = load_frame_set(frames.save(tmp_path / "frames.npz"))
    latents = embed_frames(policy, saved)
    assert latents.shape == (8, policy.latent_dim)
    one = {key: value[:1] for key, value in saved.observations.items()}
    single = {key: value[0] for key, value in one.items()}
    single["belt_speed_mps"] = single["belt_speed_mps"].reshape(1)
    chunk, latent = policy.predict_chunk_and_latent(single)
    assert np.allclose(latents[0], latent, atol=1e-5)
    assert np.allclose(predict_chunks(policy, one)[0], chunk, atol=1e-5)
    other = untrained_policy(robot_policy_spec(48, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    with pytest.raises(AnalysisInputError, match="do not fit the policy"):
        embed_frames(other, saved)
    with pytest.raises(AnalysisInputError, match="has no episode"):
        sample_frames(source, policy.spec, "sim", max_episodes=0)
    source.close()


def test_rollouts_keep_what_the_policy_saw_and_refuse_another_policy(tmp_path: Path) -> None:
    import yaml

    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["task"]["trial_timeout_s"] = 1.0
    data["randomization"]["arrival_time_s"] = [0.0, 0.0]
    twin = tmp_path / "twin.yaml"
    twin.write_text(yaml.safe_dump(data))
    policy = _policy()
    report = record_rollouts(
        policy, tmp_path / "r", EvaluationConfig(trials_per_condition={"nominal": 1}), twin
    )
    assert len(report.records) == 1
    rollout = load_rollout(tmp_path / "r" / "trial_000.npz", policy)
    ran = rollout.ran()
    assert ran.size >= 5
    assert set(rollout.events()) == set(EVENTS)
    joints = rollout.trace.extra("cell_joint_pos")
    assert joints.shape[1] == 18 and len(joints) == len(rollout.trace.extra("cell_time_s"))
    # The stored observations reproduce the latents the engine computed live.
    observations = rollout.observations(observation_keys(policy.spec))
    from r2s2r_policy.analysis.embeddings import embed_observations

    assert np.allclose(
        embed_observations(policy, observations), rollout.trace.arrays["latent"][ran], atol=1e-5
    )
    other = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=4)
    with pytest.raises(AnalysisInputError, match="another policy"):
        load_rollout(tmp_path / "r" / "trial_000.npz", other)
    plain = tmp_path / "plain"
    from r2s2r_policy.evaluation.in_process import evaluate_in_process

    evaluate_in_process(
        policy, EvaluationConfig(trials_per_condition={"nominal": 1}), twin, trace_dir=plain
    )
    assert load_trace(plain / "trial_000.npz").image_keys == ()
    with pytest.raises(AnalysisInputError, match="not an analysis rollout"):
        load_rollout(plain / "trial_000.npz")
