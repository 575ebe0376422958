"""Stop a command mid-run as a person or a dying machine would, and see what it leaves.

:class:`StoppableCommand` runs ``r2s2r ARGS...`` in a session of its own (its output collected
by threads), waits for a condition (a file a stage writes), then signals the command's process
alone: SIGTERM as ``kill`` or ``timeout`` send it (its handlers run), SIGKILL as a killed machine
gives it (nothing of it runs). :meth:`StoppableCommand.stop` reports how it ended: the exit code,
the seconds it took, and every process it had started that outlived it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a dead child nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def start_time(pid: int) -> int | None:
    """Return when a live process started (clock ticks since boot): with its pid, its identity."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[19]) if fields[0] not in ("Z", "X") else None


def descendants(pid: int) -> list[int]:
    """Return the live processes below ``pid`` (children, their children, ...)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            if alive(child):
                found.append(child)
                stack.append(child)
    return found


def command_line(pid: int) -> str:
    """Return the command line of a process ('' when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def wait_gone(pids: Sequence[int], timeout_s: float) -> list[int]:
    """Wait until none of ``pids`` is alive; return those still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


@dataclass
class Stop:
    """How a stopped command ended.

    Attributes:
        signal_name: What it was sent (``SIGTERM``, ``SIGKILL``).
        exit_code: Its exit code (negative: killed by that signal).
        exit_s: Seconds from the signal to its exit.
        outlived: ``pid: command line`` of every process it had started that was still alive
            after the grace time (none is expected).
        stdout: Everything it printed on stdout.
        stderr: Everything it printed on stderr.

    """

    signal_name: str
    exit_code: int
    exit_s: float
    outlived: list[str]
    stdout: str
    stderr: str

    @property
    def last_error_line(self) -> str:
        """Its last non-empty line on stderr ('' if none)."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""


class StoppableCommand:
    """``r2s2r ARGS...`` (this interpreter) in its own session, output collected.

    Args:
        args: The verb and its arguments.
        cwd: Working directory.
        env: Extra environment variables.

    """

    def __init__(self, args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "r2s2r.cli", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )
        self._out: list[str] = []
        self._err: list[str] = []
        # Every process seen below it, pid -> start time (orphans stay listed; a reused pid
        # is another process).
        self._started: dict[int, int] = {}
        self._pumps = [
            threading.Thread(target=_pump, args=(stream, into), daemon=True)
            for stream, into in ((self.process.stdout, self._out), (self.process.stderr, self._err))
        ]
        for pump in self._pumps:
            pump.start()

    @property
    def stdout(self) -> str:
        """What it printed on stdout so far."""
        return "".join(self._out)

    @property
    def stderr(self) -> str:
        """What it printed on stderr so far."""
        return "".join(self._err)

    def tail(self, lines: int = 30) -> str:
        """Return the last lines of its stdout and stderr (for assertion messages)."""
        out = self.stdout.splitlines()[-lines:]
        err = self.stderr.splitlines()[-lines:]
        return "\n".join(["--- stdout", *out, "--- stderr", *err])

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll ``condition`` every 20 ms until it holds.

        Raises:
            AssertionError: The command ended first, or ``timeout_s`` passed (naming ``what``).

        """
        deadline = time.monotonic() + timeout_s
        polls = 0
        while time.monotonic() < deadline:
            if polls % 10 == 0:
                self._note_started()
            polls += 1
            if condition():
                return
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the command ended (exit {self.process.returncode}) before {what}:\n"
                    + self.tail()
                )
            time.sleep(0.02)
        raise AssertionError(f"no {what} within {timeout_s:.0f} s:\n" + self.tail())

    def _note_started(self) -> None:
        for pid in descendants(self.process.pid):
            started = start_time(pid)
            if started is not None:
                self._started.setdefault(pid, started)

    def _still_running(self) -> list[int]:
        return [pid for pid, started in self._started.items() if start_time(pid) == started]

    def finish(self, timeout_s: float) -> int:
        """Wait for it to end on its own; return its exit code."""
        code = self.process.wait(timeout=timeout_s)
        for pump in self._pumps:
            pump.join(timeout=5.0)
        return code

    def stop(self, sig: signal.Signals, timeout_s: float = 30.0, grace_s: float = 5.0) -> Stop:
        """Send ``sig`` to the command's process alone; wait for it and what it started.

        Args:
            sig: The signal.
            timeout_s: How long it may take to exit.
            grace_s: How long after its exit the processes it started may take to go.

        Returns:
            How it ended.

        """
        self._note_started()
        sent = time.monotonic()
        self.process.send_signal(sig)
        code = self.finish(timeout_s)
        exit_s = time.monotonic() - sent
        left = wait_gone(self._still_running(), grace_s)
        outlived = [f"{pid}: {command_line(pid)}" for pid in left]
        return Stop(sig.name, code, exit_s, outlived, self.stdout, self.stderr)

    def kill_all(self) -> None:
        """Kill it and every process it started (clean-up after a failed test)."""
        self._note_started()
        if self.process.poll() is None:
            self.process.kill()
        for pid in self._still_running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10.0)


def _pump(stream: IO[str], into: list[str]) -> None:
    for line in iter(stream.readline, ""):
        into.append(line)
