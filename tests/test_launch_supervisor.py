"""`r2s2r launch`: nodes of the workspace as separate processes, DDS flow, SIGINT, crashes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from geometry_msgs.msg import TwistStamped
from r2s2r_common.ros.qos import DEFAULT_QOS
from rclpy.executors import SingleThreadedExecutor

pytestmark = pytest.mark.graph

CONFIG = Path(__file__).resolve().parent.parent / "config"


def write_graph(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ndescription: test graph\n{body}")
    return path


def start_launch(graph: Path, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "r2s2r.cli",
            "launch",
            str(graph),
            *extra,
            "--log-dir",
            str(tmp_path / "logs"),
            "--grace-period",
            "5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def started_pids(output: str) -> dict[str, int]:
    return {m[0]: int(m[1]) for m in re.findall(r"(\w+) \(pid (\d+)\)", output)}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_twin_and_belt_speed_talk_over_dds_and_stop_on_sigint(
    tmp_path: Path, ros_context: rclpy.Context
) -> None:
    graph = write_graph(
        tmp_path,
        "flow",
        f"""
nodes:
  - name: real_twin
    package: r2s2r_sim
    executable: real_twin
    parameters: ["{CONFIG}/nodes/real_twin.yaml"]
  - name: belt_speed
    package: r2s2r_belt
    executable: belt_speed
    parameters: ["{CONFIG}/nodes/belt_speed.yaml"]
""",
    )
    probe = rclpy.create_node("launch_probe", context=ros_context)
    speeds: list[float] = []
    probe.create_subscription(
        TwistStamped, "/belt/speed", lambda m: speeds.append(m.twist.linear.x), DEFAULT_QOS
    )
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(probe)
    launch = start_launch(graph, tmp_path)
    try:
        deadline = time.monotonic() + 90.0
        # The twin's belt encoder reaches belt_speed, which publishes the belt's speed (> 0).
        while time.monotonic() < deadline and len([s for s in speeds if s > 0.01]) < 10:
            executor.spin_once(timeout_sec=0.1)
            assert launch.poll() is None, "r2s2r launch exited early"
        assert len([s for s in speeds if s > 0.01]) >= 10, f"no belt speed received: {speeds[-5:]}"
        launch.send_signal(signal.SIGINT)
        output, _ = launch.communicate(timeout=60)
    finally:
        if launch.poll() is None:
            launch.kill()
        probe.destroy_node()
    assert launch.returncode == 0, output
    pids = started_pids(output)
    assert set(pids) == {"real_twin", "belt_speed"}, output
    assert not [name for name, pid in pids.items() if pid_alive(pid)], output
    assert "all nodes stopped" in output
    for name in pids:
        assert (tmp_path / "logs" / f"{name}.log").stat().st_size > 0


def test_required_node_crash_stops_graph_with_nonzero_exit(tmp_path: Path) -> None:
    graph = write_graph(
        tmp_path,
        "crash",
        f"""
nodes:
  - name: belt_speed
    package: r2s2r_belt
    executable: belt_speed
    parameters: ["{CONFIG}/nodes/belt_speed.yaml"]
  - name: broken_belt_speed
    package: r2s2r_belt
    executable: belt_speed
    parameters: ["{CONFIG}/nodes/belt_speed.yaml"]
    parameter_overrides: {{publish_rate_hz: -5.0}}
""",
    )
    launch = start_launch(graph, tmp_path)
    output, _ = launch.communicate(timeout=90)
    assert launch.returncode == 1, output
    assert re.search(r"required node 'broken_belt_speed' died with exit code [1-9]", output), output
    pids = started_pids(output)
    assert not [name for name, pid in pids.items() if pid_alive(pid)], output


def test_unknown_executable_is_reported_before_anything_starts(tmp_path: Path) -> None:
    graph = write_graph(
        tmp_path,
        "missing",
        """
nodes:
  - {name: ghost, package: r2s2r_belt, executable: no_such_node}
""",
    )
    launch = start_launch(graph, tmp_path)
    output, _ = launch.communicate(timeout=60)
    assert launch.returncode == 2
    assert "package 'r2s2r_belt' has no executable 'no_such_node'" in output
    assert "started" not in output
