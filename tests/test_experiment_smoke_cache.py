"""The smoke experiment rerun with the same inputs: no stage does any work, the same records.

The second run (``smoke_cached_rerun``, tests/conftest.py) in the first one's folder.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.graph


def test_a_rerun_with_the_same_inputs_does_no_work(smoke_first_run, smoke_cached_rerun) -> None:
    results = smoke_first_run.results
    summary = json.loads((smoke_first_run.snapshot / "summary.json").read_text())
    again, lines = smoke_cached_rerun.results, smoke_cached_rerun.lines
    # Second run, same inputs: no stage does any work, same table.
    assert again.metadata["stages_run_this_session"] == []
    assert len(again.metadata["stages_skipped_this_session"]) == 12
    assert again.table() == results.table()
    # A cached rerun (e.g. one that only publishes) keeps the wall time of the stages.
    assert again.summary()["wall_s"] == summary["wall_s"]
    assert again.summary()["session_wall_s"] < summary["wall_s"]
    # Its console: one line per stage, then the table.
    assert [line for line in lines if line.startswith("[")] == [
        f"[{stage}] up to date" for stage in again.metadata["stages_skipped_this_session"]
    ], lines
