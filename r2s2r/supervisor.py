"""Run a resolved graph as supervised child processes (``r2s2r launch`` without ``ros2 launch``).

Each node runs in its own process group with its whole output written, once, to a per-node log
file in one log folder (named on the console in one line). What reaches the console is the node's
``console`` setting (``config/graphs``): by default only its warnings and errors, one line each,
``[node] WARN: text`` without the ROS timestamp; ``all`` shows every line so (``r2s2r launch
--verbose`` does that for every node); ``plain`` shows the lines as they are, for a node whose
output is the job's (the main job's stage list, progress and table). A node that reports progress
lines (:mod:`r2s2r_common.console`) gets its bars drawn here when the console is a terminal.

Ctrl-C (SIGINT) or SIGTERM is forwarded to every child; children still alive after a grace
period get SIGTERM, then SIGKILL. When a required node exits the whole graph stops: with exit
code 0 if it ended cleanly (a finished job), or 1 with the node named if it failed.

The nodes die with the supervisor's process however it ends, SIGKILL included: they are started
by :func:`r2s2r_common.process.spawn_owned` (the kernel's parent-death signal, and an owner
check in every node's runner), so nothing of a graph outlives the command that started it.

A node the kernel holds stopped (SIGSTOP, a debugger) says nothing of itself, not even on
``/diagnostics``: a watch thread reads every node's process state and names a node stopped for
a second on the console, again every 10 s while it stays so, and once when it runs again
(:mod:`r2s2r.freeze_watch`). On shutdown each signal is followed by SIGCONT, so a stopped node
handles it (a policy node sends its final hold) instead of waiting to be killed.

This is the one process supervisor of the workspace: ``r2s2r launch``, the graphs a verb starts
for the duration of its work (:func:`running_graph`: ``r2s2r ground --launch``, the
``record_demos`` graph of ``r2s2r record-demos``, the ``evaluate`` graph of ``r2s2r evaluate``)
all run their nodes through :class:`GraphSupervisor`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

from r2s2r_common.console import (
    PROGRESS_ENV,
    LogLine,
    Progress,
    ProgressBar,
    bars_wanted,
    parse_line,
    parse_progress,
)
from r2s2r_common.process import spawn_owned
from r2s2r_common.ros_domain import apply_discovery
from r2s2r_world.grounding import check_artifact_arguments

from r2s2r.domain_guard import check_no_cell_running, starts_a_cell
from r2s2r.freeze_watch import FreezeWatch, FreezeWatchConfig, process_state
from r2s2r.graph import (
    ConsoleMode,
    GraphError,
    ResolvedNode,
    load_graph,
    parse_launch_arguments,
    resolve_graph,
)

# Seconds a node gets to stop after SIGINT before SIGTERM, and again before SIGKILL (the same
# under `ros2 launch`: the launch files give it as sigterm/sigkill timeouts).
DEFAULT_GRACE_PERIOD_S = 10.0


def find_executable(package: str, executable: str) -> Path:
    """Locate ``lib/<package>/<executable>`` through the ament index (AMENT_PREFIX_PATH).

    Raises:
        GraphError: If the package is not installed or has no such executable.

    """
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        marker = Path(prefix) / "share" / "ament_index" / "resource_index" / "packages" / package
        if marker.exists():
            candidate = Path(prefix) / "lib" / package / executable
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
            raise GraphError(
                f"package '{package}' has no executable '{executable}' "
                f"(looked in {candidate.parent})"
            )
    raise GraphError(
        f"package '{package}' not found on AMENT_PREFIX_PATH; build the workspace "
        "(scripts/setup.sh) and source scripts/env.sh"
    )


@dataclass
class _Child:
    node: ResolvedNode
    process: subprocess.Popen[bytes]
    log_path: Path
    pump: threading.Thread


class GraphSupervisor:
    """Starts the nodes of a graph, watches them and shuts them all down on exit."""

    def __init__(
        self,
        nodes: list[ResolvedNode],
        log_dir: Path,
        grace_period_s: float = DEFAULT_GRACE_PERIOD_S,
        console: TextIO | None = None,
        verbose: bool = False,
        progress: bool = True,
        env: Mapping[str, str] | None = None,
        check_cell: bool = True,
        freeze_watch: FreezeWatchConfig | None = None,
    ) -> None:
        """Prepare (but do not start) the graph.

        Args:
            nodes: Resolved nodes, started in order.
            log_dir: Folder for one ``<node>.log`` per node.
            grace_period_s: Time a child gets after SIGINT before SIGTERM, and again before
                SIGKILL.
            console: Where node output (as each node's ``console`` setting says) and supervisor
                messages go (stdout if None).
            verbose: Show every line of every node (``all`` for nodes set to ``problems``).
            progress: Draw the nodes' progress bars (only ever on a terminal).
            env: Variables set for the nodes on top of this process's environment (e.g. a
                private ``ROS_DOMAIN_ID``). Discovery is localhost-only unless ``env`` sets
                ``ROS_AUTOMATIC_DISCOVERY_RANGE`` or ``R2S2R_ROS_DISCOVERY`` opens it
                (:mod:`r2s2r_common.ros_domain`).
            check_cell: Before a graph that brings its own cell (the real twin) starts, refuse
                when a cell already publishes ``/joint_states`` in its domain
                (:mod:`r2s2r.domain_guard`).
            freeze_watch: When a stopped node is named on the console
                (:class:`r2s2r.freeze_watch.FreezeWatchConfig`; None: its defaults).

        """
        self._nodes = nodes
        self._env = dict(env or {})
        self._check_cell = check_cell
        self._log_dir = log_dir
        self._grace_period_s = grace_period_s
        self._console = console or sys.stdout
        self._verbose = verbose
        self._bars_enabled = bars_wanted(self._console, progress)
        self._bars: dict[tuple[str, str], ProgressBar] = {}
        self._children: list[_Child] = []
        self._stop_requested = threading.Event()
        self._console_lock = threading.Lock()
        self._freeze_watch = freeze_watch or FreezeWatchConfig()
        self._watch_done = threading.Event()
        self._watch_thread: threading.Thread | None = None

    def say(self, text: str) -> None:
        """Print a supervisor message."""
        self._write(f"[r2s2r launch] {text}")

    def _write(self, text: str) -> None:
        with self._console_lock:
            for bar in self._bars.values():
                bar.clear()
            self._console.write(text + "\n")
            for bar in self._bars.values():
                bar.refresh()
            self._console.flush()

    def _mode(self, node: ResolvedNode) -> ConsoleMode:
        return "all" if self._verbose and node.console == "problems" else node.console

    def _show(self, name: str, mode: ConsoleMode, line: LogLine) -> None:
        if mode == "plain":
            self._write(line.console_text())
        elif mode == "all" or line.problem:
            self._write(f"[{name}] {line.console_text()}")

    def _draw(self, name: str, progress: Progress) -> None:
        if not self._bars_enabled:
            return
        key = (name, progress.stage)
        with self._console_lock:
            bar = self._bars.get(key)
            if bar is None:
                bar = self._bars[key] = ProgressBar(
                    progress.stage, progress.total, self._console, True, progress.unit
                )
            bar.update(progress.done, progress.note)
            if progress.end:
                self._bars.pop(key).close()

    def _close_bars(self, name: str) -> None:
        with self._console_lock:
            for key in [k for k in self._bars if k[0] == name]:
                self._bars.pop(key).close()

    def _pump(self, node: ResolvedNode, stream: IO[bytes], log_file: IO[bytes]) -> None:
        mode = self._mode(node)
        for raw in iter(stream.readline, b""):
            text = raw.decode(errors="replace")
            progress = parse_progress(text)
            if progress is not None:  # drawn, never logged
                self._draw(node.name, progress)
                continue
            log_file.write(raw)
            log_file.flush()
            if text.strip():
                self._show(node.name, mode, parse_line(text))
        self._close_bars(node.name)
        log_file.close()

    def start(self) -> None:
        """Start every node.

        Raises:
            GraphError: If an executable is missing (nothing is left running).
            r2s2r.domain_guard.CellAlreadyRunningError: The graph brings its own cell and one
                already runs in its domain (nothing is started).

        """
        commands = [
            (node, [str(find_executable(node.package, node.executable)), *node.ros_arguments()])
            for node in self._nodes
        ]
        env = {**os.environ, **self._env, "PYTHONUNBUFFERED": "1"}
        if "ROS_AUTOMATIC_DISCOVERY_RANGE" not in self._env:
            apply_discovery(env)  # localhost-only unless R2S2R_ROS_DISCOVERY opens it
        if self._check_cell and starts_a_cell(self._nodes):
            check_no_cell_running(env)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        env.pop(PROGRESS_ENV, None)
        if self._bars_enabled:
            env[PROGRESS_ENV] = "1"  # the nodes' bars are drawn here
            # Tables printed by a node fit this terminal (its own output is a pipe).
            env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
        for node, command in commands:
            log_path = self._log_dir / f"{node.name}.log"
            log_file = log_path.open("wb")
            log_file.write(("$ " + " ".join(command) + "\n").encode())
            process = spawn_owned(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
            )
            log_file.write(f"# pid {process.pid}\n".encode())
            log_file.flush()
            assert process.stdout is not None
            pump = threading.Thread(
                target=self._pump, args=(node, process.stdout, log_file), daemon=True
            )
            pump.start()
            self._children.append(_Child(node, process, log_path, pump))
        started = ", ".join(f"{c.node.name} (pid {c.process.pid})" for c in self._children)
        self.say(f"started {started}; logs in {self._log_dir}")
        self._watch_done.clear()
        self._watch_thread = threading.Thread(
            target=self._watch_stopped_nodes, name="freeze_watch", daemon=True
        )
        self._watch_thread.start()

    def _watch_stopped_nodes(self) -> None:
        """Name the nodes the kernel holds stopped (see :mod:`r2s2r.freeze_watch`)."""
        watch = FreezeWatch(self._freeze_watch)
        while not self._watch_done.wait(self._freeze_watch.poll_period_s):
            now_s = time.monotonic()
            for child in list(self._children):
                pid = child.process.pid
                # Once reaped, the pid may be another process's.
                state = process_state(pid) if child.process.returncode is None else None
                line = watch.sample(child.node.name, pid, state, now_s)
                if line is not None:
                    self.say(line)

    def dead_node(self) -> str | None:
        """Describe the first node that exited (code, log, its last lines), else None."""
        for child in self._children:
            code = child.process.poll()
            if code is not None:
                return (
                    f"{child.node.name} exited with code {code} (log: {child.log_path}; "
                    f"last lines: {log_tail(child.log_path)})"
                )
        return None

    def pid(self, name: str) -> int | None:
        """Process id of node ``name`` (None: no such node was started)."""
        for child in self._children:
            if child.node.name == name:
                return child.process.pid
        return None

    def request_stop(self) -> None:
        """Ask the supervisor loop to shut the graph down (signal-handler safe)."""
        self._stop_requested.set()

    def wait(self, poll_period_s: float = 0.1) -> int:
        """Watch the children until a required node exits or a stop is requested.

        Returns:
            0 after a requested stop or a clean exit of a required node; 1 if a required node
            failed (its name, exit code and log are printed).

        """
        exit_code = 0
        running = {child.node.name for child in self._children}
        while not self._stop_requested.is_set():
            for child in self._children:
                code = child.process.poll()
                if code is None or child.node.name not in running:
                    continue
                running.discard(child.node.name)
                child.pump.join(timeout=2.0)
                if child.node.required:
                    if code == 0:
                        self.say(f"required node '{child.node.name}' finished; stopping the graph")
                    else:
                        # Its last log line is the reason (a node's refusal is one line).
                        reason = log_tail(child.log_path, 1)
                        self.say(
                            f"ERROR: required node '{child.node.name}' died with exit code {code} "
                            f"(log: {child.log_path}); stopping the graph"
                            + (f"\n  {child.node.name}: {reason}" if reason else "")
                        )
                        exit_code = 1
                    self._stop_requested.set()
                    break
                self.say(f"WARN: node '{child.node.name}' exited with code {code} (not required)")
            if not running:
                break
            self._stop_requested.wait(poll_period_s)
        self.shutdown()
        return exit_code

    def shutdown(self) -> None:
        """Stop every child: SIGINT, then SIGTERM, then SIGKILL, each after the grace period.

        SIGCONT follows SIGINT and SIGTERM: a stopped node handles them (its own clean stop)
        instead of sitting out both grace periods until SIGKILL.
        """
        self._watch_done.set()
        if self._watch_thread is not None:
            self._watch_thread.join(timeout=2.0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [c for c in self._children if c.process.poll() is None]
            if not alive:
                break
            for child in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, sig)
                    if sig != signal.SIGKILL:
                        os.killpg(child.process.pid, signal.SIGCONT)
            deadline = time.monotonic() + self._grace_period_s
            for child in alive:
                try:
                    child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"WARN: {child.node.name} did not stop on {sig.name}")
        for child in self._children:
            child.pump.join(timeout=2.0)
        codes = ", ".join(f"{c.node.name}={c.process.returncode}" for c in self._children)
        self.say(f"all nodes stopped ({codes})")


def log_tail(path: Path, lines: int = 3) -> str:
    """Return the last non-empty lines of a log file, joined by ' | ' ('' if unreadable)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    kept = [line.strip() for line in text if line.strip() and not line.startswith(("$ ", "# pid"))]
    return " | ".join(kept[-lines:])[-600:]


@contextlib.contextmanager
def running_graph(
    graph: str,
    arguments: Mapping[str, str] | list[str],
    log_dir: Path,
    grace_period_s: float = DEFAULT_GRACE_PERIOD_S,
    console: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[GraphSupervisor]:
    """Run a graph of ``config/graphs`` (or a graph file) for the duration of the block.

    Args:
        graph: Graph name or YAML path.
        arguments: Launch arguments, as a mapping or as ``NAME:=VALUE`` tokens.
        log_dir: Folder of the per-node logs.
        grace_period_s: See :class:`GraphSupervisor`.
        console: Where the supervisor's lines and the nodes' problems go (stdout if None).
        env: Extra environment of the nodes (see :class:`GraphSupervisor`).

    Yields:
        The started supervisor (``dead_node`` tells whether a node has exited); every node is
        stopped when the block ends, however it ends.

    Raises:
        GraphError: Unknown graph, a bad launch argument or a missing executable (nothing is
            left running).
        r2s2r_common.config.ConfigError: A grounding artifact argument names a bad artifact.

    """
    values = parse_launch_arguments(arguments) if isinstance(arguments, list) else dict(arguments)
    nodes = resolve_graph(load_graph(graph), values)
    check_artifact_arguments(values)
    supervisor = GraphSupervisor(nodes, log_dir, grace_period_s, console=console, env=env)
    supervisor.start()
    try:
        yield supervisor
    finally:
        supervisor.shutdown()


def default_log_dir(graph_name: str) -> Path:
    """``runs/logs/<graph>-<timestamp>`` under the current directory (or R2S2R_LOG_DIR)."""
    root = Path(os.environ.get("R2S2R_LOG_DIR", Path.cwd() / "runs" / "logs"))
    return root / f"{graph_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_graph(
    nodes: list[ResolvedNode],
    log_dir: Path,
    grace_period_s: float = DEFAULT_GRACE_PERIOD_S,
    verbose: bool = False,
    progress: bool = True,
) -> int:
    """Start the graph, install SIGINT/SIGTERM handlers that stop it, and wait for the end.

    ``verbose`` and ``progress`` are :class:`GraphSupervisor`'s.
    """
    supervisor = GraphSupervisor(nodes, log_dir, grace_period_s, verbose=verbose, progress=progress)
    previous = {
        sig: signal.signal(sig, lambda *_: supervisor.request_stop())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        supervisor.start()
        return supervisor.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
