"""Noticing a node process that the kernel holds stopped (SIGSTOP, a debugger): what to say, when.

A node frozen by SIGSTOP (or stopped under a debugger) runs no callback: it publishes nothing,
answers nothing and says nothing, not even on ``/diagnostics``; its silence is all there is to
see. The process supervisor (:mod:`r2s2r.supervisor`) owns every node process of a graph, so it
can ask the kernel directly: ``/proc/<pid>/stat`` gives a process's state, ``T`` (stopped by a
signal) or ``t`` (stopped by a tracer). The supervisor samples its children's states every
:attr:`FreezeWatchConfig.poll_period_s` and :class:`FreezeWatch` turns the samples into console
lines: one warning once a node has been stopped for :attr:`FreezeWatchConfig.warn_after_s`,
the same again every :attr:`FreezeWatchConfig.repeat_every_s` while it stays stopped, and one
line when it runs again.

Why here rather than (only) a watch on ``/diagnostics`` freshness: the kernel's answer is exact
(no threshold to guess between a slow node and a frozen one), costs no ROS participant nor extra
process in the cell, covers every node of every graph the supervisor starts (the twin and the
tracker as well as the policy), and the supervisor cannot be frozen with the node it watches.
A node that hangs while running (a deadlock: state ``S``) is not a stopped process; that is
for a diagnostics freshness watch.

Plain Python (no ROS, no threads): the supervisor samples and prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field
from r2s2r_common.config import ConfigModel

STOPPED_STATES: dict[str, str] = {
    "T": "stopped by a signal: SIGSTOP or SIGTSTP",
    "t": "stopped by a tracer: a debugger",
}
"""Process states (``/proc/<pid>/stat``, field 3) of a stopped process, and what stops one so."""

GONE_STATES = frozenset("ZX")
"""States of a process that has exited (zombie, dead): its exit is reported elsewhere."""


class FreezeWatchConfig(ConfigModel):
    """When the supervisor speaks of a stopped node (defaults with their reasons)."""

    warn_after_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="A node stopped this long is named on the console. 1 s is the policy's "
        "max_tick_gap_s (config/nodes/policy_inference.yaml): from then on a resumed policy "
        "waits for ~/rearm, so the operator learns of the freeze by the time it matters; a "
        "shorter stop (a profiler's sample) is not a fault.",
    )
    repeat_every_s: float = Field(
        default=10.0,
        gt=0.0,
        le=3600.0,
        description="While it stays stopped, the warning again this often (with the time so "
        "far): an operator who missed the first line sees the next, and 10 s keeps a long "
        "freeze to a few lines a minute.",
    )
    poll_period_s: float = Field(
        default=0.25,
        gt=0.0,
        le=10.0,
        description="How often every node's state is read (one small /proc read per node): "
        "the first warning comes at most this late after warn_after_s.",
    )


def parse_stat_state(text: str) -> str | None:
    """Return the state letter of a ``/proc/<pid>/stat`` line (None when it is not one).

    The command name (field 2, in parentheses) may hold spaces and parentheses itself: the
    state is the first field after its last ``)``.
    """
    _, closing, rest = text.rpartition(")")
    fields = rest.split()
    if not closing or not fields:
        return None
    return fields[0]


def process_state(pid: int, proc: Path = Path("/proc")) -> str | None:
    """Return the kernel's state letter of process ``pid`` (None: gone, or no ``/proc``)."""
    try:
        text = (proc / str(pid) / "stat").read_text(errors="replace")
    except OSError:
        return None
    return parse_stat_state(text)


@dataclass
class _Stopped:
    pid: int
    state: str
    since_s: float
    said_s: float | None = None


class FreezeWatch:
    """Turns successive samples of node process states into what the console should say.

    Args:
        config: Thresholds (:class:`FreezeWatchConfig`).

    """

    def __init__(self, config: FreezeWatchConfig | None = None) -> None:
        self.config = config or FreezeWatchConfig()
        self._stopped: dict[str, _Stopped] = {}

    def stopped_for(self, now_s: float) -> dict[str, float]:
        """Seconds each node has been seen stopped, by node name (only the stopped ones)."""
        return {name: now_s - entry.since_s for name, entry in self._stopped.items()}

    def sample(self, name: str, pid: int, state: str | None, now_s: float) -> str | None:
        """Take one sample of node ``name``'s state; return a line to say now, or None.

        Args:
            name: Node name.
            pid: Its process id (named in the lines).
            state: Its state letter (:func:`process_state`; None: gone).
            now_s: A monotonic clock (seconds).

        """
        entry = self._stopped.get(name)
        if state in STOPPED_STATES:
            if entry is None or entry.pid != pid:
                entry = self._stopped[name] = _Stopped(pid, state, now_s)
            entry.state = state
            stopped_s = now_s - entry.since_s
            why = f"process state {state}: {STOPPED_STATES[state]}"
            if entry.said_s is None and stopped_s >= self.config.warn_after_s:
                entry.said_s = now_s
                return (
                    f"WARN: node '{name}' (pid {pid}) has been stopped for {stopped_s:.1f} s "
                    f"({why}): it runs nothing, publishes nothing and answers nothing until "
                    "SIGCONT"
                )
            if entry.said_s is not None and now_s - entry.said_s >= self.config.repeat_every_s:
                entry.said_s = now_s
                return (
                    f"WARN: node '{name}' (pid {pid}) still stopped after {stopped_s:.0f} s ({why})"
                )
            return None
        if entry is None:
            return None
        del self._stopped[name]
        if entry.said_s is None or state is None or state in GONE_STATES:
            return None  # a blip below warn_after_s; or it exited (reported as an exit)
        return f"node '{name}' (pid {pid}) runs again after {now_s - entry.since_s:.1f} s stopped"
