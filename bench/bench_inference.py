"""Policy inference benchmark: engine latency vs the bare model, and image-to-command latency.

1. ``InferenceEngine.step`` (observation snapshot + predict_chunk + safety filter + command
   build) on the default model (128 px, config/policy/cotrain.yaml sizes, untrained weights: the
   cost does not depend on the values), p50/p99, and its ratio to the bare model forward on
   ready tensors (``Policy.predict_normalized``).
2. Through the ROS graph: a camera publisher node and the policy_inference node (the node in
   its own process, as deployed); the probe publishes both camera images plus joint states and
   belt speed, and measures from the image publish to the arm JointTrajectory's arrival.

Run: source scripts/env.sh && python bench/bench_inference.py [--iterations 300]
The last line is one JSON object: {"benchmark": "inference", "figures": [...]}.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib
import numpy as np
import torch
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.checkpoint import save_checkpoint
from r2s2r_policy.evaluation.baseline import robot_policy_spec, untrained_policy
from r2s2r_policy.inference.engine import InferenceConfig, InferenceEngine, StepStatus

HOME = [HOME_POSITIONS[name] for name in ALL_JOINT_NAMES]


def engine_latency(policy: torch.nn.Module, iterations: int, execution: str) -> dict[str, float]:
    """Engine step and bare forward latencies (ms) of full image-to-command steps.

    The engine runs on a stepped clock (one control period per step) with fresh observations
    before every step, so each timed step infers, as on the cell when a chunk falls due:
    receding horizon with one executed step, or temporal ensembling.
    """
    now = [0.0]
    config = InferenceConfig(execution=execution, executed_steps=1)  # type: ignore[arg-type]
    engine = InferenceEngine(policy, config, clock=lambda: now[0])  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    spec = engine.spec
    images = {
        key: rng.integers(0, 255, spec.image_shape(key), dtype=np.uint8) for key in spec.image_keys
    }

    def observe() -> None:
        for key, image in images.items():
            engine.observe_image(key, image)
        engine.observe_joints(list(ALL_JOINT_NAMES), HOME)
        engine.observe_belt_speed(0.1)

    observe()
    batch = policy.observation_batch(engine.buffer.snapshot(engine.clock())[0])  # type: ignore[operator]
    steps, bare = [], []
    for index in range(iterations + 10):
        now[0] += engine.dt_s
        observe()
        started = time.perf_counter()
        result = engine.step()
        elapsed = time.perf_counter() - started
        if result.status != StepStatus.COMMANDED:
            raise RuntimeError(f"engine step did not command: {result.status} {result.detail}")
        with torch.inference_mode():
            started = time.perf_counter()
            policy.predict_normalized(batch)  # type: ignore[operator]
            forward = time.perf_counter() - started
        if index >= 10:  # warm-up steps are not timed
            steps.append(elapsed)
            bare.append(forward)
    step_ms, bare_ms = np.array(steps) * 1e3, np.array(bare) * 1e3
    return {
        "p50": float(np.percentile(step_ms, 50)),
        "p99": float(np.percentile(step_ms, 99)),
        "bare_p50": float(np.percentile(bare_ms, 50)),
        "bare_p99": float(np.percentile(bare_ms, 99)),
    }


def ros_latency(checkpoint: Path, samples: int, domain_id: int) -> dict[str, float]:
    """Image publish -> arm JointTrajectory arrival through the graph (ms)."""
    import rclpy
    from geometry_msgs.msg import TwistStamped
    from r2s2r_common.image_conversion import to_image_msg
    from r2s2r_common.ros.qos import RELIABLE_QOS, SENSOR_DATA_QOS
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState
    from trajectory_msgs.msg import JointTrajectory

    from r2s2r.supervisor import find_executable

    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id))
    process = subprocess.Popen(
        [
            str(find_executable("r2s2r_policy", "policy_inference")),
            "--ros-args",
            "-p",
            f"checkpoint_path:={checkpoint}",
            "-p",
            "stale_observation_s:=1.0",
            "-p",
            "torch_threads:=1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    node = Node("inference_bench_probe", context=context)
    images = {
        key: node.create_publisher(Image, f"/{key}/image_raw", SENSOR_DATA_QOS)
        for key in ("head_camera", "hand_camera")
    }
    joints = node.create_publisher(JointState, "/joint_states", 10)
    belt = node.create_publisher(TwistStamped, "/belt/speed", 10)
    arrivals: list[float] = []
    node.create_subscription(
        JointTrajectory,
        "/arm_controller/joint_trajectory",
        lambda msg: arrivals.append(time.perf_counter()) if len(msg.points) > 1 else None,
        RELIABLE_QOS,
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 255, (128, 128, 3), dtype=np.uint8) for _ in range(4)]
    latencies: list[float] = []

    def spin_for(seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            executor.spin_once(timeout_sec=0.002)

    def publish_state() -> None:
        joints.publish(JointState(name=list(ALL_JOINT_NAMES), position=HOME))
        speed = TwistStamped()
        speed.twist.linear.x = 0.1
        belt.publish(speed)

    try:
        deadline = time.perf_counter() + 60.0
        while not arrivals and time.perf_counter() < deadline:  # wait for the node to come up
            publish_state()
            for publisher in images.values():
                publisher.publish(to_image_msg(frames[0], "rgb8"))
            spin_for(0.1)
        if not arrivals:
            raise RuntimeError("policy_inference never commanded (did it start?)")
        spin_for(0.3)
        for index in range(samples):
            publish_state()
            count = len(arrivals)
            started = time.perf_counter()
            for publisher in images.values():
                publisher.publish(to_image_msg(frames[index % len(frames)], "rgb8"))
            while len(arrivals) == count and time.perf_counter() - started < 1.0:
                executor.spin_once(timeout_sec=0.001)
            if len(arrivals) > count:
                latencies.append(arrivals[count] - started)
            spin_for(0.1 - (time.perf_counter() - started))  # cameras at 10 Hz
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        process.terminate()
        process.wait(10)
    ms = np.array(latencies) * 1e3
    return {
        "p50": float(np.percentile(ms, 50)),
        "p99": float(np.percentile(ms, 99)),
        "received": float(len(latencies)) / samples,
    }


def main() -> None:
    """Run both measurements and print the table and the JSON line."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--iterations", type=int, default=300, help="Engine steps timed.")
    parser.add_argument("--ros-samples", type=int, default=150, help="Images through the graph.")
    benchlib.add_threads(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    policy = untrained_policy(robot_policy_spec(128, 12, 10.0), seed=0)
    lat = engine_latency(policy, args.iterations, "receding")
    ensemble = engine_latency(policy, args.iterations, "temporal_ensemble")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = save_checkpoint(Path(tmp) / "ckpt", policy)
        ros = ros_latency(checkpoint, args.ros_samples, 1 + (os.getpid() + 25) % 100)
    rows = [
        (
            "engine_step_p50",
            lat["p50"],
            "ms",
            "<= 10",
            f"receding: snapshot+predict+safety, 128px, {args.threads} thr",
        ),
        ("engine_step_p99", lat["p99"], "ms", None, "engine step"),
        ("bare_forward_p50", lat["bare_p50"], "ms", None, "predict_normalized on ready tensors"),
        ("engine_to_forward_ratio", lat["p50"] / lat["bare_p50"], "x", "<= 1.2", "p50 / p50"),
        ("ensemble_step_p50", ensemble["p50"], "ms", None, "temporal ensembling"),
        (
            "ensemble_to_forward_ratio",
            ensemble["p50"] / ensemble["bare_p50"],
            "x",
            None,
            "p50 / p50",
        ),
        ("image_to_command_p50", ros["p50"], "ms", None, "image publish -> arm trajectory"),
        ("image_to_command_p99", ros["p99"], "ms", "<= 50", "node in its own process"),
        ("image_to_command_answered", ros["received"], "fraction", None, "images answered < 1 s"),
        ("load_average_1min", os.getloadavg()[0], "procs", None, "during the run (2 cores)"),
    ]
    figures = [
        benchlib.Figure(name, round(value, 4), unit, goal, note)
        for name, value, unit, goal, note in rows
    ]
    benchlib.report("inference", figures)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
