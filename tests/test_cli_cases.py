"""Bad input and crash cases of the command line: one line on stderr, the right exit code.

Each case of :mod:`cli_cases` runs ``r2s2r`` as a subprocess on bad files the fixture makes and
asserts: the exit code (2 bad input, 1 failed run, 0 done), exactly one stderr line naming the
problem, no traceback, and nothing written that should not be.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import (
    TRACEBACK,
    Case,
    Step,
    cases,
    check_case,
    make_checkpoints,
    make_world,
    run_step,
)

CASES = cases()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_world(tmp_path_factory.mktemp("cli_cases") / "world")
    make_checkpoints(root)
    return root


def test_there_are_the_issue_cases() -> None:
    ids = [case.id for case in CASES]
    assert ids == [f"c{n:02d}" for n in range(1, 39)]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=f"{c.id}-{c.what}", marks=[pytest.mark.graph] if c.graph else [])
        for c in CASES
    ],
)
@pytest.mark.graph  # every case runs the CLI as a process
def test_case(case: Case, world: Path) -> None:
    problems = check_case(case, world)
    assert not problems, f"{case.id} {case.what}: " + "; ".join(problems)


@pytest.mark.graph
def test_debug_shows_the_traceback(world: Path) -> None:
    quiet = run_step(Step(["bag", "inspect", "empty"], 2), world)
    debug = run_step(Step(["--debug", "bag", "inspect", "empty"], 2), world)
    assert quiet.code == debug.code == 2
    assert TRACEBACK not in quiet.stderr and TRACEBACK in debug.stderr
    assert debug.stderr_lines[-1] == quiet.stderr_lines[0]
