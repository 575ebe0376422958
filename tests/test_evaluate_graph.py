"""The evaluation over ROS through the ``evaluate`` graph (config/graphs/evaluate.yaml).

The bring-up's one supervisor starts the graph's nodes from the install space, as a user's
``r2s2r evaluate`` does; the harness runs one trial against them. A node that died is named,
with its log, when the harness asks the started graph; a policy node killed mid-trial leaves
that trial not run (and the protocol stopped), not failed.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

import torch
from r2s2r_policy.checkpoint import save_checkpoint
from r2s2r_policy.evaluation import EvaluationConfig
from r2s2r_policy.evaluation.baseline import (
    TINY_MODEL_PARAMS,
    robot_policy_spec,
    untrained_policy,
)
from r2s2r_policy.evaluation.ros import evaluate_ros, evaluation_graph_arguments

from r2s2r.graph import load_graph, resolve_graph
from r2s2r.pipeline.evaluate import evaluate_over_ros
from r2s2r.supervisor import GraphSupervisor, running_graph

pytestmark = pytest.mark.graph

ROOT = Path(__file__).resolve().parents[1]
# An own DDS domain: keep this graph apart from other tests on the machine.
DOMAIN = 1 + (os.getpid() + 50) % 100


def _checkpoint(tmp_path: Path) -> Path:
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=4)
    return save_checkpoint(tmp_path / "ckpt", policy)


def _short_twin(tmp_path: Path, timeout_s: float) -> Path:
    """The shipped twin with a short trial limit and the object arriving at once."""
    data = yaml.safe_load((ROOT / "config" / "twin" / "default.yaml").read_text())
    data["task"]["trial_timeout_s"] = timeout_s
    data["randomization"]["arrival_time_s"] = [0.0, 0.0]
    path = tmp_path / "short_twin.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_graph_arguments_follow_the_checkpoint(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    arguments = evaluation_graph_arguments(checkpoint, "twin/default.yaml", 2.0)
    assert arguments["image_height_px"] == arguments["image_width_px"] == "32"
    assert arguments["command_rate_hz"] == "20.0"  # 10 Hz in simulated time at twice the speed
    assert Path(arguments["twin_config"]).is_file()
    nodes = {node.name: node for node in resolve_graph(load_graph("evaluate"), arguments)}
    policy = nodes["policy_inference"].parameter_overrides
    assert policy["autostart"] is False and policy["image_height_px"] == 32
    assert policy["checkpoint_path"] == str(checkpoint.resolve())
    with pytest.raises(ValueError, match="camera_keys"):
        evaluation_graph_arguments(checkpoint, "twin/default.yaml", 1.0, {"camera_keys": []})


@pytest.mark.timeout(120)
def test_policy_node_process_drives_twin_process(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    started = time.monotonic()
    report = evaluate_over_ros(
        checkpoint,
        EvaluationConfig(trials_per_condition={"nominal": 1}, trial_wall_timeout_s=30.0),
        launch=True,
        twin_config=str(_short_twin(tmp_path, 2.0)),
        real_time_factor=1.0,
        policy_overrides={"image_height_px": 32, "image_width_px": 32},
        log_dir=tmp_path / "logs",
        graph_timeout_s=60.0,
        domain_id=DOMAIN,
    )
    record = report.records[0]
    log = (tmp_path / "logs" / "policy_inference.log").read_text()
    assert record.reason == "timeout", log[-2000:]
    assert record.duration_s == pytest.approx(2.0, abs=0.05)
    assert "active: commanding" in log
    assert report.metadata["launched"] is True
    assert time.monotonic() - started < 100.0


def test_a_node_that_died_is_named_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The node's executable is a Python script that prints three lines and exits 3.
    executable = tmp_path / "dies"
    executable.write_text(
        f"#!{sys.executable}\n"
        "print('starting'); print('loading the world'); print('fatal: no such file'); exit(3)\n"
    )
    executable.chmod(0o755)
    monkeypatch.setattr("r2s2r.supervisor.find_executable", lambda package, name: executable)
    nodes = resolve_graph(load_graph("evaluate"), {"object_tracks": "false"})[:1]
    with open(os.devnull, "w") as quiet:
        supervisor = GraphSupervisor(nodes, tmp_path / "logs", 1.0, console=quiet)
        supervisor.start()
        deadline = time.monotonic() + 20.0
        while supervisor.dead_node() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        dead = supervisor.dead_node()
        supervisor.shutdown()
    assert dead is not None
    assert dead.startswith("real_twin exited with code 3 (log: "), dead
    assert dead.endswith("loading the world | fatal: no such file)"), dead


@pytest.mark.timeout(180)
def test_real_deploy_with_a_policy_commands_the_cells_controllers(tmp_path: Path) -> None:
    import rclpy
    from r2s2r_common.ros.qos import RELIABLE_QOS
    from r2s2r_testing.ros import ros_context_of
    from rclpy.executors import SingleThreadedExecutor
    from trajectory_msgs.msg import JointTrajectory

    from r2s2r.supervisor import running_graph

    checkpoint = _checkpoint(tmp_path)
    domain = 1 + (os.getpid() + 70) % 100
    with ros_context_of(domain) as context:
        probe = rclpy.create_node("deploy_probe", context=context)
        commands: dict[str, list[JointTrajectory]] = {"arm": [], "hand": []}
        for controller, received in commands.items():
            probe.create_subscription(
                JointTrajectory,
                f"/{controller}_controller/joint_trajectory",
                received.append,
                RELIABLE_QOS,
            )
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        arguments = {
            "policy": "true",
            "checkpoint": str(checkpoint),
            "image_height_px": "32",
            "image_width_px": "32",
            "policy_object_tracks": "false",  # the tiny checkpoint reads no tracked object
        }
        with open(os.devnull, "w") as quiet:
            try:
                with running_graph(
                    "real_deploy",
                    arguments,
                    tmp_path / "logs",
                    console=quiet,
                    env={"ROS_DOMAIN_ID": str(domain)},
                ) as supervisor:
                    deadline = time.monotonic() + 120.0
                    while time.monotonic() < deadline and min(map(len, commands.values())) < 5:
                        executor.spin_once(timeout_sec=0.1)
                        assert supervisor.dead_node() is None, supervisor.dead_node()
                        log = (tmp_path / "logs" / "policy_inference.log").read_text()
                        assert "configure failed" not in log, log[-2000:]
            finally:
                probe.destroy_node()
    log = (tmp_path / "logs" / "policy_inference.log").read_text()
    assert "active: commanding" in log, log[-2000:]
    for controller, received in commands.items():
        assert len(received) >= 5, (controller, log[-2000:])
        # One trajectory per chunk: several points, each later than the last.
        times = [
            p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in received[-1].points
        ]
        assert len(times) > 1 and all(b > a for a, b in itertools.pairwise(times)), times


@pytest.mark.timeout(150)
def test_a_policy_node_killed_mid_trial_leaves_its_trial_not_run(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    arguments = evaluation_graph_arguments(
        checkpoint, str(_short_twin(tmp_path, 8.0)), 1.0, {"trace_dir": str(tmp_path / "traces")}
    )
    log = tmp_path / "logs" / "policy_inference.log"
    protocol = EvaluationConfig(trials_per_condition={"nominal": 2}, trial_wall_timeout_s=30.0)
    with (
        open(os.devnull, "w") as quiet,
        running_graph(
            "evaluate",
            arguments,
            tmp_path / "logs",
            2.0,
            console=quiet,
            env={"ROS_DOMAIN_ID": str(DOMAIN)},
        ) as graph,
    ):
        pid = graph.pid("policy_inference")
        assert pid is not None and graph.pid("no_such_node") is None

        def kill_once_commanding() -> None:
            deadline = time.monotonic() + 90.0
            while time.monotonic() < deadline:
                if log.is_file() and "active: commanding" in log.read_text():
                    time.sleep(0.5)  # mid-trial: chunks are flowing
                    os.kill(pid, signal.SIGKILL)
                    return
                time.sleep(0.05)

        threading.Thread(target=kill_once_commanding, daemon=True).start()
        started = time.monotonic()
        report = evaluate_ros(
            checkpoint,
            protocol,
            graph_timeout_s=60.0,
            domain_id=DOMAIN,
            watch=graph,
            trace_dir=tmp_path / "traces",
        )
    first, second = report.records
    assert first.not_run.startswith("policy_inference exited with code -9"), first
    assert first.reason == "not_run" and not first.success
    assert second.not_run == "not started: the evaluation stopped at trial 1"
    assert report.metadata["stopped"].startswith("stopped at trial 1 of 2: policy_inference")
    assert report.summary()["all"].trials == 0
    # Noticed within the dead-node poll, not after the trial's 30 s wall limit.
    assert time.monotonic() - started < 25.0
