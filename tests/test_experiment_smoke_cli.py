"""The smoke experiment from the command line with a changed protocol: only evaluations re-run.

``r2s2r experiment`` on the folder of the two runs before (``smoke_cli_rerun``,
tests/conftest.py), same inputs but one nominal trial per policy.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.graph


def test_a_changed_protocol_reruns_only_the_evaluations(smoke_first_run, smoke_cli_rerun) -> None:
    out, result = smoke_cli_rerun.out, smoke_cli_rerun.results
    names = [p.name for p in smoke_first_run.results.policies]
    # The command line, same inputs but a changed protocol: only the evaluations re-run.
    assert result.exit_code == 0, result.output
    third = json.loads((out / "results.json").read_text())
    ran = third["metadata"]["stages_run_this_session"]
    # The capacity check's own world and trials are the preset's: its evaluation re-runs too.
    assert sorted(ran) == sorted(f"evaluation/{n}" for n in [*names, "capacity"])
    assert all(p["groups"]["all"]["trials"] == 1 for p in third["policies"])
    assert "world (main)" in result.output and "reproduce: r2s2r experiment" in result.output
    assert third["command"] == (out / "command.txt").read_text().strip()
    assert "--preset smoke" in third["command"] and "--trials nominal=1" in third["command"]
