"""Child processes that die with their parent, by any signal (SIGKILL included).

A runner (the graph supervisor, the evaluation harness, the experiment's and the generation
job's command steps) starts its children with :func:`spawn_owned`:

- each child gets its own process group (so the runner stops them in order: SIGINT, then
  SIGTERM, then SIGKILL, see :func:`stop_process_group`), and
- on Linux, ``PR_SET_PDEATHSIG``: the kernel sends the child SIGTERM the moment the thread
  that started it ends, which for the main thread is the process's death, however it died;
- the child's environment names its owner (:data:`OWNER_PID_ENV`), and every workspace entry
  point (``run_node``, the recorder, the command line) calls :func:`watch_owner`, a thread
  that ends the process when the owner is gone. That covers what PDEATHSIG cannot: children
  started from a thread other than the main one, and platforms without prctl.

ROS-free; only the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

OWNER_PID_ENV = "R2S2R_OWNER_PID"
"""Environment variable holding the pid of the process that owns this one."""

PR_SET_PDEATHSIG = 1
OWNER_POLL_PERIOD_S = 0.25
"""How often :func:`watch_owner` checks that the owner is alive."""

_libc: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _death_signal_preexec(owner_pid: int, death_signal: int) -> Callable[[], None]:
    """Return a pre-exec function: SIGINT default, PDEATHSIG, die at once if the owner died.

    It runs in the forked child before exec; it only calls libc's ``signal`` and ``prctl``
    (looked up beforehand), so it takes no lock another thread of the parent could hold.
    """
    prctl = _libc.prctl
    reset_interrupt = _interrupt_default_preexec()

    def preexec() -> None:
        reset_interrupt()
        prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != owner_pid:  # the owner died between fork and prctl
            os._exit(128 + death_signal)

    return preexec


def _interrupt_default_preexec() -> Callable[[], None]:
    """Return a pre-exec function that gives the child SIGINT's default action.

    An ignored signal stays ignored across exec: an owner started as a background job of a
    script (where the shell ignores SIGINT) would pass that on, and its children would sit out
    the SIGINT that :func:`stop_process_group` sends first, dying only at the next signal,
    seconds later. The children are leaders of their own groups, so the terminal's Ctrl-C does
    not reach them either way; only their owner sends them SIGINT.
    """
    libc_signal = _libc.signal
    sig_dfl = ctypes.c_void_p(0)
    sigint = int(signal.SIGINT)

    def preexec() -> None:
        libc_signal(sigint, sig_dfl)

    return preexec


def spawn_owned(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    text: bool = False,
    cwd: str | Path | None = None,
    death_signal: int = signal.SIGTERM,
) -> subprocess.Popen[Any]:
    """Start ``command`` as a child owned by this process (see the module docstring).

    Args:
        command: Executable and arguments.
        env: Environment (default: this process's); the owner's pid is added.
        stdout: As for :class:`subprocess.Popen`.
        stderr: As for :class:`subprocess.Popen`.
        stdin: As for :class:`subprocess.Popen` (default: no input).
        text: Text mode for the pipes.
        cwd: Working directory.
        death_signal: What the child gets when its owner dies (PDEATHSIG).

    Returns:
        The child, leader of its own process group.

    Raises:
        OSError: The executable cannot be started (e.g. FileNotFoundError).

    """
    owner = os.getpid()
    child_env = dict(os.environ if env is None else env)
    child_env[OWNER_PID_ENV] = str(owner)
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits; only the main thread lives
    # as long as the process. Children started elsewhere rely on watch_owner().
    preexec: Callable[[], None] | None = None
    if _libc is not None:
        preexec = (
            _death_signal_preexec(owner, death_signal)
            if threading.current_thread() is threading.main_thread()
            else _interrupt_default_preexec()
        )
    return subprocess.Popen(
        list(command),
        env=child_env,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        text=text,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=preexec,  # libc signal and prctl only, looked up before the fork
    )


def stop_process_group(
    process: subprocess.Popen[Any],
    grace_s: float = 10.0,
    signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL),
) -> int | None:
    """Stop a child started by :func:`spawn_owned` and its group: each signal, then wait.

    Args:
        process: The child (leader of its group).
        grace_s: Time after each signal before the next one.
        signals: The escalation.

    Returns:
        The child's exit code (None if even the last signal did not end it in time).

    """
    for sig in signals:
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
    # The leader may be gone while others of its group still run.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.poll()


def run_owned(
    command: Sequence[str],
    *,
    timeout_s: float,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    env: Mapping[str, str] | None = None,
    grace_s: float = 20.0,
) -> tuple[int, bool]:
    """Run ``command`` to the end as an owned child (:func:`spawn_owned`), with a time limit.

    On timeout, or when this process is interrupted while waiting (Ctrl-C, SIGTERM raised as
    :class:`~r2s2r_common.errors.Terminated`), the child's group is stopped before returning
    or re-raising.

    Returns:
        ``(exit code, timed out)``.

    Raises:
        OSError: The executable cannot be started.

    """
    process = spawn_owned(command, env=env, stdout=stdout, stderr=stderr)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_process_group(process, grace_s)
        return (process.returncode if process.returncode is not None else -9), True
    except BaseException:
        stop_process_group(process, grace_s)
        raise
    return code, False


def _owner_gone(owner_pid: int, direct_child: bool) -> bool:
    if os.getppid() == owner_pid:
        return False
    if direct_child:
        return True  # re-parented: the owner died
    # The owner is an ancestor further up (the variable was inherited): is it still there?
    try:
        stat = Path(f"/proc/{owner_pid}/stat").read_text()
    except OSError:
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def owner_pid_from_env() -> int | None:
    """Return the owner pid named by :data:`OWNER_PID_ENV` (None when unset or invalid)."""
    text = os.environ.get(OWNER_PID_ENV, "")
    return int(text) if text.isdigit() and int(text) > 1 else None


def watch_owner(
    on_owner_gone: Callable[[], None],
    owner_pid: int | None = None,
    hard_exit_after_s: float = 5.0,
    poll_period_s: float = OWNER_POLL_PERIOD_S,
) -> threading.Thread | None:
    """End this process when its owner dies: call ``on_owner_gone``, then ``os._exit``.

    Args:
        on_owner_gone: Called once (from the watcher thread) when the owner is gone; it should
            start an orderly shutdown (e.g. shut the rclpy context down).
        owner_pid: The owner (default: :data:`OWNER_PID_ENV`; nothing is watched without one).
        hard_exit_after_s: If the process still runs this long after ``on_owner_gone``, it
            exits with code 1 without further clean-up.
        poll_period_s: Check period.

    Returns:
        The (daemon) watcher thread, or None when there is no owner to watch.

    """
    pid = owner_pid if owner_pid is not None else owner_pid_from_env()
    if pid is None or pid == os.getpid():
        return None
    direct_child = os.getppid() == pid

    def watch() -> None:
        while not _owner_gone(pid, direct_child):
            time.sleep(poll_period_s)
        with contextlib.suppress(Exception):
            print(
                f"[r2s2r] owner process {pid} is gone; shutting down (pid {os.getpid()})",
                file=sys.stderr,
                flush=True,
            )
        with contextlib.suppress(Exception):
            on_owner_gone()
        time.sleep(hard_exit_after_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="owner-watch", daemon=True)
    thread.start()
    return thread


def terminate_self() -> None:
    """Send SIGTERM to this process (its handlers do the orderly shutdown)."""
    os.kill(os.getpid(), signal.SIGTERM)
