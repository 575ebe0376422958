"""The launch files under the real ``launch``/``launch_ros`` (Jazzy), run as ``ros2 launch`` runs.

Each case starts ``ros2 launch r2s2r <graph>.launch.py ARGS`` (the ``ros2`` command when it is
on PATH, else this script's ``--serve`` mode, which does what ``ros2 launch`` does: the
package's launch file included into a ``launch.LaunchService`` with the arguments as argv)
with the real twin, and checks it from outside, over DDS and the process table:

* ``real_deploy`` for ~30 s (then SIGINT to the launch process alone), and again with
  ``record:=true`` (then Ctrl-C as a terminal sends it: SIGINT to the whole process group):
  every node of the graph still running at the end, ``/joint_states``, ``/belt/speed`` and
  ``/objects/tracks`` flowing, every parameter override in the running nodes of the type and
  value ``r2s2r launch`` gives (read back with the parameter services), and after the signal
  every process of the launch gone and exit code 0; and with ``policy:=true`` and an untrained
  32 px checkpoint: the same, plus chunk trajectories flowing on
  ``/arm_controller/joint_trajectory`` and ``/hand_controller/joint_trajectory``;
* ``record_demos trials:=1`` and ``sim_generate episodes:=1 workers:=1``: the job finishes by
  itself (required node exits 0: the launch shuts down, exit code 0, its output on disk);
* ``sim_generate`` with more episodes for ~30 s, then Ctrl-C: the node and all the worker
  processes it started are gone;
* a required node that dies (``real_twin`` with an invalid twin file): the launch stops every
  node and exits 1, naming the node;
* bad input (argument outside its choices, missing file, unknown argument, a value of the wrong
  type, a graph whose parameter file is missing): ``ros2 launch`` exits non-zero before any node
  starts, printing the same one-line message ``r2s2r launch`` prints for the same input.

The first ``sim_generate`` run in a fresh work folder records MimicGen's demonstrations and
grounds the twin first (about 7 minutes here; cached in WORK/runs/ afterwards).

Set-up (test-only; everything outside the repository, nothing into .venv or the repo). The
sources are the ``jazzy`` branches of ros2/launch, ros2/launch_ros, ros2/rcl_interfaces (for
``composition_interfaces``, which launch_ros imports and which has no wheel: built with the
workspace's rosidl toolchain) and ros2/ros2cli (for the ``ros2`` command itself)::

    source scripts/env.sh
    mkdir -p /tmp/ros2_launch_src && cd /tmp/ros2_launch_src
    for repo in launch launch_ros rcl_interfaces ros2cli; do
      git clone --depth 1 --branch jazzy https://github.com/ros2/$repo.git
    done
    colcon --log-base /tmp/ros2_launch_src/log build \\
      --base-paths rcl_interfaces/composition_interfaces \\
      --build-base /tmp/ros2_launch_src/build --install-base /tmp/ros2_launch --merge-install \\
      --cmake-args -DPython3_EXECUTABLE="$(command -v python)" -DBUILD_TESTING=OFF
    pip install --no-deps --prefix /tmp/ros2_launch launch/launch launch_ros/launch_ros \\
      launch_ros/ros2launch ros2cli/ros2cli ros2cli/ros2pkg osrf-pycommon==2.0.2
    cd -   # back to the repository root

and in the shell that runs the check (lark and PyYAML come from the workspace's .venv)::

    source scripts/env.sh && source /tmp/ros2_launch/local_setup.bash
    export PYTHONPATH=/tmp/ros2_launch/lib/python3.11/site-packages:$PYTHONPATH
    export PATH=/tmp/ros2_launch/bin:$PATH
    python bench/check_ros2_launch.py [--duration 30] [--cases real_deploy,bad_input,...]

Without ``launch``/``launch_ros`` importable it says so and exits 2. In docker/ (ROS 2 Jazzy)
they are installed: ``python3 bench/check_ros2_launch.py`` there.
The last line is one JSON object: {"benchmark": "check_ros2_launch", "figures": [...]}.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchlib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "r2s2r"
TOPICS = ("/joint_states", "/belt/speed", "/objects/tracks")
COMMAND_TOPICS = ("/arm_controller/joint_trajectory", "/hand_controller/joint_trajectory")
STARTUP_TIMEOUT_S = 120.0


def serve(launch_file: str, arguments: list[str]) -> int:
    """Do what ``ros2 launch r2s2r LAUNCH_FILE ARGS`` does, without the ``ros2`` command."""
    try:
        from ros2launch.api import get_share_file_path_from_package, launch_a_launch_file
    except ImportError:
        from ament_index_python.packages import get_package_share_directory
        from launch.actions import IncludeLaunchDescription
        from launch.launch_description_sources import AnyLaunchDescriptionSource

        from launch import LaunchDescription, LaunchService

        path = str(Path(get_package_share_directory(PACKAGE)) / "launch" / launch_file)
        if Path(launch_file).is_file():
            path = launch_file
        service = LaunchService(argv=arguments)
        given = [tuple(a.split(":=", 1)) for a in arguments]
        service.include_launch_description(
            LaunchDescription(
                [IncludeLaunchDescription(AnyLaunchDescriptionSource(path), launch_arguments=given)]
            )
        )
        return int(service.run())
    path = (
        launch_file
        if Path(launch_file).is_file()
        else get_share_file_path_from_package(package_name=PACKAGE, file_name=launch_file)
    )
    return int(launch_a_launch_file(launch_file_path=path, launch_file_arguments=arguments))


@functools.cache
def ros2_launch_available() -> str | None:
    """The ``ros2`` command if it is on PATH and has the ``launch`` verb."""
    ros2 = shutil.which("ros2")
    if ros2 is None:
        return None
    probe = subprocess.run([ros2, "launch", "--help"], capture_output=True, timeout=60)
    return ros2 if probe.returncode == 0 else None


def launch_command(launch_file: str, arguments: list[str]) -> list[str]:
    """Return the command line that launches LAUNCH_FILE: ``ros2 launch`` when available."""
    ros2 = ros2_launch_available()
    if ros2 is not None:
        target = [launch_file] if Path(launch_file).is_file() else [PACKAGE, launch_file]
        return [ros2, "launch", *target, *arguments]
    return [sys.executable, str(Path(__file__).resolve()), "--serve", launch_file, *arguments]


# ---------------------------------------------------------------------------------------------
# Processes.


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, None if gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Live descendants of ``root``: pid -> start time (so a reused pid is not mistaken)."""
    parents: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None:
                parents.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: dict[int, int] = {}
    stack = [root]
    while stack:
        for pid, started in parents.get(stack.pop(), []):
            found[pid] = started
            stack.append(pid)
    return found


def still_alive(processes: dict[int, int]) -> list[int]:
    """The pids of ``processes`` that still run (same start time)."""
    return [pid for pid, started in processes.items() if (_proc_stat(pid) or (0, -1))[1] == started]


def cmdline(pid: int) -> str:
    """A process's command line ('' if gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Launch:
    """One ``ros2 launch`` run in its own process group, its output in a log file."""

    def __init__(self, launch_file: str, arguments: list[str], log_path: Path, cwd: Path):
        """Start it."""
        self.command = launch_command(launch_file, arguments)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.started_s = time.monotonic()

    def output(self) -> str:
        """Everything it printed so far."""
        return self.log_path.read_text(errors="replace")

    def node_processes(self) -> dict[str, int]:
        """Graph node name -> pid of the launch's child processes started for nodes."""
        nodes = {}
        for pid in descendants(self.process.pid):
            match = re.search(r"__node:=(\w+)", cmdline(pid))
            if match and "--ros-args" in cmdline(pid):
                nodes.setdefault(match.group(1), pid)
        return nodes

    def wait(self, timeout_s: float) -> int | None:
        """Exit code, or None if still running after ``timeout_s``."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Make sure nothing of it is left (cleanup only)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in still_alive(descendants(self.process.pid)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._log.close()


# ---------------------------------------------------------------------------------------------
# Observing the graph over DDS.


class Observer:
    """A ROS node of this process: counts topic messages, lists nodes, reads parameters."""

    def __init__(self) -> None:
        """Start it (rclpy must be initialized) and spin it on a background thread."""
        from geometry_msgs.msg import TwistStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        from r2s2r_interfaces.msg import ObjectTrackArray

        self.node = Node(f"check_ros2_launch_{os.getpid()}")
        self._lock = threading.Lock()
        from trajectory_msgs.msg import JointTrajectory

        topics = TOPICS + COMMAND_TOPICS
        self._stamps: dict[str, list[float]] = {topic: [] for topic in topics}
        for topic, message in zip(
            topics,
            (JointState, TwistStamped, ObjectTrackArray, JointTrajectory, JointTrajectory),
            strict=True,
        ):
            self.node.create_subscription(
                message, topic, self._counter(topic), qos_profile_sensor_data
            )
        self._parameter_clients: dict[str, Any] = {}
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _counter(self, topic: str) -> Callable[[Any], None]:
        def count(_: Any) -> None:
            with self._lock:
                self._stamps[topic].append(time.monotonic())

        return count

    def reset(self) -> None:
        """Forget the messages counted so far."""
        with self._lock:
            for stamps in self._stamps.values():
                stamps.clear()

    def counts(self, topics: tuple[str, ...]) -> dict[str, int]:
        """Per topic: messages since the last reset."""
        with self._lock:
            return {topic: len(self._stamps[topic]) for topic in topics}

    def rates(self, window_s: float) -> dict[str, tuple[int, float]]:
        """Per topic: messages in the last ``window_s`` seconds and their rate (Hz)."""
        now = time.monotonic()
        with self._lock:
            counts = {
                t: sum(1 for s in stamps if s >= now - window_s)
                for t, stamps in self._stamps.items()
            }
        return {topic: (count, count / window_s) for topic, count in counts.items()}

    def node_names(self) -> set[str]:
        """Names of the nodes seen on the graph."""
        return {name for name, _ in self.node.get_node_names_and_namespaces()}

    def parameters(self, node_name: str, names: list[str], timeout_s: float = 10.0) -> dict:
        """Current values of ``names`` on node ``node_name`` (Python-typed)."""
        from rclpy.parameter import parameter_value_to_python
        from rclpy.parameter_client import AsyncParameterClient

        if node_name not in self._parameter_clients:
            self._parameter_clients[node_name] = AsyncParameterClient(self.node, node_name)
        client = self._parameter_clients[node_name]
        if not client.wait_for_services(timeout_sec=timeout_s):
            raise RuntimeError(f"{node_name}: parameter services not available")
        future = client.get_parameters(names)
        deadline = time.monotonic() + timeout_s
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not future.done() or future.result() is None:
            raise RuntimeError(f"{node_name}: get_parameters timed out")
        values = future.result().values
        return {n: parameter_value_to_python(v) for n, v in zip(names, values, strict=True)}

    def close(self) -> None:
        """Stop spinning and destroy the node."""
        self._executor.shutdown()
        self._thread.join(timeout=5.0)
        self.node.destroy_node()


# ---------------------------------------------------------------------------------------------
# Cases.


@dataclass
class Result:
    """The outcome of one case, one table row."""

    case: str
    ok: bool = False
    detail: list[str] = field(default_factory=list)
    figures: dict[str, float] = field(default_factory=dict)

    def check(self, condition: bool, what: str) -> bool:
        """Record a check (its description is kept when it fails)."""
        if not condition:
            self.detail.append(f"FAILED: {what}")
        return condition


def expected_nodes(graph: str, arguments: list[str]) -> list[Any]:
    """What ``r2s2r launch`` starts for these arguments (the supervisor's input)."""
    from r2s2r.graph import load_graph, parse_launch_arguments, resolve_graph

    return resolve_graph(load_graph(graph), parse_launch_arguments(arguments))


def compare_parameters(observer: Observer, nodes: list[Any], result: Result) -> None:
    """Every override of the running nodes has the type and value r2s2r launch gives."""
    checked = 0
    for node in nodes:
        if not node.parameter_overrides:
            continue
        names = list(node.parameter_overrides)
        try:
            live = observer.parameters(node.name, names)
        except RuntimeError as error:
            result.check(False, str(error))
            continue
        for name in names:
            want = node.parameter_overrides[name]
            got = live[name]
            checked += 1
            result.check(
                type(got) is type(want) and got == want,
                f"{node.name}.{name}: running {got!r} ({type(got).__name__}), "
                f"r2s2r launch gives {want!r} ({type(want).__name__})",
            )
    result.figures["parameters_checked"] = checked
    result.detail.append(f"{checked} parameter overrides read back: type and value as r2s2r launch")


def stop_and_check(launch: Launch, how: str, result: Result, timeout_s: float = 60.0) -> None:
    """Send SIGINT (to the launch process, or to its group as Ctrl-C does), check all stop."""
    processes = descendants(launch.process.pid)
    sent = time.monotonic()
    if how == "group":
        os.killpg(launch.process.pid, signal.SIGINT)
    else:
        os.kill(launch.process.pid, signal.SIGINT)
    code = launch.wait(timeout_s)
    stop_s = time.monotonic() - sent
    result.figures["stop_s"] = round(stop_s, 1)
    result.check(code is not None, f"launch still running {timeout_s:.0f} s after SIGINT")
    time.sleep(1.0)
    left = still_alive(processes)
    result.check(not left, f"processes left after the stop: {[cmdline(p)[:80] for p in left]}")
    result.check(code == 0, f"exit code {code} after SIGINT (expected 0)")
    target = "the process group (Ctrl-C)" if how == "group" else "the launch process"
    result.detail.append(
        f"SIGINT to {target}: {len(processes)} processes, {len(left)} left, exit {code} "
        f"after {stop_s:.1f} s"
    )


def wait_for_nodes(launch: Launch, names: list[str], timeout_s: float) -> bool:
    """Wait until a process runs for each node name."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if set(names) <= set(launch.node_processes()):
            return True
        if launch.process.poll() is not None:
            return False
        time.sleep(0.5)
    return False


def run_for(
    name: str,
    graph: str,
    arguments: list[str],
    duration_s: float,
    stop: str,
    topics: tuple[str, ...],
    work: Path,
    observer: Observer,
) -> Result:
    """Launch, check nodes/topics/parameters after ``duration_s``, stop with SIGINT."""
    result = Result(name)
    nodes = expected_nodes(graph, arguments)
    names = [n.name for n in nodes]
    launch = Launch(f"{graph}.launch.py", arguments, work / "logs" / f"{name}.log", work)
    result.detail.append("$ " + " ".join(launch.command))
    try:
        observer.reset()
        if not result.check(
            wait_for_nodes(launch, names, STARTUP_TIMEOUT_S), f"node processes {names} started"
        ):
            return result
        # Up = every node on the ROS graph and a first message on every topic; then it runs
        # for `duration_s` (start-up takes 10-40 s here, depending on the machine's load).
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and launch.process.poll() is None:
            flowing = all(count > 0 for count in observer.counts(topics).values())
            if set(names) <= observer.node_names() and flowing:
                break
            time.sleep(0.5)
        startup_s = time.monotonic() - launch.started_s
        result.figures["startup_s"] = round(startup_s, 1)
        time.sleep(duration_s)
        running = launch.node_processes()  # live processes only
        alive = [n for n in names if n in running]
        seen = observer.node_names()
        elapsed = time.monotonic() - launch.started_s
        result.figures["up_s"] = round(elapsed - startup_s, 1)
        result.check(launch.process.poll() is None, "launch still running")
        result.check(alive == names, f"node processes up at {elapsed:.0f} s: {alive} of {names}")
        result.check(set(names) <= seen, f"nodes on the ROS graph: {sorted(set(names) & seen)}")
        result.detail.append(
            f"started in {startup_s:.0f} s; after {elapsed - startup_s:.0f} s more, up: "
            f"{', '.join(alive)} (processes and ROS graph)"
        )
        window_s = 10.0
        rates = observer.rates(window_s)
        for topic in topics:
            count, rate_hz = rates[topic]
            result.figures[f"{topic}_hz"] = round(rate_hz, 1)
            result.check(count > 0, f"{topic} flowing (no message in the last {window_s:.0f} s)")
        result.detail.append(
            "topics over the last 10 s: " + ", ".join(f"{t} {rates[t][1]:.1f} Hz" for t in topics)
        )
        compare_parameters(observer, nodes, result)
        stop_and_check(launch, stop, result)
    finally:
        launch.kill()
    result.ok = not any(line.startswith("FAILED") for line in result.detail)
    return result


def run_to_end(
    name: str,
    graph: str,
    arguments: list[str],
    timeout_s: float,
    expect_code: int,
    expect_text: str,
    work: Path,
    check_output: Callable[[Result], None] | None = None,
) -> Result:
    """Launch and wait for the launch to end by itself (a finished job, or a failed node)."""
    result = Result(name)
    launch = Launch(f"{graph}.launch.py", arguments, work / "logs" / f"{name}.log", work)
    result.detail.append("$ " + " ".join(launch.command))
    try:
        code = launch.wait(timeout_s)
        result.figures["wall_s"] = round(time.monotonic() - launch.started_s, 1)
        output = launch.output()
        time.sleep(1.0)
        left = still_alive(descendants(launch.process.pid))
        if result.check(code is not None, f"ended by itself within {timeout_s:.0f} s"):
            result.check(code == expect_code, f"exit code {code} (expected {expect_code})")
        result.check(expect_text in output, f"output names it: '{expect_text}'")
        result.check(not left, f"processes left: {left}")
        result.detail.append(
            f"ended by itself after {result.figures['wall_s']:.0f} s, exit {code}: '{expect_text}'"
        )
        if check_output is not None:
            check_output(result)
    finally:
        launch.kill()
    result.ok = not any(line.startswith("FAILED") for line in result.detail)
    return result


def run_mirror_planner(
    name: str, arguments: list[str], work: Path, observer: Observer, require_pick: bool
) -> Result:
    """``real_deploy mirror:=true planner:=true``: nodes up, the mirror's check, a planned pick.

    Every node of the graph runs (process and ROS graph); the sim bridge's mirror status on
    /diagnostics gives the palm error against the cell's TF (below ``palm_error_warn_m``) and
    the tracked object's error against the mirror's belt (figures: its median and largest);
    a trial is started on the twin, ``/planner/plan_pick`` called on the live track and the
    twin's outcome read (``require_pick``: it must be a success; up to 3 trials when a plan is
    refused as late on a loaded machine). With ``viewer:=true`` the view must serve: its page
    answers HTTP 200 and, where Chromium is installed, a screenshot of the live view (written
    to ``<work>/view_<name>.png``) shows a drawn page. Stopped by SIGINT to the launch process.
    """
    import yaml
    from r2s2r_testing.cell_probe import CellProbe

    limits = yaml.safe_load((REPO / "config" / "nodes" / "sim_bridge.yaml").read_text())
    limits = limits["sim_bridge"]["ros__parameters"]
    result = Result(name)
    nodes = expected_nodes("real_deploy", arguments)
    names = [n.name for n in nodes]
    launch = Launch("real_deploy.launch.py", arguments, work / "logs" / f"{name}.log", work)
    result.detail.append("$ " + " ".join(launch.command))
    probe = None
    try:
        if not result.check(
            wait_for_nodes(launch, names, STARTUP_TIMEOUT_S), f"node processes {names} started"
        ):
            return result
        probe = CellProbe(None)
        probe.wait_for(
            lambda: any(r.figure("palm_tf_error_m") is not None for r in probe.mirror_readings()),
            STARTUP_TIMEOUT_S,
            "the mirror's palm check",
        )
        result.figures["startup_s"] = round(time.monotonic() - launch.started_s, 1)
        seen = observer.node_names()
        result.check(set(names) <= seen, f"nodes on the ROS graph: {sorted(set(names) & seen)}")
        outcome: Any = None
        for seed in range(3):
            trial = probe.start_trial(seed)
            started = len(probe.mirror_readings())
            probe.wait_for_track(60.0)
            time.sleep(2.0)  # a few tracks: the tracker's estimate settles
            sent, message = probe.plan_pick()
            outcome = probe.wait_for_outcome(trial, 90.0)
            result.detail.append(
                f"trial {trial} (seed {seed}): plan_pick -> {sent}, '{message}'; twin: "
                f"{outcome.reason}"
            )
            if sent:
                break
        if "viewer:=true" in arguments:
            check_view_serves(name, work, result)
        readings = probe.mirror_readings()[started:]
        palm = [p for r in readings if (p := r.figure("palm_tf_error_m")) is not None]
        objects = sorted(e for r in readings if (e := r.figure("object_error_m")) is not None)
        running = launch.node_processes()
        alive = [n for n in names if n in running]
        result.check(alive == names, f"node processes up after the pick: {alive} of {names}")
        result.check(bool(palm), "palm error measured")
        palm_max = max(palm, default=float("nan"))
        result.figures["palm_tf_error_max_mm"] = round(palm_max * 1000, 4)
        result.check(
            palm_max < limits["palm_error_warn_m"],
            f"palm error {palm_max * 1000:.4f} mm below {limits['palm_error_warn_m'] * 1000} mm",
        )
        if objects:
            result.figures["object_error_median_mm"] = round(objects[len(objects) // 2] * 1000, 1)
            result.figures["object_error_max_mm"] = round(objects[-1] * 1000, 1)
        result.figures["pick_success"] = int(bool(outcome is not None and outcome.success))
        warnings = sorted({r.message for r in readings if r.level != 0})
        median_mm = objects[len(objects) // 2] * 1000 if objects else float("nan")
        max_mm = objects[-1] * 1000 if objects else float("nan")
        result.detail.append(
            f"mirror: palm vs TF max {palm_max * 1000:.4f} mm; tracked object vs the mirror's "
            f"belt: {len(objects)} readings, median {median_mm:.1f} mm, max {max_mm:.1f} mm "
            f"(limit {limits['object_error_warn_m'] * 1000:.0f} mm); warnings: {warnings or 'none'}"
        )
        if require_pick:
            result.check(bool(objects), "a tracked object compared with the mirror's belt")
            result.check(
                bool(objects) and objects[-1] < limits["object_error_warn_m"],
                "object error below object_error_warn_m",
            )
            result.check(
                outcome is not None and outcome.success, "the planned pick succeeded (twin's truth)"
            )
        stop_and_check(launch, "service", result)
    except (TimeoutError, RuntimeError) as error:
        result.check(False, str(error))
    finally:
        if probe is not None:
            probe.close()
        launch.kill()
    result.ok = not any(line.startswith("FAILED") for line in result.detail)
    return result


def check_view_serves(name: str, work: Path, result: Result) -> None:
    """The viewer of a launched graph: its page answers, and (with Chromium) it has drawn."""
    import urllib.request

    import numpy as np
    from r2s2r_view.config import ServerConfig
    from r2s2r_view.server import RerunServer
    from r2s2r_view.snapshot import BrowserMissingError, decode_png, screenshot, write_png_atomic

    parameters = yaml_parameters("viewer")
    config = ServerConfig(
        host=parameters["host"],
        web_port=parameters["web_port"],
        grpc_port=parameters["grpc_port"],
    )
    url = RerunServer(config).url
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            status = answer.status
    except OSError as error:
        status = -1
        result.detail.append(f"view {url}: {error}")
    result.check(status == 200, f"the view serves: GET {url} -> {status}")
    try:
        png = screenshot(url, min_wait_s=10.0, timeout_s=90.0)
    except BrowserMissingError as error:
        result.detail.append(f"view screenshot skipped: {error}")
        return
    target = work / f"view_{name}.png"
    write_png_atomic(png, target)
    pixels = decode_png(png)
    result.figures["view_screenshot_std"] = round(float(np.std(pixels)), 1)
    result.check(float(np.std(pixels)) > 1.0, f"the live view has drawn ({target})")


def yaml_parameters(node: str) -> dict[str, Any]:
    """A node's parameters as ``config/nodes/<node>.yaml`` gives them."""
    import yaml

    data = yaml.safe_load((REPO / "config" / "nodes" / f"{node}.yaml").read_text())
    return dict(data[node]["ros__parameters"])


def supervisor_error(target: str, arguments: list[str], work: Path) -> str:
    """The one-line error ``r2s2r launch`` prints for this input (without 'r2s2r: error: ')."""
    completed = subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", "launch", target, *arguments, "--log-dir", str(work)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    lines = completed.stderr.strip().splitlines()
    if completed.returncode != 2 or len(lines) != 1:
        raise RuntimeError(f"r2s2r launch {target} {arguments}: {completed.stderr[-400:]}")
    return lines[0].removeprefix("r2s2r: error: ")


def bad_input(name: str, launch_file: str, graph: str, arguments: list[str], work: Path) -> Result:
    """``ros2 launch`` refuses the input with r2s2r launch's message, before any node starts."""
    result = Result(name)
    message = supervisor_error(graph, arguments, work / "logs")
    launch = Launch(launch_file, arguments, work / "logs" / f"{name}.log", work)
    try:
        code = launch.wait(120.0)
        output = launch.output()
    finally:
        launch.kill()
    result.check(code not in (None, 0), f"exit code {code} (expected non-zero)")
    result.check(message in output, f"ros2 launch output has r2s2r launch's '{message}'")
    result.check("process started" not in output, "no node started")
    result.check("Traceback" not in output, "no traceback")
    lines = [line for line in output.splitlines() if message in line]
    result.detail.append(f"$ {' '.join(launch.command)}  -> exit {code}")
    result.detail.extend(f"  {line}" for line in lines[:1])
    result.ok = not any(line.startswith("FAILED") for line in result.detail)
    return result


# ---------------------------------------------------------------------------------------------


def write_broken_graph(work: Path) -> Path:
    """A graph (and its launch file) whose node's parameter file does not exist."""
    graph = work / "broken.yaml"
    graph.write_text(
        "name: broken\ndescription: a node whose parameter file is missing\n"
        "nodes:\n  - name: sim_generate\n    package: r2s2r\n"
        f"    executable: sim_generate\n    parameters: ['{work}/missing_params.yaml']\n"
    )
    launch_file = work / "broken.launch.py"
    launch_file.write_text(
        "from r2s2r.launch_description import generate_graph_launch_description\n\n\n"
        "def generate_launch_description():\n"
        f"    return generate_graph_launch_description({str(graph)!r})\n"
    )
    return launch_file


def tiny_checkpoint(work: Path) -> Path:
    """An untrained policy checkpoint for this robot (32 px images, no tracked object)."""
    from r2s2r_policy.checkpoint import save_checkpoint
    from r2s2r_policy.evaluation.baseline import (
        TINY_MODEL_PARAMS,
        robot_policy_spec,
        untrained_policy,
    )

    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=4)
    return save_checkpoint(work / "tiny_checkpoint", policy)


def grounded_arguments(work: Path) -> list[str]:
    """Launch arguments of the twin grounded by the test artifact (tests/data)."""
    from r2s2r.pipeline.stages import grounded_cell_arguments

    artifact = REPO / "tests" / "data" / "grounding_default_twin.yaml"
    arguments = grounded_cell_arguments(artifact, work / "grounded_cell")
    return [f"{name}:={value}" for name, value in arguments.items()]


def cases(duration_s: float, work: Path, observer: Observer) -> dict[str, Callable[[], Result]]:
    """Every case by name (run in this order)."""
    bad_twin = work / "bad_twin.yaml"
    bad_twin.write_text("not_a_world_parameter: 1\n")

    def bags_written(result: Result) -> None:
        bags = sorted((work / "record_demos" / "bags").glob("episode_*"))
        result.check(len(bags) == 1, f"one episode bag in {work}/record_demos/bags: {bags}")
        result.detail.append(f"episode bags written: {len(bags)}")

    def summary_written(result: Result) -> None:
        summary = work / "sim_generate_1" / "summary.json"
        result.check(summary.is_file(), f"{summary} written")
        result.detail.append(f"summary: {summary}")

    launch_file = str(write_broken_graph(work))
    for previous in ("record_dir", "record_demos", "sim_generate_1", "sim_generate_stop"):
        shutil.rmtree(work / previous, ignore_errors=True)  # each case writes afresh
    return {
        "real_deploy": lambda: run_for(
            "real_deploy", "real_deploy", [], duration_s, "service", TOPICS, work, observer
        ),
        "real_deploy_record": lambda: run_for(
            "real_deploy_record",
            "real_deploy",
            ["record:=true", f"record_dir:={work}/record_dir"],
            duration_s,
            "group",
            TOPICS,
            work,
            observer,
        ),
        "real_deploy_policy": lambda: run_for(
            "real_deploy_policy",
            "real_deploy",
            [
                "policy:=true",
                f"checkpoint:={tiny_checkpoint(work)}",
                "image_height_px:=32",
                "image_width_px:=32",
                "policy_object_tracks:=false",
                "execution:=receding",
            ],
            duration_s,
            "service",
            TOPICS + COMMAND_TOPICS,
            work,
            observer,
        ),
        "real_deploy_mirror_planner": lambda: run_mirror_planner(
            "real_deploy_mirror_planner",
            ["mirror:=true", "planner:=true", "viewer:=true", *grounded_arguments(work)],
            work,
            observer,
            require_pick=True,
        ),
        "real_deploy_mirror_nominal": lambda: run_mirror_planner(
            "real_deploy_mirror_nominal",
            ["mirror:=true", "planner:=true"],
            work,
            observer,
            require_pick=False,
        ),
        "record_demos": lambda: run_to_end(
            "record_demos",
            "record_demos",
            ["trials:=1", f"out_dir:={work}/record_demos/bags"],
            600.0,
            0,
            "required node 'demonstrator' finished",
            work,
            bags_written,
        ),
        "sim_generate": lambda: run_to_end(
            "sim_generate",
            "sim_generate",
            ["episodes:=1", "workers:=1", f"output_dir:={work}/sim_generate_1"],
            1800.0,
            0,
            "required node 'sim_generate' finished",
            work,
            summary_written,
        ),
        "sim_generate_ctrl_c": lambda: run_for(
            "sim_generate_ctrl_c",
            "sim_generate",
            ["episodes:=200", "workers:=2", f"output_dir:={work}/sim_generate_stop"],
            duration_s,
            "group",
            (),
            work,
            observer,
        ),
        "required_node_dies": lambda: run_to_end(
            "required_node_dies",
            "real_deploy",
            [f"twin_config:={bad_twin}"],
            120.0,
            1,
            "required node 'real_twin' died with exit code 2",
            work,
        ),
        "bad_choice": lambda: bad_input(
            "bad_choice", "real_deploy.launch.py", "real_deploy", ["use_twin:=maybe"], work
        ),
        "missing_file": lambda: bad_input(
            "missing_file",
            "real_deploy.launch.py",
            "real_deploy",
            [f"twin_config:={work}/no_such_twin.yaml"],
            work,
        ),
        "unknown_argument": lambda: bad_input(
            "unknown_argument", "sim_generate.launch.py", "sim_generate", ["no_such_arg:=1"], work
        ),
        "wrong_type": lambda: bad_input(
            "wrong_type", "sim_generate.launch.py", "sim_generate", ["episodes:=four"], work
        ),
        "missing_parameter_file": lambda: bad_input(
            "missing_parameter_file", launch_file, str(work / "broken.yaml"), [], work
        ),
    }


@contextlib.contextmanager
def ros_domain() -> Iterator[None]:
    """A DDS domain of its own, on this host only, for this process and the launches."""
    os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 200))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    import rclpy

    rclpy.init()
    try:
        yield
    finally:
        rclpy.shutdown()


def main() -> int:
    """Run the cases and print the table and the JSON line."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--duration", type=float, default=30.0, help="Seconds each graph runs.")
    parser.add_argument("--cases", default="", help="Comma-separated subset (default: all).")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=REPO / "runs" / "check_ros2_launch",
        help="Working folder of the launches (logs, outputs, the main job's cached inputs).",
    )
    parser.add_argument(
        "--share",
        choices=["source", "installed"],
        default="source",
        help="The r2s2r launch/ and config/ launched: this source tree's (an ament prefix in "
        "the work folder put first) or the installed share's.",
    )
    parser.add_argument("--serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve[0], args.serve[1:])
    try:
        import launch_ros.actions  # noqa: F401

        import launch
    except ImportError as error:
        print(
            f"check_ros2_launch: launch/launch_ros not importable ({error}); see the set-up "
            "in this file's docstring",
            file=sys.stderr,
        )
        return 2
    if not hasattr(launch, "LaunchService"):
        print(
            "check_ros2_launch: 'launch' is this repository's launch/ folder, not the launch "
            "package; see the set-up in this file's docstring",
            file=sys.stderr,
        )
        return 2
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.share == "source":
        from r2s2r_testing.cell_probe import source_share_overlay

        prefix = source_share_overlay(work / "source_share", REPO)
        os.environ["AMENT_PREFIX_PATH"] = f"{prefix}{os.pathsep}{os.environ['AMENT_PREFIX_PATH']}"
    print(
        f"launch {Path(launch.__file__).parent}; launching with: "
        f"{' '.join(launch_command('real_deploy.launch.py', [])[:3])} ...; work folder {work}"
    )
    results = []
    with ros_domain():
        observer = Observer()
        try:
            table = cases(args.duration, work, observer)
            chosen = [c for c in args.cases.split(",") if c] or list(table)
            unknown = sorted(set(chosen) - set(table))
            if unknown:
                parser.error(f"unknown case {unknown[0]} (choices: {', '.join(table)})")
            for name in chosen:
                started = time.monotonic()
                print(f"== {name}", flush=True)
                result = table[name]()
                for line in result.detail:
                    print(f"   {line}", flush=True)
                print(
                    f"   -> {'ok' if result.ok else 'FAILED'} ({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
                results.append(result)
        finally:
            observer.close()
    print()
    print(f"{'case':24s} {'result':7s} figures")
    for result in results:
        figures = ", ".join(f"{k}={v}" for k, v in result.figures.items())
        print(f"{result.case:24s} {'ok' if result.ok else 'FAILED':7s} {figures}")
    passed = sum(r.ok for r in results)
    figures = [{"name": "cases_passed", "value": passed, "unit": "cases", "goal": len(results)}]
    for result in results:
        for key, value in result.figures.items():
            goal = "> 0" if key.endswith("_hz") else None
            figures.append(
                {
                    "name": f"{result.case}.{key}",
                    "value": value,
                    "unit": "Hz"
                    if key.endswith("_hz")
                    else ("s" if key.endswith("_s") else "mm" if key.endswith("_mm") else "count"),
                    "goal": goal,
                }
            )
    benchlib.print_json_line("check_ros2_launch", figures)
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
