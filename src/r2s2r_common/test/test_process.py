"""Owned children die with their owner (SIGKILL included); the error boundary's exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from r2s2r_common.config import ConfigError
from r2s2r_common.errors import (
    BadInputError,
    ExitCode,
    RunFailedError,
    describe,
    exit_code_for,
    one_line,
)
from r2s2r_common.process import run_owned, spawn_owned
from r2s2r_testing.interrupt import alive

STAND_IN = [sys.executable, "-m", "r2s2r_testing.stand_ins"]
"""Programs for tests to start (python -m r2s2r_testing.stand_ins --help)."""
OWNER = [*STAND_IN, "owner"]
"""Starts an owned child, prints its pid, sleeps (``--child-from-thread``: the child is
started from a thread that ends at once, so it must rely on its owner watch)."""


def gone_within(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.graph
@pytest.mark.parametrize("from_thread", [False, True], ids=["main_thread", "other_thread"])
def test_owned_child_dies_when_its_owner_is_killed(from_thread: bool) -> None:
    command = [*OWNER, "--child-from-thread"] if from_thread else OWNER
    owner = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    child_pid = 0
    try:
        assert owner.stdout is not None
        child_pid = int(owner.stdout.readline())
        time.sleep(1.0)
        assert alive(child_pid), "the child died while its owner lives"
        owner.send_signal(signal.SIGKILL)  # the owner only: the child has its own group
        owner.wait(timeout=10)
        assert gone_within(child_pid, 3.0), "the child outlived its SIGKILLed owner"
    finally:
        if owner.poll() is None:
            owner.kill()
        if child_pid and alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)


@pytest.mark.graph
def test_owned_child_has_its_own_group_and_knows_its_owner(tmp_path: Path) -> None:
    out = tmp_path / "env.txt"
    with out.open("w") as stream:
        process = spawn_owned([*STAND_IN, "group-and-owner"], stdout=stream)
        process.wait(timeout=30)
    group, owner = out.read_text().split()
    assert int(group) == process.pid and int(owner) == os.getpid()


@pytest.mark.graph
def test_run_owned_stops_the_group_on_timeout() -> None:
    started = time.monotonic()
    code, timed_out = run_owned(["sleep", "600"], timeout_s=0.5, grace_s=2.0)
    assert timed_out and code != 0 and time.monotonic() - started < 10.0
    assert run_owned([*STAND_IN, "fail", "3"], timeout_s=30) == (3, False)


class _LibraryError(RuntimeError):
    pass


_LibraryError.__module__ = "r2s2r_fake.module"


@pytest.mark.graph
@pytest.mark.parametrize("from_thread", [False, True], ids=["main_thread", "other_thread"])
def test_owned_child_stops_on_sigint_though_its_owner_ignores_it(from_thread: bool) -> None:
    # An owner started as a background job of a script ignores SIGINT; before, its children
    # inherited that and sat out the SIGINT that stop_process_group sends first (an
    # experiment's stage command outlived a SIGTERM to the experiment by the 20 s grace).
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if from_thread:
            holder: list[subprocess.Popen[bytes]] = []
            thread = threading.Thread(target=lambda: holder.append(spawn_owned(["sleep", "600"])))
            thread.start()
            thread.join()
            child = holder[0]
        else:
            child = spawn_owned(["sleep", "600"])
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        os.kill(child.pid, signal.SIGINT)
        assert child.wait(timeout=5.0) == -signal.SIGINT
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_exit_codes_of_the_error_boundary() -> None:
    assert exit_code_for(ConfigError("x")) == ExitCode.BAD_INPUT
    assert exit_code_for(BadInputError("x")) == ExitCode.BAD_INPUT
    assert exit_code_for(RunFailedError("x")) == ExitCode.FAILED
    assert exit_code_for(FileNotFoundError(2, "No such file", "a.yaml")) == ExitCode.BAD_INPUT
    assert exit_code_for(_LibraryError("x")) == ExitCode.FAILED
    assert exit_code_for(OSError(28, "No space left on device")) == ExitCode.FAILED
    assert exit_code_for(KeyError("x")) is None  # a bug, not an input problem
    code, line = describe(ZeroDivisionError("division by zero"))
    assert code == ExitCode.FAILED and line.startswith("internal error: ZeroDivisionError")
    assert "R2S2R_DEBUG=1" in line


def test_one_line_folds_and_bounds_messages() -> None:
    assert one_line("a.yaml: x: bad\n  - b: bad\n") == "a.yaml: x: bad; b: bad"
    assert one_line("--output x: exists") == "--output x: exists"
    folded = one_line("\n".join(f"key{i}: unknown key" for i in range(28)))
    assert folded.endswith("; and 24 more") and folded.count(";") == 4
    assert len(one_line("x" * 5000)) <= 600
