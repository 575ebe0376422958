"""A stage that is a command: run it as an owned child, its output to its log file once.

``r2s2r record-demos`` and ``r2s2r ground`` start cell graphs of their own; the pipeline runs
them as child processes (:func:`command_runner`), in a private ROS domain
(:func:`private_ros_environment`) so that two graphs on one machine never answer each other's
services. The command's whole output goes to its log file, once; the console gets only its
warnings and errors (one line each, ``[stage] WARN: text``, no ROS timestamp) and, while it
runs, a progress line with the elapsed time and the command's last line (on a terminal, or
drawn by the parent supervisor, see :mod:`r2s2r_common.console`). On timeout the command's
process group gets SIGINT (a graph shuts down cleanly), then SIGKILL after 20 s; the code is
then ``ExitCode.TIMEOUT`` (124). The command dies with this process
(:func:`r2s2r_common.process.spawn_owned`), and when this process is interrupted while it
runs, its group is stopped first.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

from r2s2r_common.console import PROGRESS_ENV, parse_line, progress_reporter
from r2s2r_common.errors import ExitCode
from r2s2r_common.process import spawn_owned, stop_process_group
from r2s2r_common.ros_domain import private_environment, release_domain

CommandRunner = Callable[[list[str], float, Path], tuple[int, str]]
"""``(command, timeout_s, log_path) -> (exit code, last lines of output)``; 124 on timeout."""

_TAIL_LINES = 15
_STOP_GRACE_S = 20.0
# Log file stem -> the stage its command is (the console's [stage] label).
_STAGE_OF_LOG = {"record_demos": "demos", "demos": "demos", "ground": "grounding"}


def cli_command(*args: str) -> list[str]:
    """Return ``r2s2r ARGS...`` as a command run by this interpreter (and its package paths)."""
    return [sys.executable, "-m", "r2s2r.cli", *args]


def private_ros_environment() -> dict[str, str]:
    """Return a command's environment: a claimed private ROS domain, localhost discovery.

    The demos and grounding steps start a cell graph; on the shared default domain two such
    graphs on one machine (another job, a developer's twin) answer each other's services and
    command each other's arms. The domain is claimed with a lock file
    (:func:`r2s2r_common.ros_domain.claim_domain`), so two jobs on one host never share one;
    the runner releases it when the command ends.
    """
    return private_environment()


def command_runner(
    say: Callable[[str], None],
    progress: bool = True,
    environment: Callable[[], Mapping[str, str]] = private_ros_environment,
) -> CommandRunner:
    """Return a :data:`CommandRunner` running each command in its own process group.

    Args:
        say: Gets the command's warnings and errors, one line each (module docstring).
        progress: Draw the progress line while a command runs.
        environment: Makes each command's environment (default: a private ROS domain).

    Returns:
        The runner; it raises ``FileNotFoundError`` when the executable does not exist.

    """

    def run(command: list[str], timeout_s: float, log_path: Path) -> tuple[int, str]:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        stage = _STAGE_OF_LOG.get(log_path.stem, log_path.stem)
        tail: deque[str] = deque(maxlen=_TAIL_LINES)
        env = {**environment(), "PYTHONUNBUFFERED": "1"}
        env.pop(PROGRESS_ENV, None)  # its output goes to a file: no progress lines in it
        with log_path.open("w", encoding="utf-8") as log:
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            process = spawn_owned(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
            )
            assert process.stdout is not None
            deadline = time.monotonic() + timeout_s
            timed_out = False
            bar = progress_reporter(stage, None, progress)
            last = [""]  # the command's last status line, shown after the elapsed time

            def watchdog() -> None:
                nonlocal timed_out
                while process.poll() is None:
                    if time.monotonic() > deadline:
                        timed_out = True
                        _stop_group(process)
                        return
                    bar.update(0, last[0])
                    time.sleep(1.0)

            guard = threading.Thread(target=watchdog, daemon=True)
            guard.start()
            try:
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    tail.append(line.rstrip())
                    parsed = parse_line(line)
                    if parsed.problem:
                        say(f"[{stage}] {parsed.console_text()}")
                    elif parsed.message.strip():
                        last[0] = parsed.message.strip()
                process.wait()
            except BaseException:
                _stop_group(process)
                raise
            finally:
                guard.join(timeout=2.0)
                bar.close()
                with contextlib.suppress(ValueError):  # the private domain, claimed for it
                    release_domain(int(env.get("ROS_DOMAIN_ID", "")))
        code = ExitCode.TIMEOUT if timed_out else int(process.returncode)
        return code, "\n".join(tail)

    return run


def _stop_group(process: subprocess.Popen[str]) -> None:
    stop_process_group(process, _STOP_GRACE_S, (signal.SIGINT, signal.SIGKILL))
