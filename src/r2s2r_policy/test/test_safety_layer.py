"""The safety layer (palm box, watchdog, stop and re-arm) in the engine, fault injected, no ROS."""

from __future__ import annotations

import numpy as np
import pytest
from engine_fixtures import HOME, FakeClock, feed, tiny_policy
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES
from r2s2r_policy.inference.commands import ActionCommand
from r2s2r_policy.inference.engine import InferenceConfig, InferenceEngine, StepStatus
from r2s2r_policy.inference.safety_layer import (
    PalmWorkspace,
    SafetyLayerConfig,
    StopCause,
)

ARM = [ALL_JOINT_NAMES.index(name) for name in ARM_JOINT_NAMES]


@pytest.fixture(scope="module")
def policy():  # type: ignore[no-untyped-def]
    return tiny_policy()


def constant(policy, chunk: np.ndarray):  # type: ignore[no-untyped-def]
    """A policy double that always answers ``chunk`` (a diverged checkpoint)."""

    class Constant:
        spec = policy.spec

        def predict_chunk_and_latent(self, observation):  # type: ignore[no-untyped-def]
            policy.check_observation(observation)
            return chunk.astype(np.float32), np.zeros(1, dtype=np.float32)

    return Constant()


def run_following(
    engine: InferenceEngine, clock: FakeClock, sent: list[ActionCommand], steps: int
) -> tuple[list[StepStatus], np.ndarray]:
    """Step the engine ``steps`` times, the arm reaching each command's first point."""
    positions = HOME.copy()
    statuses = []
    for _ in range(steps):
        feed(engine, positions)
        before = len(sent)
        statuses.append(engine.step().status)
        if len(sent) > before:
            positions = positions.copy()
            positions[: sent[-1].positions_rad.shape[1]] = sent[-1].positions_rad[0]
        clock.now_s += 0.1
    return statuses, positions


def palm_path(engine: InferenceEngine, sent: list[ActionCommand]) -> np.ndarray:
    """World positions of the palm at every point of every command sent."""
    return np.vstack([engine.workspace.palm_positions(c.positions_rad) for c in sent])


def inside(points: np.ndarray, config: SafetyLayerConfig) -> bool:
    return bool(
        np.all(points >= np.asarray(config.workspace_min_m))
        and np.all(points <= np.asarray(config.workspace_max_m))
    )


def test_home_is_inside_the_default_workspace() -> None:
    config = SafetyLayerConfig()
    workspace = PalmWorkspace(config, list(ALL_JOINT_NAMES))
    assert workspace.checks
    assert workspace.first_violation(HOME[None, :]) is None
    assert inside(workspace.palm_positions(HOME[None, :]), config)


def test_a_saturating_policy_is_stopped_and_the_palm_stays_in_its_box(policy) -> None:  # type: ignore[no-untyped-def]
    """The diverged checkpoint of the fault table: every joint driven far past its limit."""
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(policy, InferenceConfig(), publish=sent.append, clock=clock)
    wild = np.tile(HOME, (4, 1))
    wild[:, ARM] = [7.0, 7.0, 4.0, 7.0, 7.0, 7.0]  # beyond shoulder 2π, elbow π, wrists 2π
    engine.policy = constant(policy, wild)
    statuses, _ = run_following(engine, clock, sent, 30)
    stop = engine.safety_stop
    assert stop is not None and stop.cause in (StopCause.SATURATION, StopCause.WORKSPACE)
    first_stop = statuses.index(StepStatus.SAFETY_STOP)
    assert first_stop < engine.config.safety.clamped_chunks_to_stop  # within 0.5 s at 10 Hz
    commands = [c for c in sent if not c.hold]
    holds = [c for c in sent if c.hold]
    assert len(commands) == first_stop and len(holds) == 1  # one hold, then nothing
    assert sent[-1].hold
    assert inside(palm_path(engine, commands), engine.config.safety)
    assert engine.stats().safety_stop_cause == stop.cause.value
    # Nothing moves it again on its own; an explicit re-arm does (and it stops again).
    statuses, _ = run_following(engine, clock, sent, 5)
    assert set(statuses) == {StepStatus.SAFETY_STOP} and len(sent) == first_stop + 1
    assert engine.rearm() == stop
    assert engine.safety_stop is None
    statuses, _ = run_following(engine, clock, sent, 30)
    assert statuses[0] == StepStatus.COMMANDED and engine.safety_stop is not None


def floor_under_home() -> tuple[SafetyLayerConfig, np.ndarray]:
    """A box whose floor is 1 cm under the palm at home, and arm positions 5 cm lower."""
    workspace = PalmWorkspace(SafetyLayerConfig(), list(ALL_JOINT_NAMES))
    home_z = float(workspace.palm_positions(HOME[None, :])[0, 2])
    box = SafetyLayerConfig(
        workspace_min_m=[-2.0, -2.0, home_z - 0.01], workspace_max_m=[2.0, 2.0, 3.0]
    )
    for elbow in np.linspace(-0.5, 0.5, 9):
        lowered = HOME.copy()
        lowered[ALL_JOINT_NAMES.index("elbow_joint")] += elbow
        if workspace.palm_positions(lowered[None, :])[0, 2] < home_z - 0.05:
            return box, lowered
    raise AssertionError("no elbow change lowers the palm by 5 cm")


def test_a_chunk_leaving_the_box_is_not_sent(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    box, lowered = floor_under_home()  # any descent from home leaves the box
    engine = InferenceEngine(policy, InferenceConfig(safety=box), publish=sent.append, clock=clock)
    down = np.tile(lowered, (4, 1))
    engine.policy = constant(policy, down)
    feed(engine, HOME)
    result = engine.step()
    assert result.status == StepStatus.SAFETY_STOP
    assert engine.safety_stop is not None and engine.safety_stop.cause == StopCause.WORKSPACE
    assert "outside the workspace" in result.detail and "next target" in result.detail
    assert [c.hold for c in sent] == [True]
    assert engine.stats().interventions["workspace_limit"] == 1


def test_a_chunk_ends_before_its_first_point_outside_the_box(policy) -> None:  # type: ignore[no-untyped-def]
    """Far chunk points leaving the box are cut; the policy goes on (a next target out stops)."""
    sent: list[ActionCommand] = []
    clock = FakeClock()
    box, lowered = floor_under_home()
    engine = InferenceEngine(policy, InferenceConfig(safety=box), publish=sent.append, clock=clock)
    chunk = np.vstack([HOME, HOME, lowered, lowered])
    engine.policy = constant(policy, chunk)
    feed(engine, HOME)
    result = engine.step()
    assert result.status == StepStatus.COMMANDED and engine.safety_stop is None
    assert result.command is not None and result.command.positions_rad.shape[0] == 2
    assert inside(engine.workspace.palm_positions(result.command.positions_rad), box)
    assert engine.stats().interventions["workspace_limit"] == 1


def test_a_policy_that_never_acts_is_stopped(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(policy, publish=sent.append, clock=clock)
    engine.policy = constant(policy, np.full((4, len(ALL_JOINT_NAMES)), np.nan))
    statuses, _ = run_following(engine, clock, sent, 12)
    limit = engine.config.safety.dropped_chunks_to_stop
    assert statuses[: limit - 1] == [StepStatus.DROPPED] * (limit - 1)
    assert statuses[limit - 1] == StepStatus.SAFETY_STOP
    assert engine.safety_stop is not None and engine.safety_stop.cause == StopCause.NO_ACTION
    assert [c.hold for c in sent] == [True]


def test_a_frozen_process_holds_instead_of_moving_on_resume(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(policy, publish=sent.append, clock=clock)
    run_following(engine, clock, sent, 3)
    commanded = len(sent)
    clock.now_s += 5.0  # SIGSTOP ... SIGCONT
    feed(engine, HOME)
    result = engine.step()
    assert result.status == StepStatus.SAFETY_STOP and "frozen" in result.detail
    assert len(sent) == commanded + 1 and sent[-1].hold


def test_a_chunk_computed_across_a_freeze_is_not_sent_on_resume(policy) -> None:  # type: ignore[no-untyped-def]
    """SIGSTOP in the middle of an inference: the chunk it finishes after SIGCONT is stale."""
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(policy, publish=sent.append, clock=clock)
    run_following(engine, clock, sent, 3)
    commanded = len(sent)

    class FrozenMidInference:
        spec = policy.spec

        def predict_chunk_and_latent(self, observation):  # type: ignore[no-untyped-def]
            clock.now_s += 5.0  # SIGSTOP ... SIGCONT while the model runs
            return policy.predict_chunk_and_latent(observation)

    engine.policy = FrozenMidInference()
    feed(engine, HOME)
    result = engine.step()
    assert result.status == StepStatus.SAFETY_STOP and "frozen" in result.detail
    assert len(sent) == commanded + 1 and sent[-1].hold
    assert engine.stats().commands_sent == commanded


def test_a_stop_from_outside_holds_at_once_and_needs_a_rearm(policy) -> None:  # type: ignore[no-untyped-def]
    sent: list[ActionCommand] = []
    clock = FakeClock()
    engine = InferenceEngine(policy, publish=sent.append, clock=clock)
    run_following(engine, clock, sent, 2)
    commanded = len(sent)
    stop = engine.trip_safety_stop(StopCause.SECOND_COMMANDER, "2 publishers on the arm topic")
    assert len(sent) == commanded + 1 and sent[-1].hold
    engine.reset()  # a new episode does not re-arm
    statuses, _ = run_following(engine, clock, sent, 3)
    assert set(statuses) == {StepStatus.SAFETY_STOP} and len(sent) == commanded + 1
    assert engine.rearm() == stop
    statuses, _ = run_following(engine, clock, sent, 1)
    assert statuses == [StepStatus.COMMANDED]


def test_the_belt_is_kept_out_and_the_table_top_allowed() -> None:
    workspace = PalmWorkspace(SafetyLayerConfig(), list(ALL_JOINT_NAMES))
    assert workspace.allows(np.array([-0.15, 0.36, 0.79]))  # low over the table, beside a bin
    assert not workspace.allows(np.array([-0.15, 0.36, 0.76]))  # the palm would touch the table
    assert workspace.allows(np.array([0.55, 0.0, 0.86]))  # above the belt's top
    assert not workspace.allows(np.array([0.55, 0.0, 0.83]))  # into the belt
    assert not workspace.allows(np.array([0.75, 0.0, 1.0]))  # beyond the belt's far edge


def test_an_empty_box_is_refused() -> None:
    with pytest.raises(ValueError, match=r"workspace_min_m .* must be below"):
        SafetyLayerConfig(workspace_min_m=[0.0, 0.0, 1.0], workspace_max_m=[1.0, 1.0, 0.5])
    with pytest.raises(ValueError, match=r"belt_keep_out_min_m .* must be below"):
        SafetyLayerConfig(
            belt_keep_out_min_m=[0.7, -0.8, 0.0], belt_keep_out_max_m=[0.4, 0.8, 0.84]
        )
