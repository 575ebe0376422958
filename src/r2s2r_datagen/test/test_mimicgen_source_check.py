"""MimicGen's source-demo check on synthetic demos: a biased tracker is named, a good one is not.

Each synthetic demo grasps a cube moving along the belt: at the hand-closed frame the palm
sits 7 cm above the object's centre, a few millimetres off horizontally (a person's grasp);
the demo's *tracked* object is the true one shifted by a tracker bias.
"""

from __future__ import annotations

import numpy as np
import pytest
from r2s2r_datagen.mimicgen.annotation import SubtaskAnnotation
from r2s2r_datagen.mimicgen.source import ObjectMotion, SourceDemo, SourceLibrary
from r2s2r_datagen.mimicgen.source_check import (
    CONSISTENT_OFFSET_M,
    check_source_demos,
    grasp_offset,
    summarize_offsets,
)
from r2s2r_datagen.summary import ConfigurationSummary, low_yield_diagnosis
from r2s2r_testing.pick_demo import demo_metadata

FRAMES = 80
DT_S = 0.1
GRASP_CLOSED = 50
PALM_ABOVE_M = 0.07
BELT_VELOCITY_MPS = np.array([0.0, -0.1, 0.0])


def demo(
    index: int, tracker_bias_m: np.ndarray, grasp_error_m: np.ndarray, track_ends: int = FRAMES
) -> SourceDemo:
    """A source demo whose palm closes at ``true object + grasp error + 7 cm up``."""
    times = np.arange(FRAMES) * DT_S
    true_start = np.array([-0.55, 0.3 + 0.01 * index, 0.075])
    true_at_grasp = true_start + BELT_VELOCITY_MPS * times[GRASP_CLOSED]
    palm_poses = np.tile(np.eye(4), (FRAMES, 1, 1))
    palm_poses[:, :3, 3] = true_at_grasp + grasp_error_m + [0.0, 0.0, PALM_ABOVE_M]
    return SourceDemo(
        index=index,
        metadata=demo_metadata([]),
        times_s=times,
        arm_commands=np.zeros((FRAMES, 6)),
        hand_commands=np.zeros((FRAMES, 12)),
        palm_poses=palm_poses,
        annotation=SubtaskAnnotation(10, GRASP_CLOSED, 55, 70, FRAMES),
        motion=ObjectMotion(0.0, true_start + tracker_bias_m, BELT_VELOCITY_MPS, 0.0),
        belt_direction=np.array([0.0, -1.0, 0.0]),
        object_valid=np.arange(FRAMES) < track_ends,
    )


def library(tracker_bias_m, grasp_errors_m, **skipped: int) -> SourceLibrary:
    demos = [
        demo(i, np.asarray(tracker_bias_m, float), np.asarray(e, float))
        for i, e in enumerate(grasp_errors_m)
    ]
    built = SourceLibrary(demos=demos)
    built.skipped.update(skipped)
    return built


# A person's grasps: within a few millimetres of the object's centre, in no common direction.
GRASP_ERRORS_M = np.random.default_rng(3).normal(0.0, 0.003, (8, 3)) * [1.0, 1.0, 0.0]


def test_a_good_tracker_passes() -> None:
    check = check_source_demos(library([0.0, 0.0, 0.0], GRASP_ERRORS_M))
    assert check.verdict == "ok" and not check.warns and check.message == ""
    assert len(check.offsets) == 8
    assert check.mean_horizontal_m < 0.005
    assert check.mean_offset_m[2] == pytest.approx(-PALM_ABOVE_M)  # reported, not judged
    assert 0.001 < check.spread_m < 0.008


def test_a_consistent_offset_names_a_biased_tracker() -> None:
    bias = np.array([0.015, -0.02, 0.0])  # 2.5 cm, as an ungrounded camera model gives
    check = check_source_demos(library(bias, GRASP_ERRORS_M))
    assert check.verdict == "consistent_offset" and check.warns
    # The offset is tracked object − palm: the bias, less the grasp errors' mean.
    expected = bias - GRASP_ERRORS_M.mean(axis=0) - [0.0, 0.0, PALM_ABOVE_M]
    np.testing.assert_allclose(check.mean_offset_m, expected, atol=1e-9)
    assert check.mean_horizontal_m == pytest.approx(np.linalg.norm(expected[:2]))
    centimetres = f"{100.0 * check.mean_horizontal_m:.1f} cm"
    assert centimetres in check.message and "consistently" in check.message
    assert "likely biased" in check.message and "many will miss" in check.message
    figures = check.as_dict()
    assert figures["verdict"] == "consistent_offset" and figures["demos"] == 8
    assert figures["thresholds"]["consistent_offset_m"] == CONSISTENT_OFFSET_M
    assert figures["offsets"][0]["offset_m"] == [
        round(float(v), 4) for v in check.offsets[0].offset_m
    ]


def test_an_offset_under_the_threshold_passes() -> None:
    check = check_source_demos(library([0.008, 0.0, 0.0], GRASP_ERRORS_M))
    assert check.verdict == "ok"


def test_large_offsets_in_no_common_direction_are_scattered_not_a_bias() -> None:
    angles = np.linspace(0.0, 2.0 * np.pi, 8, endpoint=False)
    errors = 0.03 * np.stack([np.cos(angles), np.sin(angles), 0.0 * angles], axis=1)
    check = check_source_demos(library([0.0, 0.0, 0.0], errors))
    assert check.verdict == "scattered" and check.warns
    assert check.mean_horizontal_m < 0.001 and check.spread_m == pytest.approx(0.03)
    assert "no common direction" in check.message


def test_one_demo_cannot_show_consistency() -> None:
    check = check_source_demos(library([0.03, 0.0, 0.0], GRASP_ERRORS_M[:1]))
    assert check.verdict == "large_offset" and check.warns
    assert "only source demo" in check.message


def test_demos_without_tracks_and_tracks_that_ended_early_are_named() -> None:
    built = library([0.0, 0.0, 0.0], GRASP_ERRORS_M[:3], no_object_track=2, failed_demo=1)
    built.demos[1] = demo(1, np.zeros(3), GRASP_ERRORS_M[1], track_ends=GRASP_CLOSED - 20)
    check = check_source_demos(built)
    assert check.verdict == "ok"
    assert check.offsets[1].track_gap_s == pytest.approx(2.1)  # last valid frame 29, grasp 50
    assert check.offsets[0].track_gap_s == 0.0
    assert any("2 source demo(s) have no usable object track" in n for n in check.notes)
    assert any("(demos [1])" in n and "extrapolated" in n for n in check.notes)
    assert check.as_dict()["skipped"] == {"no_object_track": 2, "failed_demo": 1}


def test_no_demo_to_check() -> None:
    check = summarize_offsets([], {"no_object_track": 4})
    assert check.verdict == "no_demos" and not check.warns
    assert check.notes and "4 source demo(s)" in check.notes[0]


def test_the_offset_is_read_at_the_hand_closed_frame() -> None:
    one = demo(0, np.array([0.01, 0.0, 0.0]), np.zeros(3))
    offset = grasp_offset(one)
    assert offset.grasp_time_s == pytest.approx(GRASP_CLOSED * DT_S)
    np.testing.assert_allclose(offset.offset_m, [0.01, 0.0, -PALM_ABOVE_M], atol=1e-12)
    assert offset.horizontal_m == pytest.approx(0.01)


def _summary(successes: int, attempts: int, reasons: dict[str, int]) -> ConfigurationSummary:
    item = ConfigurationSummary("grounded_mimicgen", "grounded", "mimicgen", "grounded-x")
    item.successes, item.attempts, item.failure_reasons = successes, attempts, reasons
    return item


def test_a_yield_of_zero_names_the_top_failures_and_the_source_check() -> None:
    item = _summary(0, 200, {"missed_grasp": 61, "timeout": 15, "unreachable_object": 124})
    check = check_source_demos(library([0.015, -0.02, 0.0], GRASP_ERRORS_M))
    item.source_check = check.as_dict()
    line = low_yield_diagnosis(item)
    assert line.startswith("grounded_mimicgen: yield 0% (0 successes in 200 attempts)")
    assert "top failures: unreachable_object 124, missed_grasp 61, timeout 15" in line
    assert f"source check: {check.message}" in line
    item.source_check = check_source_demos(library([0.0, 0.0, 0.0], GRASP_ERRORS_M)).as_dict()
    assert "(no tracker bias seen)" in low_yield_diagnosis(item)


def test_a_usual_yield_or_too_few_attempts_say_nothing() -> None:
    assert low_yield_diagnosis(_summary(140, 200, {"dropped": 42})) == ""
    assert low_yield_diagnosis(_summary(1, 12, {"dropped": 11})) == ""  # too few to tell
    assert low_yield_diagnosis(_summary(0, 0, {})) == ""  # nothing tried
    low = low_yield_diagnosis(_summary(3, 60, {"dropped": 57}))
    assert "yield 5% (3 successes in 60 attempts)" in low and "dropped 57" in low
    assert "source check" not in low  # the planner has none


class _Entry:
    """The fields of a prepared configuration the runner's check reads."""

    def __init__(self, name: str, behavior: str, runnable: bool = True) -> None:
        self.spec = type("Spec", (), {"name": name, "behavior": behavior})()
        self.world = object() if runnable else None


PREPARED = [
    _Entry("grounded_mimicgen", "mimicgen"),
    _Entry("nominal_mimicgen", "mimicgen"),
    _Entry("nominal_planner", "planner"),
    _Entry("other_mimicgen", "mimicgen", runnable=False),
]


def test_the_runner_checks_the_sources_once_and_warns_before_generating(monkeypatch) -> None:
    from r2s2r_datagen.mimicgen import source_check
    from r2s2r_datagen.runner import check_mimicgen_sources

    calls = []
    biased = check_source_demos(library([0.015, -0.02, 0.0], GRASP_ERRORS_M))

    def fake(options):  # type: ignore[no-untyped-def]
        calls.append(options)
        return biased

    monkeypatch.setattr(source_check, "check_configured_sources", fake)
    said: list[str] = []
    options = {"mimicgen": {"source_dataset": "demos.hdf5"}}
    figures = check_mimicgen_sources(PREPARED, options, {}, said.append)
    assert calls == [{"source_dataset": "demos.hdf5"}]  # one check for both configurations
    assert sorted(figures) == ["grounded_mimicgen", "nominal_mimicgen"]
    assert figures["grounded_mimicgen"]["verdict"] == "consistent_offset"
    assert said == [f"[generate] WARNING: grounded_mimicgen, nominal_mimicgen: {biased.message}"]
    # A MimicGen replaced by a test generator is not checked.
    assert check_mimicgen_sources(PREPARED, options, {"mimicgen": "m:f"}, said.append) == {}


def test_the_runner_says_when_the_sources_cannot_be_checked(monkeypatch) -> None:
    from r2s2r_datagen.generator import GeneratorUnavailableError
    from r2s2r_datagen.mimicgen import source_check
    from r2s2r_datagen.runner import check_mimicgen_sources

    def unavailable(options):  # type: ignore[no-untyped-def]
        raise GeneratorUnavailableError("no usable demonstration in demos.hdf5")

    monkeypatch.setattr(source_check, "check_configured_sources", unavailable)
    said: list[str] = []
    figures = check_mimicgen_sources(PREPARED[:1], {}, {}, said.append)
    assert figures["grounded_mimicgen"]["verdict"] == "not_checked"
    assert said == [
        "[generate] grounded_mimicgen: source demos not checked: no usable demonstration in "
        "demos.hdf5"
    ]
