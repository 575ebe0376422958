"""The smoke experiment's console: each stage once as running, then done; no line per trial.

What the first run of the smoke preset (``smoke_first_run``, tests/conftest.py) said.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.graph


def test_each_stage_says_running_then_done_and_no_trial_lines(smoke_first_run) -> None:
    results, lines = smoke_first_run.results, smoke_first_run.lines
    # The console: each stage once as running, then done in N s; one count per evaluation,
    # not a line per trial.
    ran = results.metadata["stages_run_this_session"]
    stage_lines = [line for line in lines if line.startswith("[")]
    for stage in ran:
        mine = [line for line in stage_lines if line.startswith(f"[{stage}] ")]
        assert mine[0] == f"[{stage}] running", lines
        assert sum(line.startswith(f"[{stage}] done in ") for line in mine) == 1, lines
    assert not [line for line in lines if " trial " in line], lines
