"""Fidelity of the evaluators, without ROS: known answers of the paired statistics and traces.

McNemar's exact test, paired agreement, trial pairing, the inference trace's round trip, the
timing read from a trace (a tracked object one frame behind the image is seen as 100 ms), the
instant two paths' arms part, and the engine's rule that it infers on inputs of one instant
(the tracked object of the newest frame) as the datasets hold them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2s2r_dataset.object_track import TrackView
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec
from r2s2r_policy.evaluation.fidelity import (
    divergence_time,
    mcnemar_exact_p,
    pair_records,
    paired_summary,
    trace_timing,
)
from r2s2r_policy.evaluation.trials import TrialRecord
from r2s2r_policy.inference.engine import InferenceEngine, StepStatus
from r2s2r_policy.inference.trace import InferenceTrace, load_trace

from r2s2r_dataset import object_track_fields

HOME = np.array([HOME_POSITIONS[name] for name in ALL_JOINT_NAMES])
KEYS = ["head_camera_rgb", "hand_camera_rgb", "joint_pos_rad", "belt_speed_mps", "object_track"]


def test_mcnemar_exact_p_known_values() -> None:
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(3, 3) == 1.0
    assert mcnemar_exact_p(5, 0) == pytest.approx(2 / 32)
    assert mcnemar_exact_p(0, 6) == pytest.approx(2 / 64)
    # 4 against 0, the first observation: p = 0.125 two-sided.
    assert mcnemar_exact_p(4, 0) == pytest.approx(0.125)
    assert mcnemar_exact_p(1, 9) == pytest.approx(2 * (1 + 10) / 1024)
    with pytest.raises(ValueError):
        mcnemar_exact_p(-1, 2)


def test_paired_summary_counts_discordant_pairs() -> None:
    first = [True, True, False, False, True]
    second = [True, False, False, True, True]
    summary = paired_summary(first, second)
    assert (summary.pairs, summary.agree, summary.only_first, summary.only_second) == (5, 3, 1, 1)
    assert summary.agreement == pytest.approx(0.6)
    assert summary.rate_difference == pytest.approx(0.0)
    assert summary.mcnemar_p == 1.0
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_summary([True], [True, False])


def test_pairing_refuses_two_protocols() -> None:
    a = [TrialRecord(0, 10, "nominal", True, "success"), TrialRecord(1, 11, "lighting", False, "x")]
    b = [TrialRecord(1, 11, "lighting", True, "success"), TrialRecord(0, 10, "nominal", True, "s")]
    pairs = pair_records(a, b)
    assert [(x.index, y.index) for x, y in pairs] == [(0, 0), (1, 1)]
    with pytest.raises(ValueError, match="not the same protocol"):
        pair_records(a, [TrialRecord(0, 99, "nominal", True, "success")])


def synthetic_trace(
    start_s: float, track_lag_s: float, part_at_s: float | None = None, frames: int = 30
) -> InferenceTrace:
    """A 10 Hz trace: images at start + 0.1 k, the command 20 ms later, arm moving slowly."""
    trace = InferenceTrace(list(KEYS), chunk_length=4, action_dim=18)
    for k in range(frames):
        image_s = start_s + 0.1 * (k + 1)
        joints = HOME.copy()
        joints[0] += 0.01 * k
        if part_at_s is not None and image_s - start_s >= part_at_s:
            joints[1] += 0.2
        stamps = dict.fromkeys(KEYS[:2], image_s)
        stamps |= {
            "joint_pos_rad": image_s + 0.018,
            "belt_speed_mps": image_s,
            "object_track": image_s - track_lag_s,
        }
        ages = dict.fromkeys(KEYS, 0.002) | {"head_camera_rgb": 0.02, "hand_camera_rgb": 0.02}
        trace.record(
            image_s + 0.02,
            "commanded",
            0.004,
            stamps,
            ages,
            joints,
            0.1,
            np.zeros(17),
            np.array([0.1, 0.2, 0.3, 0.4]),
            np.tile(joints, (4, 1)),
        )
    return trace


def test_a_trace_round_trips_and_pads_commands(tmp_path: Path) -> None:
    trace = synthetic_trace(5.0, 0.0)
    trace.metadata["seed"] = 7
    trace.record(9.0, "hold", 0.0, {}, {}, HOME, 0.0, None, np.array([0.1]), HOME[None, :])
    path = trace.save(tmp_path / "t" / "trial_000.npz")
    assert not list(path.parent.glob(".*partial"))
    loaded = load_trace(path)
    assert loaded.metadata == {"seed": 7}
    assert loaded.arrays["command_positions"].shape == (31, 4, 18)
    assert np.isnan(loaded.arrays["command_times_s"][-1, 1:]).all()
    assert loaded.commanded().sum() == 30
    assert np.isnan(loaded.column("stamp_s", "object_track")[-1])
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not an inference trace"):
        load_trace(tmp_path / "plain.npz")


def test_trace_timing_sees_a_tracked_object_one_frame_behind(tmp_path: Path) -> None:
    on_time = trace_timing(load_trace(synthetic_trace(5.0, 0.0).save(tmp_path / "a.npz")), 5.0)
    behind = trace_timing(load_trace(synthetic_trace(5.0, 0.1).save(tmp_path / "b.npz")), 5.0)
    assert on_time.track_lag_s == pytest.approx(0.0)
    assert behind.track_lag_s == pytest.approx(0.1)
    assert on_time.first_command_s == pytest.approx(0.1)
    assert on_time.image_to_command_s == pytest.approx(0.02)
    assert on_time.image_period_s == pytest.approx(0.1)
    assert on_time.inferences == 30


def test_the_instant_two_paths_part(tmp_path: Path) -> None:
    same = load_trace(synthetic_trace(5.0, 0.0).save(tmp_path / "a.npz"))
    # The same trial on another cell clock (it started at 40.03 s): matched by trial time.
    shifted = load_trace(synthetic_trace(40.03, 0.0).save(tmp_path / "b.npz"))
    parts = load_trace(synthetic_trace(40.03, 0.0, part_at_s=1.5).save(tmp_path / "c.npz"))
    assert divergence_time(same, 5.0, shifted, 40.03) is None
    assert divergence_time(same, 5.0, parts, 40.03) == pytest.approx(1.5)


def test_the_engine_waits_for_the_tracked_object_of_the_newest_frame() -> None:
    spec = robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS)
    spec = type(spec).model_validate(
        spec.model_dump()
        | {
            "object_track_fields": object_track_fields(["cube"]),
            "object_track_source": "object_tracker",
        }
    )

    class HoldsHome:  # a policy double: the engine's rules, not a model, are under test
        def __init__(self) -> None:
            self.spec = spec

        def predict_chunk(self, observation: dict[str, np.ndarray]) -> np.ndarray:
            assert observation["object_track"].shape == (len(spec.object_track_fields),)
            return np.tile(HOME, (spec.chunk_length, 1)).astype(np.float32)

        def predict_chunk_and_latent(
            self, observation: dict[str, np.ndarray]
        ) -> tuple[np.ndarray, np.ndarray]:
            return self.predict_chunk(observation), np.zeros(1, dtype=np.float32)

    policy = HoldsHome()
    clock = [100.0]
    engine = InferenceEngine(policy, clock=lambda: clock[0])  # type: ignore[arg-type]
    engine.new_trace()
    track = TrackView(1, "cube", np.array([0.5, 0.0, 0.1]), np.array([0.1, 0.0, 0.0]), 0.0)
    rng = np.random.default_rng(0)
    engine.observe_joints(list(ALL_JOINT_NAMES), HOME, stamp_s=1.0)
    engine.observe_belt_speed(0.1, stamp_s=1.0)
    engine.observe_object_tracks([track], stamp_s=0.9)  # the previous frame's object
    for key in spec.image_keys:
        engine.observe_image(key, rng.integers(0, 255, (48, 64, 3), dtype=np.uint8), 1.0)
    assert engine.new_image_set() and not engine.observation_ready()
    clock[0] += 0.015  # the tracker's output for frame 1.0 arrives 15 ms after the images
    engine.observe_object_tracks([track], stamp_s=1.0)
    assert engine.observation_ready()
    assert engine.step().status == StepStatus.COMMANDED
    assert not engine.observation_ready()  # the frames were consumed
    assert engine.trace is not None and len(engine.trace) == 1
    arrays = engine.trace.arrays()
    assert arrays["stamp_s"][0].tolist() == [1.0, 1.0, 1.0, 1.0, 1.0]
    assert arrays["age_s"][0, 0] == pytest.approx(0.015)
