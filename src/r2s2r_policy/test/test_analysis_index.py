"""The live real/sim monitor's latent index: known answers, the binding to weights, the engine.

Two clusters far apart: a query in the real one has real-likeness 1, in the sim one 0. One
cluster sampled twice: about 0.5. An index is bound to the weights and latent width it was
built for; the engine with the index attached reports each inference's value and traces it;
``r2s2r analyze index`` builds one from two datasets and refuses bad input in one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.analysis.embeddings import (
    REAL,
    SIM,
    AnalysisInputError,
    FrameSet,
    input_signature,
    observation_keys,
)
from r2s2r_policy.analysis.index import (
    LATENT_INDEX_FILE,
    LatentIndex,
    LatentIndexError,
    LiveLikenessMonitor,
    balanced_rows,
    build_latent_index,
    load_latent_index,
)
from r2s2r_policy.checkpoint import save_checkpoint
from r2s2r_policy.cli import analyze_index_command
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec, untrained_policy
from r2s2r_policy.inference.engine import InferenceEngine, StepStatus
from r2s2r_policy.models import Policy
from r2s2r_policy.models.base import policy_fingerprint
from r2s2r_testing.episodes import write_hdf5, write_robot_dataset

from r2s2r_dataset import BELT_SPEED_KEY, JOINT_POS_KEY

RNG = np.random.default_rng(11)
WIDTH = 8
REAL_CLUSTER = RNG.normal(0.0, 1.0, size=(300, WIDTH))
SIM_FAR = RNG.normal(0.0, 1.0, size=(300, WIDTH)) + np.r_[12.0, np.zeros(WIDTH - 1)]
SIM_MIXED = RNG.normal(0.0, 1.0, size=(300, WIDTH))
HOME = np.array([HOME_POSITIONS[name] for name in ALL_JOINT_NAMES])


@pytest.fixture(scope="module")
def policy() -> Policy:
    torch.set_num_threads(1)
    return untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=4)


def frames_of(policy: Policy, domain: str, count: int, joint_offset_rad: float) -> FrameSet:
    """Random images, joints at home plus an offset: the offset decides the latent's cluster."""
    rng = np.random.default_rng(count)
    spec = policy.spec
    observations = {
        key: rng.integers(0, 255, (count, *spec.image_shape(key)), dtype=np.uint8)
        for key in spec.image_keys
    }
    joints = HOME + joint_offset_rad + rng.normal(0.0, 0.005, (count, len(HOME)))
    observations[JOINT_POS_KEY] = joints.astype(np.float32)
    observations[BELT_SPEED_KEY] = np.full((count, 1), 0.1, dtype=np.float32)
    assert sorted(observations) == sorted(observation_keys(spec))
    return FrameSet(
        f"{domain}_frames",
        domain,
        input_signature(spec),
        observations,
        np.zeros(count, np.int32),
        np.arange(count, dtype=np.int32),
        np.linspace(0.0, 0.99, count, dtype=np.float32),
    )


def test_separated_clusters_are_real_and_sim() -> None:
    index = LatentIndex(REAL_CLUSTER, SIM_FAR, k=10)
    for query in REAL_CLUSTER[:20] + 0.01:
        result = index.query(query)
        assert result.real_likeness == 1.0
        assert result.nearest_real_distance == pytest.approx(
            np.min(np.linalg.norm(REAL_CLUSTER - query, axis=1)), rel=1e-4
        )
    assert all(index.real_likeness(q) == 0.0 for q in SIM_FAR[:20] + 0.01)
    real_shares, sim_shares = index.leave_one_out()
    np.testing.assert_array_equal(real_shares, 1.0)
    np.testing.assert_array_equal(sim_shares, 0.0)


def test_one_mixed_cluster_is_about_one_half() -> None:
    index = LatentIndex(REAL_CLUSTER, SIM_MIXED, k=10)
    shares = [index.real_likeness(q) for q in RNG.normal(size=(300, WIDTH))]
    assert np.mean(shares) == pytest.approx(0.5, abs=0.05)
    real_shares, sim_shares = index.leave_one_out()
    assert real_shares.mean() == pytest.approx(0.5, abs=0.06)
    assert sim_shares.mean() == pytest.approx(0.5, abs=0.06)


def test_bad_sets_and_queries_are_refused_naming_them() -> None:
    with pytest.raises(AnalysisInputError, match="need both domains, got 300 real and 0 sim"):
        LatentIndex(REAL_CLUSTER, SIM_FAR[:0])
    with pytest.raises(AnalysisInputError, match="as many real as sim latents, got 300 and 200"):
        LatentIndex(REAL_CLUSTER, SIM_FAR[:200])
    with pytest.raises(AnalysisInputError, match=r"k = 601, expected 1\.\.600"):
        LatentIndex(REAL_CLUSTER, SIM_FAR, k=601)
    index = LatentIndex(REAL_CLUSTER, SIM_FAR)
    with pytest.raises(ValueError, match=r"query \(3,\), expected \(8,\)"):
        index.query(np.zeros(3))
    assert np.isnan(index.real_likeness(np.full(WIDTH, np.nan)))


def test_balanced_rows_are_deterministic_and_capped() -> None:
    np.testing.assert_array_equal(balanced_rows(5, 10), np.arange(5))
    rows = balanced_rows(5000, 2048, seed=0)
    assert rows.size == 2048 and np.unique(rows).size == 2048 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(rows, balanced_rows(5000, 2048, seed=0))


def test_build_save_load_round_trip_and_refusal_of_other_weights(
    policy: Policy, tmp_path: Path
) -> None:
    real = frames_of(policy, REAL, 40, 0.0)
    sim = frames_of(policy, SIM, 60, 0.4)  # 0.4 rad = 8 joint standard deviations away
    index = build_latent_index(policy, real, sim, k=5, per_domain=30)
    assert index.per_domain == 30 and index.latent_dim == policy.latent_dim
    assert index.fingerprint == policy_fingerprint(policy)
    real_shares, sim_shares = index.leave_one_out()
    assert real_shares.mean() == 1.0 and sim_shares.mean() == 0.0
    checkpoint = save_checkpoint(tmp_path / "ckpt", policy)
    assert load_latent_index(checkpoint, policy) is None  # no index: no monitor
    path = index.save(checkpoint)
    assert path == checkpoint / LATENT_INDEX_FILE
    assert sorted(p.name for p in checkpoint.iterdir() if p.name.startswith(".")) == []
    loaded = load_latent_index(checkpoint, policy)
    assert (
        loaded is not None
        and loaded.k == 5
        and loaded.sources
        == {
            REAL: "real_frames",
            SIM: "sim_frames",
        }
    )
    np.testing.assert_array_equal(loaded.real, index.real)
    query = index.real[3] + 0.01
    assert loaded.query(query) == index.query(query)
    other = untrained_policy(policy.spec, seed=5)
    with pytest.raises(LatentIndexError, match=r"latent_index.npz: built for another policy \("):
        load_latent_index(checkpoint, other)
    wide = untrained_policy(
        robot_policy_spec(32, 4, 10.0, {**TINY_MODEL_PARAMS, "num_keypoints": 4}), seed=4
    )
    with pytest.raises(LatentIndexError, match=f"latent width {policy.latent_dim}, the policy's"):
        load_latent_index(checkpoint, wide)


def test_build_refuses_one_domain_and_swapped_domains(policy: Policy) -> None:
    real = frames_of(policy, REAL, 10, 0.0)
    empty = frames_of(policy, SIM, 10, 0.4)
    empty.episode = empty.episode[:0]
    with pytest.raises(AnalysisInputError, match="need both domains, got 10 real and 0 sim"):
        build_latent_index(policy, real, empty)
    with pytest.raises(AnalysisInputError, match="are real, expected sim here"):
        build_latent_index(policy, real, real)


def test_engine_with_the_monitor_reports_and_traces_real_likeness(policy: Policy) -> None:
    now = [100.0]
    engine = InferenceEngine(policy, clock=lambda: now[0])
    trace = engine.new_trace()
    rng = np.random.default_rng(0)
    images = {
        key: rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for key in policy.spec.image_keys
    }

    def feed(offset_rad: float) -> None:
        for key, image in images.items():
            engine.observe_image(key, image)
        engine.observe_joints(list(ALL_JOINT_NAMES), (HOME + offset_rad).tolist())
        engine.observe_belt_speed(0.1)

    feed(0.0)
    near_real = policy.predict_chunk_and_latent(engine.buffer.snapshot(now[0])[0])[1]
    feed(0.4)
    near_sim = policy.predict_chunk_and_latent(engine.buffer.snapshot(now[0])[0])[1]
    spread = np.random.default_rng(1).normal(0.0, 0.01, (50, near_real.size))
    published: list[int] = []
    monitor = LiveLikenessMonitor(
        LatentIndex(near_real + spread, near_sim + spread),
        window=2,
        notify=lambda: published.append(1),
    )
    assert engine.step().status == StepStatus.COMMANDED  # no monitor: NaN
    engine.monitor = monitor
    results = []
    for offset in (0.0, 0.4, 0.4):
        now[0] += 0.1
        feed(offset)
        results.append(engine.step())
    assert [r.status for r in results] == [StepStatus.COMMANDED] * 3
    assert [r.real_likeness for r in results] == [1.0, 0.0, 0.0]
    np.testing.assert_array_equal(trace.arrays()["real_likeness"], [np.nan, 1.0, 0.0, 0.0])
    assert published == [1, 1, 1]
    readings = monitor.take()
    assert [r.real_likeness for r in readings] == [1.0, 0.0, 0.0]
    assert [r.running_mean for r in readings] == [1.0, 0.5, 0.0]  # window of 2
    assert [r.judged for r in readings] == [1, 2, 3] and monitor.take() == []
    assert readings[0].nearest_real_distance < 0.5 < readings[1].nearest_real_distance


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("index_data")
    return {
        "real": write_robot_dataset(folder / "real.hdf5", "real", seed=1),
        "sim": write_robot_dataset(folder / "sim.hdf5", "sim", seed=2, episodes=3),
    }


def index_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(analyze_index_command, [*args, "--no-progress"])
    return result.exit_code, result.output


def test_cli_writes_the_index_and_prints_one_summary(
    policy: Policy, datasets: dict[str, Path], tmp_path: Path
) -> None:
    checkpoint = save_checkpoint(tmp_path / "ckpt", policy)
    code, output = index_cli(
        str(checkpoint), "--real", str(datasets["real"]), "--sim", str(datasets["sim"]),
        "--stride", "2", "--k", "3",
    )  # fmt: skip
    assert code == 0, output
    lines = output.strip().splitlines()
    assert len(lines) == 1
    # 2 real episodes x 10 frames, every 2nd: 10; sim 15; balanced to 10 each.
    assert lines[0].startswith("latent index: 10 real + 10 sim frames (of 10 / 15 at stride 2)")
    assert "leave-one-out real-likeness: real frames" in lines[0]
    loaded = load_latent_index(checkpoint, policy)
    assert loaded is not None and loaded.per_domain == 10 and loaded.k == 3
    assert loaded.sources == {REAL: str(datasets["real"]), SIM: str(datasets["sim"])}


def test_cli_refuses_bad_input_in_one_line(
    policy: Policy, datasets: dict[str, Path], tmp_path: Path
) -> None:
    checkpoint = save_checkpoint(tmp_path / "ckpt", policy)
    code, output = index_cli(str(checkpoint), "--real", str(datasets["real"]))
    assert code == 1 and len(output.strip().splitlines()) == 1
    assert "the index needs both domains: no --sim given" in output
    not_checkpoint = tmp_path / "not_a_checkpoint"
    not_checkpoint.mkdir()
    code, output = index_cli(
        str(not_checkpoint), "--real", str(datasets["real"]), "--sim", str(datasets["sim"])
    )
    assert code == 1 and "not a policy checkpoint (missing model.safetensors)" in output
    assert len(output.strip().splitlines()) == 1
    # A dataset of another robot (4 joints): it lacks what the policy reads.
    other_robot = write_hdf5(tmp_path / "other.hdf5", "sim", [0, 1])
    code, output = index_cli(
        str(checkpoint), "--real", str(datasets["real"]), "--sim", str(other_robot)
    )
    assert code == 1 and len(output.strip().splitlines()) == 1
    assert "dataset sources do not provide what the policy needs" in output
    assert "joint_names ['arm_1', 'arm_2', 'hand_1', 'hand_2'] != policy" in output
    assert not (checkpoint / LATENT_INDEX_FILE).exists()
