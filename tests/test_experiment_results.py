"""The 2×2 experiment's results: table, main effects (runs: tests/test_pipeline_experiment.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from r2s2r_policy.evaluation import EvaluationConfig, EvaluationReport, TrialRecord

from r2s2r.experiment.results import (
    ExperimentResults,
    GroupResult,
    PolicyResult,
    contrast,
    grounding_effects,
)

REPO = Path(__file__).resolve().parents[1]
Z95 = 1.959963984540054


def row(name: str, successes: int, trials: int = 50) -> PolicyResult:
    world, _, behavior = name.partition("_")
    return PolicyResult(
        name=name,
        world=None if name == "real_only" else world,
        behavior=None if name == "real_only" else behavior,
        groups={"all": GroupResult(successes, trials)},
    )


# ---- table and effects ------------------------------------------------------------------


def test_main_effects_on_known_numbers() -> None:
    # Success rates: real only 0.52; GM 0.86, GP 0.76, NM 0.66, NP 0.48.
    rates = {
        "real_only": 26,
        "grounded_mimicgen": 43,
        "grounded_planner": 38,
        "nominal_mimicgen": 33,
        "nominal_planner": 24,
    }
    policies = {name: row(name, count) for name, count in rates.items()}
    effects = grounding_effects(policies, "all")
    assert effects.world is not None and effects.behavior is not None
    # world = mean(0.86, 0.76) - mean(0.66, 0.48) = 0.81 - 0.57
    assert effects.world.points == pytest.approx(24.0, abs=1e-9)
    # behavior = mean(0.86, 0.66) - mean(0.76, 0.48) = 0.76 - 0.62
    assert effects.behavior.points == pytest.approx(14.0, abs=1e-9)
    # Agresti-Caffo adjusted interval: (x + 1) / (n + 2) per group.
    p = (np.array([43, 38, 33, 24]) + 1) / 52
    half = Z95 * math.sqrt(float(np.sum(p * (1 - p) / 52)) / 4) * 100
    world_centre = 100 * ((p[0] + p[1]) / 2 - (p[2] + p[3]) / 2)
    behavior_centre = 100 * ((p[0] + p[2]) / 2 - (p[1] + p[3]) / 2)
    assert effects.world.ci95_points == pytest.approx(
        (world_centre - half, world_centre + half), abs=1e-6
    )
    assert effects.behavior.ci95_points == pytest.approx(
        (behavior_centre - half, behavior_centre + half), abs=1e-6
    )
    # Behavior grounding matters more when the world is not grounded (the paper's interaction).
    assert effects.simple["behavior@grounded_world"].points == pytest.approx(10.0)
    assert effects.simple["behavior@nominal_world"].points == pytest.approx(18.0)
    assert effects.simple["world@planner_behavior"].points == pytest.approx(28.0)
    assert effects.over_real_only["grounded_mimicgen"].points == pytest.approx(34.0)
    assert effects.missing == []

    # One co-trained policy missing: no main effects, the computable simple effects remain.
    policies["grounded_planner"] = PolicyResult.not_run(
        "grounded_planner", "grounding failed", "grounded", "planner"
    )
    partial = grounding_effects(policies, "all")
    assert partial.world is None and partial.behavior is None
    assert partial.missing == ["grounded_planner"]
    assert set(partial.simple) == {"behavior@nominal_world", "world@mimicgen_behavior"}
    results = ExperimentResults(policies=list(policies.values()), command="r2s2r experiment")
    table = results.table()
    assert "NOT RUN: grounding failed" in table and "n/a" in table
    assert "52% [39, 65] n=50" in table  # real only, Wilson interval


def test_contrast_of_zero_rates_keeps_its_uncertainty() -> None:
    # 0/50 vs 0/50 is not certain equality: the interval has width (Wald would give [0, 0]).
    effect = contrast([GroupResult(0, 50)], [GroupResult(0, 50)])
    assert effect.points == 0.0
    low, high = effect.ci95_points
    assert low < -3.0 and high > 3.0 and low == pytest.approx(-high)


def test_contrast_rejects_empty_and_zero_trials() -> None:
    with pytest.raises(ValueError, match="expected >= 1"):
        contrast([], [GroupResult(1, 2)])
    with pytest.raises(ValueError, match="0 trials"):
        contrast([GroupResult(0, 0)], [GroupResult(1, 2)])
    with pytest.raises(ValueError, match="successes = 3"):
        GroupResult(3, 2)


@pytest.mark.graph
def test_policy_result_groups_from_an_evaluation_report(tmp_path: Path) -> None:
    protocol = EvaluationConfig()
    report = EvaluationReport(policy="p", mode="in_process", config=protocol)
    index = 0
    for condition, count in protocol.trials_per_condition.items():
        for k in range(count):
            success = k % 2 == 0 if condition == "nominal" else k % 3 == 0
            reason = "success" if success else "missed_grasp"
            report.records.append(TrialRecord(index, index, condition, success, reason))
            index += 1
    result = PolicyResult.from_report("real_only", report)
    assert result.groups["nominal"] == GroupResult(12, 24)
    assert result.groups["shifted"] == GroupResult(3 + 3 + 3, 26)
    assert result.groups["all"] == GroupResult(21, 50)
    assert result.failure_reasons == {"missed_grasp": 29}
    paths = ExperimentResults(policies=[result], command="x").save(tmp_path)
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"
    data = json.loads(paths["json"].read_text())
    assert data["policies"][0]["groups"]["nominal"]["rate"] == 0.5
    assert data["effects"]["all"]["world"] is None


# ---- stage caching ----------------------------------------------------------------------
