"""A node the kernel holds stopped is named by the supervisor (r2s2r.freeze_watch).

The decisions (when to warn, repeat, say it runs again) on made-up samples; the state read
from ``/proc``; and, with a real process, the supervisor's console while a node is stopped and
continued, and a graph stopped while one of its nodes is.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from r2s2r.freeze_watch import FreezeWatch, FreezeWatchConfig, parse_stat_state, process_state
from r2s2r.graph import ResolvedNode
from r2s2r.supervisor import GraphSupervisor

CONFIG = FreezeWatchConfig(warn_after_s=1.0, repeat_every_s=10.0, poll_period_s=0.25)


def run(watch: FreezeWatch, samples: list[tuple[float, str | None]]) -> list[tuple[float, str]]:
    """Feed ``(time, state)`` samples of one node; return ``(time, line)`` of what was said."""
    said = []
    for now_s, state in samples:
        line = watch.sample("policy_inference", 4242, state, now_s)
        if line is not None:
            said.append((now_s, line))
    return said


def every(start_s: float, stop_s: float, state: str, step_s: float = 0.25) -> list:
    count = round((stop_s - start_s) / step_s)
    return [(start_s + i * step_s, state) for i in range(count)]


def test_a_stopped_node_is_named_after_a_second_then_every_ten_and_when_it_runs_again() -> None:
    watch = FreezeWatch(CONFIG)
    said = run(watch, [*every(0.0, 2.0, "S"), *every(2.0, 25.0, "T"), (25.0, "R")])
    times = [t for t, _ in said]
    assert times == [3.0, 13.0, 23.0, 25.0]
    first, repeat, _, resumed = (line for _, line in said)
    assert first == (
        "WARN: node 'policy_inference' (pid 4242) has been stopped for 1.0 s (process state T: "
        "stopped by a signal: SIGSTOP or SIGTSTP): it runs nothing, publishes nothing and "
        "answers nothing until SIGCONT"
    )
    assert repeat.startswith("WARN: node 'policy_inference' (pid 4242) still stopped after 11 s")
    assert resumed == "node 'policy_inference' (pid 4242) runs again after 23.0 s stopped"


def test_a_short_stop_or_an_exit_while_stopped_is_not_a_warning() -> None:
    watch = FreezeWatch(CONFIG)
    # A profiler's pause (under a second), then running: nothing to say.
    assert run(watch, [*every(0.0, 0.75, "t"), (0.75, "S")]) == []
    assert watch.stopped_for(1.0) == {}
    # Stopped, warned, then killed (a zombie, then gone): the exit is the supervisor's to tell.
    said = run(watch, [*every(1.0, 3.0, "T"), (3.0, "Z"), (3.25, None)])
    assert [line.split(" (")[0] for _, line in said] == ["WARN: node 'policy_inference'"]
    assert watch.stopped_for(4.0) == {}


def test_a_tracer_stop_is_told_apart_and_a_new_pid_starts_afresh() -> None:
    watch = FreezeWatch(CONFIG)
    assert watch.sample("twin", 1, "t", 0.0) is None
    line = watch.sample("twin", 1, "t", 1.0)
    assert line is not None and "stopped by a tracer: a debugger" in line
    assert watch.stopped_for(1.5) == {"twin": 1.5}
    assert watch.sample("twin", 2, "T", 2.0) is None  # another process of that name
    assert watch.stopped_for(2.5) == {"twin": 0.5}


def test_the_state_is_the_field_after_the_command_name() -> None:
    assert parse_stat_state("4242 (python3) T 1 4242 4242 0 -1") == "T"
    assert parse_stat_state("7 (a) b (c)) t 1 2") == "t"  # a command name with ') '
    assert parse_stat_state("") is None and parse_stat_state("7 (x)") is None
    assert process_state(os.getpid()) in {"R", "S"}
    assert process_state(2**22 + 1, Path("/nonexistent")) is None


def test_the_defaults_give_their_reasons() -> None:
    config = FreezeWatchConfig()
    assert (config.warn_after_s, config.repeat_every_s, config.poll_period_s) == (1.0, 10.0, 0.25)
    for name, field in FreezeWatchConfig.model_fields.items():
        assert field.description and len(field.description) > 60, name


class _Console(io.StringIO):
    """The supervisor's console, readable while it writes from its threads."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()

    def wait_for(self, fragment: str, timeout_s: float, times: int = 1) -> float:
        """Seconds until ``fragment`` appeared ``times`` times (fails after ``timeout_s``)."""
        started = time.monotonic()
        while self.text().count(fragment) < times:
            assert time.monotonic() - started < timeout_s, (fragment, self.text())
            time.sleep(0.05)
        return time.monotonic() - started


@pytest.mark.graph
@pytest.mark.timeout(60)
def test_the_supervisor_names_a_stopped_node_and_stops_it_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A node that prints a line when SIGINT reaches it (it runs again to handle it) and exits.
    executable = tmp_path / "sleeper"
    executable.write_text(
        f"#!{sys.executable}\n"
        "import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('clean stop', flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "print('up', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    executable.chmod(0o755)
    monkeypatch.setattr("r2s2r.supervisor.find_executable", lambda package, name: executable)
    node = ResolvedNode(
        name="sleeper", package="fake_pkg", executable="sleeper", parameter_files=()
    )
    console = _Console()
    supervisor = GraphSupervisor([node], tmp_path / "logs", 20.0, console=console, progress=False)
    supervisor.start()
    try:
        pid = supervisor.pid("sleeper")
        assert pid is not None
        log = tmp_path / "logs" / "sleeper.log"
        deadline = time.monotonic() + 20.0
        while "up" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        os.kill(pid, signal.SIGSTOP)
        # Named once it has been stopped warn_after_s (1 s), within a poll period or two.
        waited = console.wait_for(f"WARN: node 'sleeper' (pid {pid}) has been stopped for", 5.0)
        assert 0.9 < waited < 3.0, console.text()
        os.kill(pid, signal.SIGCONT)
        console.wait_for(f"node 'sleeper' (pid {pid}) runs again after", 3.0)
        os.kill(pid, signal.SIGSTOP)
        console.wait_for("has been stopped for", 5.0, times=2)
        started = time.monotonic()
    finally:
        supervisor.shutdown()
    # Stopped when the graph stops: continued after SIGINT, it stops itself at once rather
    # than sitting out the grace periods (20 s each) until SIGKILL.
    assert time.monotonic() - started < 10.0, console.text()
    assert "clean stop" in (tmp_path / "logs" / "sleeper.log").read_text()
    assert "all nodes stopped (sleeper=0)" in console.text()
