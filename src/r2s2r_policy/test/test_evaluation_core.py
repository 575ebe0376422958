"""Evaluation protocol, Wilson intervals, report files, in-process evaluator and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from r2s2r_policy.evaluation import (
    EvaluationConfig,
    EvaluationReport,
    TrialRecord,
    trial_plan,
    wilson_interval,
)
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec, untrained_policy
from r2s2r_policy.evaluation.in_process import evaluate_in_process
from r2s2r_policy.inference.commands import ActionCommand
from scipy.stats import binomtest

REPO = Path(__file__).resolve().parents[3]


def short_twin(tmp_path: Path, timeout_s: float = 2.0) -> Path:
    """The shipped twin with a short trial limit and the object arriving at once."""
    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["task"]["trial_timeout_s"] = timeout_s
    data["randomization"]["arrival_time_s"] = [0.0, 0.0]
    path = tmp_path / "short_twin.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [
        (0, 10, (0.0, 0.2775)),  # upper = z^2 / (n + z^2)
        (5, 10, (0.2366, 0.7634)),
        (8, 10, (0.4902, 0.9433)),
        (24, 24, (0.8620, 1.0)),  # lower = n / (n + z^2)
        (12, 50, (0.1430, 0.3741)),
    ],
)
def test_wilson_interval_known_values(
    successes: int, trials: int, expected: tuple[float, float]
) -> None:
    low, high = wilson_interval(successes, trials)
    assert low == pytest.approx(expected[0], abs=1e-4)
    assert high == pytest.approx(expected[1], abs=1e-4)
    reference = binomtest(successes, trials).proportion_ci(0.95, method="wilson")
    assert (low, high) == pytest.approx((reference.low, reference.high), abs=1e-9)


def test_wilson_interval_rejects_bad_counts() -> None:
    with pytest.raises(ValueError, match="successes = 11"):
        wilson_interval(11, 10)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_default_protocol_is_the_papers_50_trials() -> None:
    plan = trial_plan(EvaluationConfig())
    assert len(plan) == 50
    counts = {c: sum(t.condition == c for t in plan) for c in {t.condition for t in plan}}
    assert counts == {"nominal": 24, "lighting": 9, "belt_speed": 9, "unseen_object": 8}
    assert [t.seed for t in plan] == list(range(10_000, 10_050))
    assert [t.condition for t in plan[:5]] == [
        "nominal",
        "lighting",
        "belt_speed",
        "unseen_object",
        "nominal",
    ]
    assert plan == trial_plan(EvaluationConfig())  # deterministic
    with pytest.raises(ValueError, match="all counts are 0"):
        EvaluationConfig(trials_per_condition={"nominal": 0})


def test_report_summary_and_files(tmp_path: Path) -> None:
    records = [
        TrialRecord(0, 1, "nominal", True, "success"),
        TrialRecord(1, 2, "nominal", False, "dropped"),
        TrialRecord(2, 3, "lighting", False, "timeout"),
        TrialRecord(3, 4, "lighting", True, "success"),
        TrialRecord(4, 5, "nominal", True, "success"),
    ]
    report = EvaluationReport("ckpt", "in_process", EvaluationConfig(), records)
    summary = report.summary()
    assert list(summary) == ["nominal", "lighting", "shifted", "all"]
    assert summary["nominal"].successes == 2 and summary["nominal"].trials == 3
    assert summary["all"].rate == pytest.approx(0.6)
    assert summary["all"].failure_reasons == {"dropped": 1, "timeout": 1}
    json_path, png_path = report.save(tmp_path, "run")
    data = json.loads(json_path.read_text())
    assert data["summary"]["lighting"]["ci95"] == pytest.approx(list(wilson_interval(1, 2)))
    assert len(data["trials"]) == 5
    assert png_path.read_bytes()[:4] == b"\x89PNG"
    assert "nominal" in report.table()


def test_in_process_evaluation_runs_the_protocol(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    commands: list[tuple[int, float, np.ndarray]] = []
    report = evaluate_in_process(
        policy,
        EvaluationConfig(trials_per_condition={"nominal": 1, "unseen_object": 1}),
        twin_config_path=short_twin(tmp_path, 1.0),
        on_command=lambda trial, t, c: commands.append((trial.index, t, c.positions_rad)),
    )
    assert [r.condition for r in report.records] == ["nominal", "unseen_object"]
    assert report.records[1].object_type == "sphere"  # the shift's object mix
    for record in report.records:
        # The untrained policy hovers near home: the judge rules a timeout at the limit.
        assert record.reason == "timeout" and record.duration_s == pytest.approx(1.0, abs=0.01)
        # One chunk per 0.1 s of cell time once both cameras delivered (first frame <= 0.1 s).
        assert 8 <= record.commands_sent <= 10
    assert all(positions.shape == (4, 18) for _, _, positions in commands)


def test_in_process_trials_start_after_the_settle_with_frames_locked_to_the_start(
    tmp_path: Path,
) -> None:
    # Both evaluators: reset, the idle cell sensed for settle_s, start. A trial's frames fall
    # 0.1 s, 0.2 s, ... after its start, so every chunk is computed k x 0.1 s into the trial,
    # and with an inference delay it is sent that much later (the graph's perception and
    # inference time), with the command's times shortened by it.
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    for delay_s in (0.0, 0.024):
        sent: list[tuple[float, float, np.ndarray]] = []

        def keep(trial: object, t: float, c: ActionCommand, sent: list = sent) -> None:
            sent.append((t, c.observation_time_s, c.times_s))

        report = evaluate_in_process(
            policy,
            EvaluationConfig(
                trials_per_condition={"nominal": 2},
                settle_s=0.5,
                in_process_inference_delay_s=delay_s,
            ),
            twin_config_path=short_twin(tmp_path, 1.0),
            on_command=keep,
        )
        first, second = report.records
        assert second.started_at_s - first.started_at_s == pytest.approx(
            first.duration_s + 0.5, abs=0.005
        )
        starts = [first.started_at_s, second.started_at_s]
        for sent_s, image_s, times_s in sent:
            since_start = image_s - max(s for s in starts if s <= image_s + 1e-9)
            assert since_start == pytest.approx(round(since_start, 1), abs=1e-6)
            assert sent_s - image_s == pytest.approx(delay_s, abs=0.0021)
            assert times_s[0] == pytest.approx(0.1 - (sent_s - image_s), abs=1e-9)


@pytest.mark.parametrize(
    ("fault", "reason", "stop"),
    [("saturating", "safety_stop", "saturation"), ("nan", "no_action", "no_action")],
)
def test_a_misbehaving_policy_is_recorded_as_a_fault_and_fails_the_evaluation(
    tmp_path: Path, fault: str, reason: str, stop: str
) -> None:
    """A diverged checkpoint (saturating) or one that never acts is not a plain miss."""
    from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HOME_POSITIONS
    from r2s2r_policy.evaluation.report import PolicyFaultError
    from r2s2r_policy.inference.engine import InferenceConfig
    from r2s2r_policy.inference.safety_layer import SafetyLayerConfig

    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    chunk = np.tile([HOME_POSITIONS[name] for name in ALL_JOINT_NAMES], (4, 1))
    if fault == "saturating":
        chunk[:, [ALL_JOINT_NAMES.index(name) for name in ARM_JOINT_NAMES]] = 7.0
    else:
        chunk[:] = np.nan
    policy.predict_chunk_and_latent = lambda observation: (  # type: ignore[method-assign]
        chunk.astype(np.float32),
        np.zeros(1, dtype=np.float32),
    )
    report = evaluate_in_process(
        policy,
        EvaluationConfig(trials_per_condition={"nominal": 1}),
        twin_config_path=short_twin(tmp_path, 2.0),
        inference=InferenceConfig(safety=SafetyLayerConfig(dropped_chunks_to_stop=5)),
    )
    (record,) = report.records
    assert not record.success and record.reason == reason
    assert stop in record.safety_stop
    assert report.summary()["nominal"].failure_reasons == {reason: 1}
    with pytest.raises(PolicyFaultError, match=f"1 of 1 trials with a policy fault \\({reason} 1"):
        report.raise_for_policy_faults("report.json")
