"""InferenceEngine and its safety filter, without ROS: each safety behaviour, fault injected."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from engine_fixtures import HOME, FakeClock, feed, tiny_policy
from r2s2r_description.robot import ALL_JOINT_NAMES, JOINT_LIMITS
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec, untrained_policy
from r2s2r_policy.inference.commands import ActionCommand, split_by_controller
from r2s2r_policy.inference.engine import InferenceConfig, InferenceEngine, StepStatus
from r2s2r_policy.inference.observations import stale_inputs
from r2s2r_policy.inference.safety import (
    JointSafetyLimits,
    chunk_is_finite,
    clamp_positions,
    limit_velocities,
)


@pytest.fixture(scope="module")
def policy():  # type: ignore[no-untyped-def]
    return tiny_policy()


def test_clamp_positions_to_description_limits() -> None:
    limits = JointSafetyLimits.for_joints(["elbow_joint", "thumb_ip_joint"])
    chunk = np.array([[4.0, -0.3], [0.5, 0.8], [-9.0, 2.0]])
    clamped, changed = clamp_positions(chunk, limits)
    np.testing.assert_allclose(clamped, [[np.pi, 0.0], [0.5, 0.8], [-np.pi, 1.6]])
    assert changed == 4


def test_limit_velocities_from_measured_start() -> None:
    limits = JointSafetyLimits.for_joints(["thumb_rot_joint", "elbow_joint"])  # 4, pi rad/s
    dt_s = 0.1
    chunk = np.array([[1.0, 0.1], [1.0, 0.2], [-1.0, 0.3]])
    limited, changed = limit_velocities(chunk, np.zeros(2), dt_s, limits)
    # thumb: 0 -> 0.4 -> 0.8 -> 0.4 (each step at most 4 rad/s * 0.1 s); elbow within limits.
    np.testing.assert_allclose(limited[:, 0], [0.4, 0.8, 0.4])
    np.testing.assert_allclose(limited[:, 1], [0.1, 0.2, 0.3])
    assert changed == 3
    steps = np.diff(np.vstack([np.zeros(2), limited]), axis=0) / dt_s
    assert np.all(np.abs(steps) <= limits.velocity_radps + 1e-9)


def test_finite_check_and_staleness_helpers() -> None:
    assert chunk_is_finite(np.zeros((3, 2)))
    assert not chunk_is_finite(np.array([[0.0, np.nan]]))
    assert not chunk_is_finite(np.array([[np.inf, 0.0]]))
    assert stale_inputs({"a": 0.05, "b": 0.3, "c": 0.21}, 0.2) == ["b", "c"]


def test_split_by_controller_orders_joints_per_controller() -> None:
    names = list(reversed(ALL_JOINT_NAMES))
    positions = np.arange(2 * 18, dtype=float).reshape(2, 18)
    blocks = split_by_controller(names, positions)
    arm_names, arm = blocks["arm"]
    assert arm_names == list(ALL_JOINT_NAMES[:6])
    np.testing.assert_array_equal(arm[:, 0], positions[:, names.index("shoulder_pan_joint")])
    assert blocks["hand"][1].shape == (2, 12)
    with pytest.raises(ValueError, match="no controller"):
        split_by_controller(["belt_roller_joint"], np.zeros((1, 1)))


def test_engine_commands_a_chunk_within_limits(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(policy, publish=sent.append, clock=clock)
    assert engine.step().status == StepStatus.WAITING  # nothing observed yet
    feed(engine)
    result = engine.step()
    assert result.status == StepStatus.COMMANDED and sent == [result.command]
    command = sent[0]
    assert command.positions_rad.shape == (4, 18)
    np.testing.assert_allclose(command.times_s, [0.1, 0.2, 0.3, 0.4])
    raw = policy.predict_chunk(engine.buffer.snapshot(clock.now_s)[0])
    # The untrained policy moves little: the filtered chunk equals its raw output.
    np.testing.assert_allclose(command.positions_rad, raw, atol=1e-6)
    assert engine.stats().commands_sent == 1 and engine.stats().latency_p50_s > 0


def test_engine_clamps_out_of_limit_actions(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    engine = InferenceEngine(policy, publish=sent.append, clock=FakeClock())
    feed(engine)
    index = ALL_JOINT_NAMES.index("thumb_ip_joint")
    wild = np.tile(HOME, (4, 1))
    wild[:, index] = 5.0  # far above the 1.6 rad limit and far too fast
    with torch.no_grad():
        policy_fault = _constant_output(policy, wild)
        engine.policy = policy_fault
        engine.step()
    command = sent[-1]
    upper = JOINT_LIMITS["thumb_ip_joint"].upper_rad
    velocity = JOINT_LIMITS["thumb_ip_joint"].velocity_radps
    column = command.positions_rad[:, index]
    assert np.all(column <= upper + 1e-9)
    # From home (0.1 rad) at most 4 rad/s * 0.1 s per point: 0.5, 0.9, 1.3, then the limit.
    np.testing.assert_allclose(column, [0.5, 0.9, 1.3, 1.6], atol=1e-6)
    assert np.all(np.abs(np.diff(column)) <= velocity * 0.1 + 1e-9)
    counts = engine.stats().interventions
    assert counts["position_clamp"] == 1 and counts["velocity_clamp"] == 1


def _constant_output(policy, chunk: np.ndarray):  # type: ignore[no-untyped-def]
    """A policy double whose predict_chunk returns ``chunk`` (fault injection at the model)."""

    class Faulty:
        spec = policy.spec

        def predict_chunk(self, observation):  # type: ignore[no-untyped-def]
            policy.check_observation(observation)
            return chunk.astype(np.float32)

        def predict_chunk_and_latent(self, observation):  # type: ignore[no-untyped-def]
            return self.predict_chunk(observation), np.zeros(1, dtype=np.float32)

    return Faulty()


def test_nan_action_is_dropped_and_counted(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    engine = InferenceEngine(policy, publish=sent.append, clock=FakeClock())
    feed(engine)
    for bad in (np.nan, np.inf):
        chunk = np.tile(HOME, (4, 1))
        chunk[2, 3] = bad
        engine.policy = _constant_output(policy, chunk)
        assert engine.step().status == StepStatus.DROPPED
    assert sent == []
    assert engine.stats().interventions["non_finite_action"] == 2
    engine.policy = policy
    assert engine.step().status == StepStatus.COMMANDED


def test_stale_observation_holds_once_then_resumes(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(
        policy, InferenceConfig(stale_observation_s=0.2), publish=sent.append, clock=clock
    )
    measured = HOME + 0.01
    feed(engine, measured)
    assert engine.step().status == StepStatus.COMMANDED
    clock.now_s += 0.15
    engine.observe_joints(list(ALL_JOINT_NAMES), measured.tolist())  # joints fresh, cameras not
    assert engine.step().status == StepStatus.COMMANDED  # 150 ms old: still fresh
    clock.now_s += 0.1  # images 250 ms old
    result = engine.step()
    assert result.status == StepStatus.HOLD and "head_camera_rgb" in result.detail
    hold = sent[-1]
    assert hold.hold and hold.positions_rad.shape == (1, 18)
    np.testing.assert_allclose(hold.positions_rad[0], measured)
    for _ in range(3):
        assert engine.step().status == StepStatus.HOLDING
    assert len(sent) == 3  # two chunks and one hold: nothing while stale
    feed(engine, measured)
    assert engine.step().status == StepStatus.COMMANDED
    stats = engine.stats()
    assert stats.interventions["stale_observation"] == 1 and stats.holds_sent == 1


def test_worker_thread_runs_at_rate_and_stop_is_immediate() -> None:
    policy = untrained_policy(robot_policy_spec(32, 4, 50.0, TINY_MODEL_PARAMS), seed=1)
    sent: list[ActionCommand] = []
    lock = threading.Lock()

    def publish(command: ActionCommand) -> None:
        with lock:
            sent.append(command)

    engine = InferenceEngine(
        policy,
        InferenceConfig(command_rate_hz=50.0, stale_observation_s=5.0, trigger="timer"),
        publish=publish,
    )
    feed(engine)
    engine.start()
    caller = threading.current_thread()
    time.sleep(0.5)
    engine.stop(send_hold=True)
    with lock:
        count = len(sent)
        assert sent[-1].hold and not any(c.hold for c in sent[:-1])
    assert 10 <= count - 1 <= 27  # ~25 chunks at 50 Hz in 0.5 s on a busy machine
    time.sleep(0.1)
    assert len(sent) == count  # nothing after stop returned
    assert not engine.running and threading.current_thread() is caller


def _counting_policy(policy, rows: int = 4):  # type: ignore[no-untyped-def]
    """A policy double whose chunk step k is ``HOME + 0.01 * (call + k)`` on the first joint."""

    class Counting:
        spec = policy.spec
        calls = 0

        def predict_chunk(self, observation):  # type: ignore[no-untyped-def]
            chunk = np.tile(HOME, (rows, 1)).astype(np.float32)
            chunk[:, 0] += 0.01 * (Counting.calls + np.arange(rows))
            Counting.calls += 1
            return chunk

        def predict_chunk_and_latent(self, observation):  # type: ignore[no-untyped-def]
            return self.predict_chunk(observation), np.zeros(1, dtype=np.float32)

    return Counting()


def test_receding_horizon_runs_the_configured_steps_of_each_chunk(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(
        _counting_policy(policy),
        InferenceConfig(execution="receding", executed_steps=3, stale_observation_s=5.0),
        publish=sent.append,
        clock=clock,
    )
    statuses = []
    for _ in range(7):
        feed(engine)
        statuses.append(engine.step().status)
        clock.now_s += 0.1
    assert statuses == [
        StepStatus.COMMANDED,
        StepStatus.EXECUTING,
        StepStatus.EXECUTING,
        StepStatus.COMMANDED,
        StepStatus.EXECUTING,
        StepStatus.EXECUTING,
        StepStatus.COMMANDED,
    ]
    assert len(sent) == 3
    # Every chunk is sent whole: step k due (k + 1) dt after the observation.
    np.testing.assert_allclose(sent[0].times_s, [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="executed_steps"):
        InferenceEngine(policy, InferenceConfig(executed_steps=5), clock=clock)  # chunk of 4


def test_temporal_ensemble_averages_every_chunks_prediction_of_a_step(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(
        _counting_policy(policy),
        InferenceConfig(execution="temporal_ensemble", ensemble_weight_decay=0.0),
        publish=sent.append,
        clock=clock,
    )
    for _ in range(3):
        feed(engine)
        assert engine.step().status == StepStatus.COMMANDED
        clock.now_s += 0.1
    # Third chunk (call 2) at t = 0.2: the target of t + 0.1 was predicted by call 0 as its step
    # 2 (0.02), by call 1 as its step 1 (0.02) and by call 2 as its step 0 (0.02): all agree.
    # Its step 1 (t + 0.2): call 0 step 3 (0.03), call 1 step 2 (0.03), call 2 step 1 (0.03).
    first = sent[-1].positions_rad[:, 0] - HOME[0]
    np.testing.assert_allclose(first, [0.02, 0.03, 0.04, 0.05], atol=1e-6)
    # Unequal predictions are averaged (ACT weights; decay 0: the plain mean).
    engine.policy = _constant_output(policy, np.tile(HOME, (4, 1)))
    feed(engine)
    engine.step()
    # t + 0.1 = 0.4 s: calls 0, 1, 2 predicted 0.03 (steps 3, 2, 1), the constant one 0.0.
    np.testing.assert_allclose(sent[-1].positions_rad[0, 0] - HOME[0], 0.0225, atol=1e-6)
