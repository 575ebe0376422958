"""What a person sees of a pipeline run: stage lines, progress bars, child problems (ROS-free).

Three pieces shared by the graph supervisor (``r2s2r launch``), the main job and the experiment:

- :func:`parse_line` reads one line of a child's output: an rcutils log line
  (``[WARN] [1796148686.580408384] [node]: text``) or plain output, and says whether it is a
  *problem* (a warning, an error, a Python exception or warning) that must reach the console.
  The console shows the message without the ROS timestamp; the log file keeps the line as is.
- :class:`ProgressBar` draws one in-place bar per long stage on a terminal and nothing
  elsewhere (a pipe, a file, ``--no-progress``).
- A child whose console is a pipe cannot draw a bar itself: when its parent sets
  :data:`PROGRESS_ENV`, :func:`progress_reporter` writes machine-readable progress lines
  (:func:`format_progress`) instead, which the parent reads (:func:`parse_progress`) and draws
  on its own terminal. Progress lines are never written to a log file.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

PROGRESS_ENV = "R2S2R_PROGRESS_LINES"
"""Set to ``1`` by a parent that reads a child's progress lines and draws the bars itself."""

PROGRESS_MARK = "@r2s2r-progress "

_ROS_LINE = re.compile(
    r"^\[(DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\](?:\s+\[[0-9.]+\])?\s+\[([^\]]*)\]:\s?(.*)$"
)
# A Python exception's last line or a warnings.warn line ("x.py:3: UserWarning: text").
_PYTHON_PROBLEM = re.compile(r"(^|\s|:\s?)[A-Za-z_.]*(Error|Exception|Warning)(\(.*\))?: ")
# A problem some r2s2r console already formatted: "[node] WARN: text", "[stage] [node] ERROR: ..".
_FORWARDED_PROBLEM = re.compile(r"^(\[[^\]]+\] )*(WARN|ERROR|FATAL): ")
_PROBLEM_LEVELS = frozenset({"WARN", "WARNING", "ERROR", "FATAL"})
_THROTTLE_S = 0.5


@dataclass(frozen=True)
class LogLine:
    """One line of a child's output.

    Attributes:
        level: rcutils severity (``INFO``, ``WARN``, ...) or ``""`` for plain output.
        logger: The ROS logger's name (``""`` for plain output).
        message: The text without the ROS severity, timestamp and logger name.

    """

    level: str
    logger: str
    message: str

    @property
    def problem(self) -> bool:
        """A warning or an error: it reaches the console even when info lines do not."""
        if self.level:
            return self.level in _PROBLEM_LEVELS
        return bool(_FORWARDED_PROBLEM.match(self.message) or _PYTHON_PROBLEM.search(self.message))

    def console_text(self) -> str:
        """Return the message for the console, prefixed with the severity when a problem."""
        if self.level in _PROBLEM_LEVELS:
            return f"{'WARN' if self.level == 'WARNING' else self.level}: {self.message}"
        return self.message


def parse_line(text: str) -> LogLine:
    """Split one line of output (no trailing newline needed) into level, logger and message."""
    line = text.rstrip("\r\n")
    match = _ROS_LINE.match(line)
    if match is None:
        return LogLine("", "", line)
    return LogLine(match[1], match[2], match[3])


@dataclass(frozen=True)
class Progress:
    """One progress update of a stage (see :func:`format_progress`).

    Attributes:
        stage: Stage name (the bar's label).
        done: Units done.
        total: Units in all (None: unknown; the bar shows the elapsed time).
        note: Short text after the bar (rate, yield, the last status line).
        end: The stage's last update: the bar is removed.
        unit: What is counted (``ep``, ``step``, ``trial``).

    """

    stage: str
    done: int
    total: int | None
    note: str = ""
    end: bool = False
    unit: str = "it"


def format_progress(progress: Progress) -> str:
    """Return the progress line a child writes for its parent (one line, no newline)."""
    body = {"stage": progress.stage, "done": progress.done, "total": progress.total}
    if progress.note:
        body["note"] = progress.note
    if progress.end:
        body["end"] = True
    if progress.unit != "it":
        body["unit"] = progress.unit
    return PROGRESS_MARK + json.dumps(body, separators=(",", ":"))


def parse_progress(text: str) -> Progress | None:
    """Read a line written by :func:`format_progress`; None for any other line."""
    line = text.rstrip("\r\n")
    if not line.startswith(PROGRESS_MARK):
        return None
    try:
        body = json.loads(line[len(PROGRESS_MARK) :])
        total = body.get("total")
        return Progress(
            stage=str(body["stage"]),
            done=int(body["done"]),
            total=int(total) if total is not None else None,
            note=str(body.get("note", "")),
            end=bool(body.get("end", False)),
            unit=str(body.get("unit", "it")),
        )
    except (ValueError, KeyError, TypeError):
        return None


def bars_wanted(stream: TextIO, requested: bool = True) -> bool:
    """Return True when bars should be drawn on ``stream``: requested and a terminal."""
    isatty = getattr(stream, "isatty", None)
    return requested and callable(isatty) and bool(isatty())


class ProgressBar:
    """An in-place bar on a terminal (tqdm), removed when closed; a no-op when disabled.

    Args:
        stage: Label (``[stage]`` in front of the bar).
        total: Units in all; None shows elapsed time and the note only.
        stream: The terminal.
        enabled: Draw at all (see :func:`bars_wanted`).
        unit: Unit name after the count.

    """

    def __init__(
        self,
        stage: str,
        total: int | None,
        stream: TextIO,
        enabled: bool,
        unit: str = "it",
    ) -> None:
        self.enabled = enabled
        self._bar: Any = None
        if enabled:
            from tqdm import tqdm

            bar_format = None if total is not None else "{desc} {elapsed}{postfix}"
            self._bar = tqdm(
                total=total,
                desc=f"[{stage}]",
                unit=unit,
                file=stream,
                leave=False,
                dynamic_ncols=True,
                bar_format=bar_format,
            )

    def update(self, done: int, note: str = "") -> None:
        """Show ``done`` units and ``note``."""
        if self._bar is None:
            return
        self._bar.n = done
        self._bar.set_postfix_str(note[:80], refresh=False)
        self._bar.refresh()

    def clear(self) -> None:
        """Take the bar off the line (before another line is written)."""
        if self._bar is not None:
            self._bar.clear()

    def refresh(self) -> None:
        """Draw the bar again (after another line was written)."""
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class Reporter(Protocol):
    """What :func:`progress_reporter` returns."""

    def update(self, done: int, note: str = "") -> None:
        """Report ``done`` units and a note."""

    def close(self) -> None:
        """End the stage's progress."""


class _LineReporter:
    """Writes progress lines for the parent (at most two a second, and always the last)."""

    def __init__(self, stage: str, total: int | None, stream: TextIO, unit: str) -> None:
        self._stage = stage
        self._total = total
        self._stream = stream
        self._unit = unit
        self._last_s = 0.0
        self._pending: Progress | None = None
        self._done = 0
        self._note = ""

    def update(self, done: int, note: str = "") -> None:
        self._pending = Progress(self._stage, done, self._total, note, unit=self._unit)
        self._done, self._note = done, note
        now = time.monotonic()
        if now - self._last_s >= _THROTTLE_S or done == self._total:
            self._flush(now)

    def _flush(self, now: float) -> None:
        if self._pending is not None:
            self._stream.write(format_progress(self._pending) + "\n")
            self._stream.flush()
            self._pending = None
            self._last_s = now

    def close(self) -> None:
        self._pending = Progress(
            self._stage, self._done, self._total, self._note, end=True, unit=self._unit
        )
        self._flush(time.monotonic())


def progress_reporter(
    stage: str,
    total: int | None,
    enabled: bool = True,
    stream: TextIO | None = None,
    unit: str = "it",
) -> Reporter:
    """Return the progress of one stage: a bar, progress lines for a parent, or nothing.

    A bar when ``stream`` (stderr by default) is a terminal; progress lines when the parent asked
    for them (:data:`PROGRESS_ENV`); otherwise a no-op. Nothing at all when not ``enabled``.
    """
    out = stream or sys.stderr
    if enabled and bars_wanted(out):
        return ProgressBar(stage, total, out, True, unit)
    if enabled and os.environ.get(PROGRESS_ENV) == "1":
        return _LineReporter(stage, total, out, unit)
    return ProgressBar(stage, total, out, False, unit)


def duration_text(seconds: float) -> str:
    """Format a stage's wall time for a person: ``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
