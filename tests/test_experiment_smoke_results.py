"""The smoke experiment from nothing: its policies, effects, published files and summary record.

One run of the smoke preset on tiny datasets (``smoke_first_run``, tests/conftest.py): five
policies trained and evaluated, the capacity check, and what the run publishes and records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import r2s2r.experiment.runner as runner_module
from r2s2r.pipeline.cache import current_commit

pytestmark = pytest.mark.graph

NAMES = [
    "real_only",
    "grounded_mimicgen",
    "grounded_planner",
    "nominal_mimicgen",
    "nominal_planner",
]


def test_five_policies_trained_and_evaluated_with_both_main_effects(smoke_first_run) -> None:
    results = smoke_first_run.results
    names = [p.name for p in results.policies]
    assert names == NAMES
    for policy in results.policies:
        assert policy.ran, policy.reason
        assert policy.groups["all"].trials == 4
        assert policy.groups["nominal"].trials == 1 and policy.groups["shifted"].trials == 3
        assert (Path(policy.checkpoint) / "model.safetensors").is_file()
    # Four co-trained policies ran: both main effects exist (whatever their values).
    assert results.effects["all"].world is not None
    assert results.effects["all"].behavior is not None


def test_the_results_are_published(smoke_first_run) -> None:
    out = smoke_first_run.snapshot
    for kind in ("results.json", "results.png", "table.txt", "command.txt", "experiment.yaml"):
        assert (out / kind).is_file(), kind
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"
    table = (out / "table.txt").read_text()
    assert "real + grounded world, mimicgen" in table and "world (main)" in table


def test_every_policy_trains_on_the_same_real_demos_and_seed(smoke_first_run) -> None:
    out, smoke_config = smoke_first_run.snapshot, smoke_first_run.config
    names = [p.name for p in smoke_first_run.results.policies]
    saved = json.loads((out / "results.json").read_text())
    trained = saved["metadata"]["training"]
    assert set(trained) == {*names, "capacity"}
    assert all(t["steps"] == 4 for t in trained.values())
    # Same real demos and seed for every policy; co-trained ones add their own sim dataset.
    configs = [
        yaml.safe_load((out / "policies" / n / "train_config.yaml").read_text()) for n in names
    ]
    assert {c["real_dataset"] for c in configs} == {smoke_config.real_dataset}
    assert {c["seed"] for c in configs} == {smoke_config.seed}
    assert configs[0]["sim_ratio"] == 0.0 and configs[1]["sim_dataset"].endswith(
        "grounded_mimicgen.hdf5"
    )
    assert not (out / "demos").exists() and not (out / "grounding").exists()


def test_the_capacity_check_and_the_summary_record(smoke_first_run) -> None:
    out, results = smoke_first_run.snapshot, smoke_first_run.results
    names = [p.name for p in results.policies]
    # The capacity check: sim data alone, evaluated in its own world; and the summary record.
    assert results.capacity is not None and results.capacity.ran
    capacity_config = yaml.safe_load(
        (out / "policies" / "capacity" / "train_config.yaml").read_text()
    )
    assert capacity_config["sim_ratio"] == 1.0 and capacity_config["real_dataset"] is None
    summary = json.loads((out / "summary.json").read_text())
    assert summary["capacity"]["trials"] == 1 and summary["command"] == "r2s2r experiment ..."
    # The wall time is the stages' (what making the results took), this session's beside it.
    assert summary["wall_s"] == pytest.approx(sum(summary["stage_wall_s"].values()), abs=0.1)
    # (wall_s is rounded to 0.1 s in the record, session_wall_s is not.)
    assert 0 < summary["wall_s"] <= summary["session_wall_s"] + 0.05
    assert set(summary["policies"]) == set(names)
    # The code that ran is named, the same one for every stage this session ran.
    assert summary["commit"] == current_commit(Path(runner_module.__file__).parent)
    assert set(summary["stage_commit"].values()) == {summary["commit"]}
    for conditions in summary["policies"].values():
        assert set(conditions) == {"nominal", "lighting", "belt_speed", "unseen_object"}
        for entry in conditions.values():
            assert entry["trials"] == 1
            assert entry["successes"] + sum(entry["failures"].values()) == 1
