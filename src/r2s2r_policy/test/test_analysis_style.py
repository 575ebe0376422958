"""Style of the diagnostic policy's groups, with known answers.

Synthetic picks: the same arm motion with a thumb-index closure is a pinch, with the whole hand
a power grasp; the planner-style reference (trapezoids, pinch) against a demonstrator-like pick
(minimum jerk, whole hand) differs on every metric in the expected direction; a group equal to
the planner's is judged closer to the planner, one equal to the demonstrator's closer to the
demonstrator; bad input is refused in one line or counted and skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import h5py
import numpy as np
import pytest
from r2s2r_description.robot import ALL_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_policy.analysis.embeddings import AnalysisInputError
from r2s2r_policy.analysis.style import (
    NO_GRASP,
    OPEN_HAND,
    PINCH,
    POWER,
    STYLE_METRICS,
    EpisodeStyle,
    StyleGroup,
    closeness,
    compare_styles,
    dataset_group,
    episode_style,
    grasp_type,
    rollout_group,
    style_ik,
)
from r2s2r_sim.demonstrator.motion import minimum_jerk
from r2s2r_sim.demonstrator.style import (
    PINCH_CLOSED,
    planner_style_reference,
    trapezoid_profile,
)
from r2s2r_testing.episodes import synthetic_episode

from r2s2r_dataset import JOINT_POS_KEY, Episode, EpisodeWriter, obs_path

ARM_START = np.array([0.0, -1.9, 1.9, -1.5708, -1.5708, 0.0])
"""A configuration the arm moves from (as the demonstrator's style test uses)."""
MOVE_S, PAUSE_S = 2.0, 0.6
Profile = Callable[[float], float]


@pytest.fixture(scope="module")
def ik():  # type: ignore[no-untyped-def]
    return style_ik()


def whole_hand() -> np.ndarray:
    """Every flexion joint 1.2 rad beyond the open hand (the thumb's rotation kept)."""
    closed = OPEN_HAND + 1.2
    closed[HAND_JOINT_NAMES.index("thumb_rot_joint")] = OPEN_HAND[0]
    return closed


def pinch_hand() -> np.ndarray:
    """The planner reference's thumb-index pinch; middle and ring stay open."""
    closed = OPEN_HAND.copy()
    for name, value in PINCH_CLOSED.items():
        closed[HAND_JOINT_NAMES.index(name)] = value
    return closed


def pick(
    profile: Profile, closed_hand: np.ndarray, rate_hz: float = 100.0
) -> tuple[np.ndarray, np.ndarray]:
    """Reach, close the hand, carry, open it, return: each move timed by ``profile``."""
    arm = [
        ARM_START,
        ARM_START + np.array([0.8, 0.3, -0.3, 0.1, 0.0, 0.2]),
        ARM_START + np.array([-0.6, 0.1, 0.0, 0.0, 0.0, 0.0]),
    ]
    arm.append(ARM_START)
    hands = [OPEN_HAND, closed_hand, closed_hand, OPEN_HAND]
    times, rows, t0 = [], [], 0.0
    for (a0, a1), (h0, h1) in zip(pairwise(arm), pairwise(hands), strict=True):
        local = np.arange(0.0, MOVE_S, 1.0 / rate_hz)
        s = np.array([profile(t / MOVE_S) for t in local])[:, None]
        times.append(t0 + local)
        rows.append(np.hstack([a0 + s * (a1 - a0), np.tile(h0, (local.size, 1))]))
        t0 += MOVE_S
        pause = np.arange(0.0, PAUSE_S, 1.0 / rate_hz)  # the hand moves while the arm waits
        s = np.clip(pause / (0.5 * PAUSE_S), 0.0, 1.0)[:, None]
        times.append(t0 + pause)
        rows.append(np.hstack([np.tile(a1, (pause.size, 1)), h0 + s * (h1 - h0)]))
        t0 += PAUSE_S
    return np.concatenate(times), np.vstack(rows)


def trapezoid(tau: float) -> float:
    return float(trapezoid_profile(1.0, np.array([tau]))[0])


def test_grasp_type_counts_fingers() -> None:
    assert grasp_type([True, True, False, False]) == PINCH
    assert grasp_type([True, False, False, False]) == PINCH  # thumb + <= 1 finger
    assert grasp_type([True, True, True, False]) == POWER
    assert grasp_type([False, True, True, True]) == POWER  # >= 3 fingers
    assert grasp_type([False, True, True, False]) == NO_GRASP
    assert grasp_type([False] * 4) == NO_GRASP
    with pytest.raises(ValueError, match="4 flags"):
        grasp_type([True, True])


def test_thumb_and_index_closing_is_a_pinch_and_the_whole_hand_a_power_grasp(ik) -> None:  # type: ignore[no-untyped-def]
    pinch = episode_style(*pick(minimum_jerk, pinch_hand()), ik, rate_hz=10.0)
    power = episode_style(*pick(minimum_jerk, whole_hand()), ik, rate_hz=10.0)
    assert (pinch.grasp_type, pinch.fingers_engaged) == (PINCH, 2)
    assert (power.grasp_type, power.fingers_engaged) == (POWER, 4)
    assert power.hand_closure_fraction == 1.0
    assert pinch.hand_closure_fraction == pytest.approx(5 / 11)  # PINCH_CLOSED's 5 joints
    # The grasp instant lies in the closed phase (after the reach, before the return).
    assert MOVE_S < pinch.grasp_time_s < 3 * MOVE_S + 2 * PAUSE_S
    # Same arm motion, same speed profile.
    assert pinch.speed_peak_to_mean == pytest.approx(power.speed_peak_to_mean)


def test_a_grasp_event_picks_the_grasp_instant_after_it(ik) -> None:  # type: ignore[no-untyped-def]
    times, positions = pick(minimum_jerk, whole_hand())
    style = episode_style(times + 5.0, positions, ik, 10.0, grasp_event_s=5.0 + MOVE_S + 0.1)
    # The hand is fully closed half a pause after the reach; the window starts at the event.
    assert MOVE_S + 0.1 <= style.grasp_time_s <= MOVE_S + 0.1 + 1.0
    assert style.grasp_type == POWER


def test_planner_reference_and_demonstrator_like_pick_differ_as_expected(ik) -> None:  # type: ignore[no-untyped-def]
    belt = np.array([-0.55, 0.0, 0.05])  # the nominal belt, robot base frame
    times, positions = planner_style_reference(
        ik,
        belt + np.array([0.0, 0.15, 0.025]),
        np.array([0.0, -0.1, 0.0]),
        0.05,
        0.0,
        np.array([0.4, 0, 0]),
    )
    planner = episode_style(times, positions, ik, rate_hz=10.0)
    human = episode_style(*pick(minimum_jerk, whole_hand()), ik, rate_hz=10.0)
    assert (planner.grasp_type, human.grasp_type) == (PINCH, POWER)
    assert planner.fingers_engaged == 2 < human.fingers_engaged == 4
    assert planner.hand_closure_fraction < 0.5 < human.hand_closure_fraction
    assert human.speed_peak_to_mean > planner.speed_peak_to_mean + 0.1  # bell vs trapezoid
    assert human.plateau_fraction < planner.plateau_fraction - 0.1
    # Timing alone: the same path under a trapezoid sits between them on speed.
    trapezoidal = episode_style(*pick(trapezoid, whole_hand()), ik, rate_hz=10.0)
    assert trapezoidal.speed_peak_to_mean < human.speed_peak_to_mean


def styles(
    rng: np.random.Generator,
    n: int,
    closure: float,
    fingers: int,
    ratio: float,
    plateau: float,
    kind: str,
) -> list[EpisodeStyle]:
    return [
        EpisodeStyle(closure, fingers, r, p, kind, 1.0)
        for r, p in zip(rng.normal(ratio, 0.1, n), rng.normal(plateau, 0.05, n), strict=True)
    ]


def test_a_group_equal_to_the_planner_is_closer_to_the_planner() -> None:
    rng = np.random.default_rng(3)
    demonstrator = StyleGroup("demonstrator", "real", styles(rng, 20, 1.0, 4, 1.8, 0.2, POWER))
    planner = StyleGroup("planner", "sim", styles(rng, 150, 0.2, 2, 1.4, 0.5, PINCH))
    like_planner = StyleGroup("diagnostic", "rollouts", list(planner.styles))
    comparison = compare_styles(demonstrator, planner, like_planner, resamples=300)
    assert {m: c.verdict for m, c in comparison.verdicts.items()} == dict.fromkeys(
        STYLE_METRICS, "planner"
    )
    for verdict in comparison.verdicts.values():
        assert verdict.to_planner == pytest.approx(0.0)
        assert verdict.difference[1] > 0.0  # the interval's low end
    # Constant groups (every episode 4 or 2 fingers): distances in units of their separation.
    assert comparison.verdicts["fingers_engaged"].to_demonstrator == pytest.approx(1.0)
    assert comparison.pinch["diagnostic"]["share"] == 1.0
    assert comparison.pinch["demonstrator"]["share"] == 0.0
    assert comparison.pinch["demonstrator"]["ci95"][1] < 0.2  # Wilson, 0 of 20
    assert "closer to the planner on 4 of 4" in comparison.conclusion()
    assert "pinch share" in comparison.table()
    like_demo = StyleGroup("diagnostic", "rollouts", list(demonstrator.styles))
    judged = compare_styles(demonstrator, planner, like_demo, resamples=300)
    assert {c.verdict for c in judged.verdicts.values()} == {"demonstrator"}
    # Halfway between: the difference's interval holds 0.
    middle = closeness("x", np.r_[1.5, 1.7], rng.normal(1.8, 0.1, 20), rng.normal(1.4, 0.1, 150))
    assert middle.verdict == "undecided" and middle.difference[1] < 0.0 < middle.difference[2]


def write_dataset(path: Path, trajectories: list[np.ndarray], outcomes: list[str]) -> Path:
    """Write episodes with the robot's 18 joints following ``trajectories`` (10 Hz)."""
    with EpisodeWriter(path) as writer:
        for positions, outcome in zip(trajectories, outcomes, strict=True):
            base = synthetic_episode(0, len(positions), outcome=outcome)
            names = list(ALL_JOINT_NAMES)
            meta = base.metadata.model_copy(update={"joint_names": names, "action_names": names})
            writer.append(
                Episode(
                    metadata=meta,
                    timestamps_s=np.arange(len(positions)) * 0.1,
                    images=base.images,
                    joint_pos_rad=positions.astype(np.float32),
                    belt_speed_mps=base.belt_speed_mps,
                    actions=positions.astype(np.float32),
                    extra_obs=base.extra_obs,
                )
            )
    return path


def test_a_dataset_is_measured_and_what_cannot_be_is_counted(ik, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, power = pick(minimum_jerk, whole_hand(), rate_hz=10.0)
    _, pinch = pick(minimum_jerk, pinch_hand(), rate_hz=10.0)
    still = np.tile(np.r_[ARM_START, OPEN_HAND], (40, 1))  # no movement: StyleError
    path = write_dataset(
        tmp_path / "d.hdf5",
        [power, pinch, still, power],
        ["success", "success", "success", "failure"],
    )
    group, rate = dataset_group("demonstrator", path, ik)
    assert rate == 10.0
    assert [s.grasp_type for s in group.styles] == [POWER, PINCH]  # the failure left out
    assert sum(group.skipped.values()) == 1
    assert all("no movement" in reason for reason in group.skipped)
    assert group.grasp_counts() == {PINCH: 1, POWER: 1, NO_GRASP: 0}
    everything, _ = dataset_group("all", path, ik, outcomes=None)
    assert len(everything.styles) == 3


def test_bad_input_is_refused_in_one_line(ik, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, power = pick(minimum_jerk, whole_hand(), rate_hz=10.0)
    path = write_dataset(tmp_path / "no_joints.hdf5", [power], ["success"])
    with h5py.File(path, "a") as handle:
        del handle["data/demo_0"][obs_path(JOINT_POS_KEY)]
    with pytest.raises(AnalysisInputError, match="no obs/joint_pos_rad") as refused:
        dataset_group("demonstrator", path, ik)
    assert "\n" not in str(refused.value)
    tiny = synthetic_episode(0, 12)  # joints arm_1, ..., not the robot's
    with EpisodeWriter(tmp_path / "other_robot.hdf5") as writer:
        writer.append(tiny)
    with pytest.raises(AnalysisInputError, match="lack"):
        dataset_group("demonstrator", tmp_path / "other_robot.hdf5", ik)
    with pytest.raises(AnalysisInputError, match="no rollout"):
        rollout_group("diagnostic", [], ik, 10.0)
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "rollouts" / "trial_000.npz").write_bytes(b"not a trace")
    with pytest.raises(AnalysisInputError) as refused:
        rollout_group("diagnostic", [tmp_path / "rollouts" / "trial_000.npz"], ik, 10.0)
    assert "\n" not in str(refused.value)
    measured = [episode_style(*pick(minimum_jerk, whole_hand()), ik, rate_hz=10.0)]
    empty = StyleGroup("diagnostic", "rollouts", skipped={"5 samples: expected at least 10": 3})
    with pytest.raises(AnalysisInputError, match="no measurable trajectory in \\['diagnostic'\\]"):
        compare_styles(
            StyleGroup("demonstrator", "r", measured), StyleGroup("planner", "s", measured), empty
        )
