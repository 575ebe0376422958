"""System identification on synthetic logs from the MuJoCo model with known gains and latency."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from r2s2r_calibration.sysid.config import SysIdConfig
from r2s2r_calibration.sysid.excitation import merge_segments, plan_excitation
from r2s2r_calibration.sysid.fit import _Fitter
from r2s2r_calibration.sysid.identify import LatencyAtBoundError, identify_controller
from r2s2r_calibration.sysid.log import JointStateLog, SysIdLogError, check_log
from r2s2r_calibration.sysid.simulation import SegmentSimulator, simulate_log
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_world.world import WorldParams, apply_grounding, load_world

NOMINAL = Path(__file__).resolve().parents[3] / "config" / "world" / "nominal.yaml"
TRUE_GAINS = {"wrist_1_joint": (410.0, 21.0), "index_mcp_joint": (3.6, 0.06)}
TRUE_LATENCY_S = 0.024
HOME = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])


@pytest.fixture(scope="module")
def nominal() -> WorldParams:
    return load_world(NOMINAL)


@pytest.fixture(scope="module")
def measured(nominal):
    truth = apply_grounding(
        nominal,
        {
            "controller": {
                "latency_s": TRUE_LATENCY_S,
                "gains": {j: {"kp": kp, "kd": kd} for j, (kp, kd) in TRUE_GAINS.items()},
            }
        },
    )
    segments = plan_excitation(list(TRUE_GAINS), HOME, 0.1)
    return segments, simulate_log(truth, segments)


def test_recovers_gains_and_latency(nominal, measured):
    segments, log = measured
    result = identify_controller(nominal, log, segments)
    assert result.latency_s == pytest.approx(TRUE_LATENCY_S, abs=2e-5)
    for joint, (kp, kd) in TRUE_GAINS.items():
        fit = result.joints[joint]
        assert fit.kp == pytest.approx(kp, rel=0.01)
        assert fit.kd == pytest.approx(kd, rel=0.01)
        # Held out: the chirp is predicted far better than by the nominal model.
        assert fit.heldout_rms_rad < 0.05 * fit.nominal_heldout_rms_rad
    assert result.n_samples > 100


@pytest.mark.slow  # ~1.3 s each; the fast tier identifies a controller in the test above
@pytest.mark.parametrize(
    ("latency_s", "kp_factor", "damping_factor"),
    [(0.0447, 0.75, 1.28), (0.0375, 1.25, 0.72)],
    ids=["off-grid-overdamped", "off-grid-underdamped"],
)
def test_off_grid_latency_and_damping_extremes(nominal, latency_s, kp_factor, damping_factor):
    # Latencies between the 2 ms control ticks with the damping ratio pushed both ways: a
    # latency rounded to the tick grid (what sysid used to fit) gave 10-20 % gain errors here.
    joints = ["shoulder_pan_joint", "wrist_1_joint", "index_mcp_joint", "ring_pip_joint"]
    gains = {}
    for joint in joints:
        kp, kd = nominal.controller.gains[joint].kp, nominal.controller.gains[joint].kd
        gains[joint] = (kp * kp_factor, kd * np.sqrt(kp_factor) * damping_factor)
    truth = apply_grounding(
        nominal,
        {
            "controller": {
                "latency_s": latency_s,
                "gains": {j: {"kp": kp, "kd": kd} for j, (kp, kd) in gains.items()},
            }
        },
    )
    segments = plan_excitation(joints, HOME, 0.1)
    result = identify_controller(nominal, simulate_log(truth, segments), segments)
    assert result.latency_s == pytest.approx(latency_s, abs=5e-5)
    for joint, (kp, kd) in gains.items():
        assert result.joints[joint].kp == pytest.approx(kp, rel=0.02), joint
        assert result.joints[joint].kd == pytest.approx(kd, rel=0.02), joint


@pytest.mark.parametrize("latency_shift_s", [5e-5, 2e-3], ids=["linear", "refit"])
def test_latency_sensitivity_matches_a_refit(nominal, measured, latency_shift_s):
    # The gains' change with the latency (what the latency's uncertainty adds to the gains'
    # intervals) is one linearized step for a small shift, and a refit for a large one.
    segments, log = measured
    fitter = _Fitter(SegmentSimulator(nominal), log, SysIdConfig(), nominal.joint_gains())
    calls = {"fit": 0}
    fit = fitter.fit
    for segment in (s for s in segments if s.kind == "step"):
        base = fit(segment, TRUE_LATENCY_S)
        refit = fit(segment, TRUE_LATENCY_S + latency_shift_s)
        expected = (refit.kp / base.kp - 1.0, refit.kd / base.kd - 1.0)

        def counting_fit(*args, **kwargs):
            calls["fit"] += 1
            return fit(*args, **kwargs)

        fitter.fit = counting_fit  # type: ignore[method-assign]
        got = fitter.latency_sensitivity(segment, base, TRUE_LATENCY_S + latency_shift_s)
        fitter.fit = fit  # type: ignore[method-assign]
        assert abs(expected[0]) > 1e-4, "the shift must move the gains for the test to mean much"
        np.testing.assert_allclose(got, expected, rtol=0.05, atol=2e-5)
    assert calls["fit"] == (0 if latency_shift_s < 1e-3 else 2)


def test_plan_starts_and_ends_at_rest():
    segments = plan_excitation(["elbow_joint", "ring_dip_joint"], HOME, 1.0)
    assert [s.kind for s in segments] == ["step", "chirp", "step", "chirp"]
    assert segments[0].start_time_s == 1.0
    for previous, following in itertools.pairwise(segments):
        assert following.start_time_s > previous.end_time_s
    for segment in segments:
        np.testing.assert_allclose(segment.positions[-1], segment.rest_positions, atol=1e-9)
    with pytest.raises(ValueError, match="expected one of"):
        plan_excitation(["knee_joint"], HOME, 0.0)


def test_merged_command_reproduces_every_segment():
    segments = plan_excitation(["elbow_joint", "wrist_1_joint", "index_mcp_joint"], HOME, 1.0)
    merged = {m.controller: m for m in merge_segments(segments)}
    assert set(merged) == {"arm", "hand"}
    for segment in segments:
        command = merged[segment.controller]
        assert np.all(np.diff(command.times_s) > 0.0)
        # Sampled at the segment's points, the merged command equals the segment.
        at = segment.start_time_s - command.start_time_s + segment.times_s
        for column in range(len(command.joint_names)):
            sampled = np.interp(at, command.times_s, command.positions[:, column])
            np.testing.assert_allclose(sampled, segment.positions[:, column], atol=1e-12)
        # Between segments it holds rest (no ramp across the pause).
        pause = segment.start_time_s - command.start_time_s - 1e-3
        if pause > 0.0:
            for column in range(len(command.joint_names)):
                value = np.interp(pause, command.times_s, command.positions[:, column])
                assert value == pytest.approx(segment.rest_positions[column], abs=1e-12)
    overlapping = [segments[0], dataclasses.replace(segments[2], start_time_s=1.1)]
    with pytest.raises(ValueError, match="before the previous arm segment ends"):
        merge_segments(overlapping)


def test_step_that_starts_late_is_refused(measured):
    segments, log = measured
    step = next(s for s in segments[1:] if s.kind == "step")
    check_log(log, [step])  # on time: accepted
    # The same response against a command time 0.3 s earlier: it started late.
    early = dataclasses.replace(step, start_time_s=step.start_time_s - 0.3)
    with pytest.raises(SysIdLogError, match="arrived late"):
        check_log(log, [early])


def test_log_with_gap_names_what_is_missing(measured):
    segments, log = measured
    chirp = segments[1]
    middle = 0.5 * (chirp.start_time_s + chirp.end_time_s)
    keep = np.abs(log.stamps_s - middle) > 0.05
    gappy = JointStateLog(log.stamps_s[keep], log.positions[keep], log.velocities[keep])
    with pytest.raises(SysIdLogError, match=r"gap of 10\d\.\d ms.*chirp segment of wrist_1_joint"):
        check_log(gappy, segments)


def test_log_that_ends_early_is_refused(measured):
    segments, log = measured
    short = JointStateLog(log.stamps_s[:200], log.positions[:200], log.velocities[:200])
    with pytest.raises(SysIdLogError, match="record from before the first command"):
        check_log(short, segments)


def test_joint_that_never_moved_is_refused(nominal, measured):
    segments, log = measured
    frozen = dataclasses.replace(log, positions=log.positions.copy())
    column = ALL_JOINT_NAMES.index("index_mcp_joint")
    frozen.positions[:, column] = frozen.positions[0, column]
    with pytest.raises(SysIdLogError, match=r"index_mcp_joint moved 0\.00000 rad"):
        identify_controller(nominal, frozen, segments, SysIdConfig())


def test_log_missing_a_joint_is_refused(measured):
    segments, log = measured
    names = tuple(n for n in ALL_JOINT_NAMES if n != "wrist_1_joint")
    keep = [ALL_JOINT_NAMES.index(n) for n in names]
    partial = JointStateLog(log.stamps_s, log.positions[:, keep], log.velocities[:, keep], names)
    with pytest.raises(SysIdLogError, match="'wrist_1_joint' is not in the log"):
        check_log(partial, segments)


def _two_joint_log(nominal, latency_s, config=None):
    truth = apply_grounding(
        nominal,
        {
            "controller": {
                "latency_s": latency_s,
                "gains": {j: {"kp": kp, "kd": kd} for j, (kp, kd) in TRUE_GAINS.items()},
            }
        },
    )
    segments = plan_excitation(list(TRUE_GAINS), HOME, 0.1, config)
    return segments, simulate_log(truth, segments)


@pytest.mark.slow  # a whole identification (~1 s), as the next test
def test_a_latency_beyond_the_twin_family_is_measured(nominal):
    # The family's command paths reach 50 ms; a slower cell is still grounded (the search once
    # stopped at 80 ms: a 90 ms cell then got kp -56 % with a held-out error that passed).
    segments, log = _two_joint_log(nominal, 0.12)
    result = identify_controller(nominal, log, segments)
    assert result.latency_s == pytest.approx(0.12, abs=1e-4)
    for joint, (kp, kd) in TRUE_GAINS.items():
        assert result.joints[joint].kp == pytest.approx(kp, rel=0.01)
        assert result.joints[joint].kd == pytest.approx(kd, rel=0.01)


@pytest.mark.slow
def test_a_latency_at_the_search_bound_is_refused_not_clipped(nominal):
    config = SysIdConfig(max_latency_s=0.08)
    segments, log = _two_joint_log(nominal, 0.09, config)
    with pytest.raises(LatencyAtBoundError, match=r"80\.0 ms.*raise sysid\.max_latency_s"):
        identify_controller(nominal, log, segments, config)


def test_the_fit_window_must_hold_a_response_after_the_largest_latency():
    with pytest.raises(ValueError, match=r"fit_window_s = 0\.2 s must be at least"):
        SysIdConfig(max_latency_s=0.3)
    assert SysIdConfig(max_latency_s=0.3, fit_window_s=0.4).max_latency_s == 0.3
