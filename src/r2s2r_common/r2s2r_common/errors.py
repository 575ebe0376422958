"""The error boundary of every entry point: which exit code an error means, and its one line.

Library code raises typed errors whose message names the thing (file, key, value), what was
expected and what to do. An entry point (the ``r2s2r`` command line) turns each of them into
one line on stderr and an exit code:

- :attr:`ExitCode.BAD_INPUT` (2): the input is wrong and the user can fix it (a file, key,
  value, path or argument): :class:`BadInputError` and its subclasses (``ConfigError`` is one),
  the workspace's own ``ValueError``/``LookupError`` subclasses, and missing or misplaced files;
- :attr:`ExitCode.FAILED` (1): the input was accepted but the run failed (a node died, a cell
  did not answer, the disk filled): :class:`RunFailedError`, the workspace's other errors;
- anything else is a bug: one line naming the exception type, exit 1.

:class:`ExitCode` is every exit code the workspace's commands and nodes end with, one meaning
per number (the table in ``docs/architecture.md`` lists them for users).

With ``R2S2R_DEBUG=1`` (or ``r2s2r --debug``) the traceback is printed as well.

ROS-free and dependency-free, so every package can raise these.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """The exit codes of the workspace's commands and nodes: one meaning per number."""

    OK = 0
    """Done: the command did all it was asked."""

    FAILED = 1
    """The input was accepted but the run failed (a node died, a cell did not answer, the disk
    filled, a bag or dataset is damaged), or a bug (an unexpected error); stderr says which."""

    BAD_INPUT = 2
    """Refused before any work: the input is wrong and the user can fix it (an argument, a
    parameter, a configuration file, a path); stderr names it."""

    NOTHING_DONE = 3
    """The command ran but had nothing to do or produced nothing: no requested generator
    configuration can run here (``r2s2r generate``), no recorded episode was converted
    (``r2s2r record-demos``)."""

    INCOMPLETE = 4
    """Fewer than asked: episodes of a generation run are left without a result (the same
    command again resumes them), or ``record-demos --successes`` recorded fewer successful
    takes than wanted within its attempts."""

    TIMEOUT = 124
    """A stage command ran past its time limit and was stopped (as ``timeout(1)`` reports)."""

    INTERRUPTED = 130
    """Stopped by Ctrl-C (SIGINT); the same command again resumes where it can."""

    TERMINATED = 143
    """Stopped by SIGTERM; the same command again resumes where it can."""


DEBUG_ENV = "R2S2R_DEBUG"
"""Environment variable that makes the command line print tracebacks (any non-empty value
other than ``0``)."""

MAX_LINE_CHARS = 600
"""Longest error line printed; longer messages are cut (values are named, never dumped)."""

_MAX_PARTS = 4

_INPUT_OS_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


class BadInputError(Exception):
    """Marks an error about input the user can fix (exit code 2 at the command line)."""


class RunFailedError(Exception):
    """Marks an error of a run that started and failed (exit code 1 at the command line)."""


class Terminated(SystemExit):
    """Raised in the main thread by a SIGTERM handler so that ``finally`` blocks clean up."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(ExitCode.TERMINATED)
        self.signal_name = signal_name


_stops: list[str] = []  # the signals that asked this process to stop, in order


def request_stop(signal_name: str = "SIGTERM") -> Terminated:
    """Remember that ``signal_name`` asked this process to stop; return the error to raise.

    A signal handler raises the returned :class:`Terminated`. Raised while Python runs a
    finalizer or a weakref callback (garbage collection at any moment), that exception is
    printed as "ignored" and lost; :func:`raise_if_stop_requested` raises it again.
    """
    _stops.append(signal_name)
    return Terminated(signal_name)


def raise_if_stop_requested() -> None:
    """Raise :class:`Terminated` if a stop was requested (:func:`request_stop`).

    Long loops (a training step, a finished generation job or evaluation trial, a stage's
    start) call it, so a stop whose exception was lost still ends the run within one step.
    Outside the main thread (where the handler raises) it does nothing.
    """
    if _stops and threading.current_thread() is threading.main_thread():
        raise Terminated(_stops[0])


@contextlib.contextmanager
def sigterm_as_flag() -> Iterator[threading.Event]:
    """While inside, SIGTERM sets the yielded event instead of raising :class:`Terminated`.

    For loops that spend their time inside C extensions (rclpy's executor): an exception raised
    by a signal handler there comes out as another error (pybind11 turns it into a
    RuntimeError), so the loop checks the event and the caller raises :class:`Terminated` once
    it is back in plain Python. Outside the main thread it only yields an unset event.
    """
    event = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def handler(_signum: int, _frame: Any) -> None:
        event.set()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield event
    finally:
        signal.signal(signal.SIGTERM, previous)


def debug_enabled() -> bool:
    """Whether tracebacks are wanted (``R2S2R_DEBUG`` set to a value other than 0)."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _is_workspace_error(error: BaseException) -> bool:
    return any(cls.__module__.split(".")[0].startswith("r2s2r") for cls in type(error).__mro__)


def exit_code_for(error: BaseException) -> int | None:
    """Exit code an error stands for, or None for an unexpected one (a bug).

    Args:
        error: The exception that reached the entry point.

    Returns:
        2 (bad input), 1 (failed run) or None (not an error the workspace raises on purpose).

    """
    if isinstance(error, BadInputError):
        return ExitCode.BAD_INPUT
    if isinstance(error, RunFailedError):
        return ExitCode.FAILED
    if _is_workspace_error(error):
        return (
            ExitCode.BAD_INPUT if isinstance(error, ValueError | LookupError) else ExitCode.FAILED
        )
    if isinstance(error, _INPUT_OS_ERRORS):
        return ExitCode.BAD_INPUT
    if type(error).__name__ == "ValidationError" and isinstance(error, ValueError):
        return ExitCode.BAD_INPUT  # pydantic: a value given to a schema
    if isinstance(error, OSError):
        return ExitCode.FAILED  # disk full, I/O error: the run failed, the input may be fine
    return None


def _unbullet(line: str) -> str:
    text = line.strip()
    return text[2:].strip() if text.startswith("- ") else text


def one_line(message: str) -> str:
    """Fold a (possibly multi-line) message into one line of at most :data:`MAX_LINE_CHARS`.

    Lines are joined with ``; ``; beyond the first few, the rest are counted, not shown.
    """
    parts = [_unbullet(line) for line in str(message).splitlines() if _unbullet(line)]
    if not parts:
        return ""
    shown = parts[:_MAX_PARTS]
    text = "; ".join(shown)
    if len(parts) > _MAX_PARTS:
        text += f"; and {len(parts) - _MAX_PARTS} more"
    if len(text) > MAX_LINE_CHARS:
        text = text[: MAX_LINE_CHARS - 5].rstrip() + " ..."
    return text


def describe(error: BaseException) -> tuple[int, str]:
    """Exit code and the one line to print for an error that reached an entry point.

    Returns:
        ``(exit code, line)``; an unexpected error gets exit code 1 and a line naming its type
        and how to see the traceback.

    """
    code = exit_code_for(error)
    text = one_line(str(error)) or type(error).__name__
    if code is None:
        hint = "" if debug_enabled() else f" (run with {DEBUG_ENV}=1 or --debug for the traceback)"
        return ExitCode.FAILED, f"internal error: {type(error).__name__}: {text}{hint}"
    if isinstance(error, FileNotFoundError) and error.filename and str(error.filename) not in text:
        text = f"{error.filename}: {text}"
    return code, text
