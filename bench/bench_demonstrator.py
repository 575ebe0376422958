"""Demonstrator benchmark: success rate and episode time on the real twin; motion style.

Run: ``python bench/bench_demonstrator.py`` (``--trials N``, ``--style-trials M``).

Plays trials 0..N-1 of the twin world (``config/twin/default.yaml``) with the human-like
demonstrator driven directly against the MuJoCo backend (the demonstrator knows only the
NOMINAL world), and the planner-STYLE reference (straight joint-space segments, trapezoidal
timing, two-finger pinch; for comparison only) on the first M of them, and compares the
style metrics of the recorded joint trajectories.

With ``--ros`` it also runs ``--ros-trials`` trials through ROS: the ``real_twin`` node and the
``demonstrator`` node in one process (needs ``source scripts/env.sh``), the demonstrator
acting only through the controller topics and judged by ``/trial/outcome``.

Last line: ``{"benchmark": "demonstrator", "figures": [...]}``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

from r2s2r_sim.demonstrator import HumanLikeDemonstrator, run_demo_on_backend
from r2s2r_sim.demonstrator.driver import run_planner_reference_on_backend
from r2s2r_sim.demonstrator.style import StyleMetrics, style_metrics
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.world import load_world

REPO = Path(__file__).resolve().parents[1]


def _median_metrics(metrics: list[StyleMetrics]) -> dict[str, float]:
    keys = metrics[0].as_dict().keys()
    return {k: float(np.median([m.as_dict()[k] for m in metrics])) for k in keys}


def run_ros_trials(trials: int, real_time_factor: float, timeout_s: float) -> list[tuple]:
    """Run ``trials`` trials through the twin node; return the demonstrator's outcomes."""
    import rclpy
    from r2s2r_sim.demonstrator.node import DemonstratorNode
    from r2s2r_sim.nodes.real_twin import RealTwinNode
    from rclpy.executors import SingleThreadedExecutor

    rclpy.init(
        args=[
            "--ros-args",
            "-p",
            f"trials:={trials}",
            "-p",
            f"real_time_factor:={real_time_factor}",
            "-p",
            "twin_config_path:=twin/default.yaml",
        ]
    )
    twin = RealTwinNode()
    twin.trigger_configure()
    twin.trigger_activate()
    demo = DemonstratorNode()
    executor = SingleThreadedExecutor()  # the twin's EGL renderers are bound to one thread
    executor.add_node(twin)
    executor.add_node(demo)
    start = time.perf_counter()
    try:
        while len(demo.outcomes) < trials and time.perf_counter() - start < timeout_s:
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown()
        demo.destroy_node()
        twin.destroy_node()
        rclpy.shutdown()
    return list(demo.outcomes)


def main() -> None:
    """Run the benchmark and print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="Demonstrator trials.")
    parser.add_argument("--style-trials", type=int, default=5, help="Trials for style metrics.")
    parser.add_argument("--twin", default=str(REPO / "config/twin/default.yaml"))
    parser.add_argument("--nominal", default=str(REPO / "config/world/nominal.yaml"))
    parser.add_argument("--ros", action="store_true", help="Also run trials through ROS.")
    parser.add_argument("--ros-trials", type=int, default=3, help="Trials through ROS.")
    parser.add_argument("--real-time-factor", type=float, default=1.5, help="Twin speed.")
    args = parser.parse_args()
    twin = load_world(args.twin)
    nominal = load_world(args.nominal)
    backend = MujocoBackend(enable_rendering=False)
    ik = HumanLikeDemonstrator(nominal, 0).ik

    print(f"{'seed':>4} {'object':>9} {'outcome':>12} {'episode s':>9} {'wall s':>7}")
    results = []
    human_metrics: list[StyleMetrics] = []
    wall_start = time.perf_counter()
    for seed in range(args.trials):
        start = time.perf_counter()
        result = run_demo_on_backend(backend, twin, seed, reach_world=nominal)
        wall = time.perf_counter() - start
        results.append(result)
        name = result.plan.arrivals[0].instance.type_name
        print(
            f"{seed:>4} {name:>9} {result.outcome.reason:>12} "
            f"{result.episode_time_s:>9.2f} {wall:>7.2f}"
        )
        if seed < args.style_trials:
            human_metrics.append(style_metrics(result.times_s, result.joint_positions, ik))
    wall_total = time.perf_counter() - wall_start
    planner_metrics = []
    for seed in range(args.style_trials):
        reference = run_planner_reference_on_backend(backend, twin, seed, reach_world=nominal)
        planner_metrics.append(style_metrics(reference.times_s, reference.joint_positions, ik))

    successes = [r for r in results if r.outcome.success]
    success_rate = len(successes) / len(results)
    median_time = float(np.median([r.episode_time_s for r in successes])) if successes else 0.0
    reasons = collections.Counter(r.outcome.reason for r in results)
    print(
        f"\nsuccess rate {success_rate:.2f} ({len(successes)}/{len(results)}), "
        f"median episode time (successes) {median_time:.2f} s, reasons {dict(reasons)}, "
        f"wall {wall_total:.1f} s"
    )
    human = _median_metrics(human_metrics)
    planner = _median_metrics(planner_metrics)
    print(f"\n{'style metric (median)':<24} {'demonstrator':>12} {'planner-style':>13}")
    for key in human:
        print(f"{key:<24} {human[key]:>12.3f} {planner[key]:>13.3f}")
    figures = [
        {"name": "success_rate", "value": success_rate, "unit": "fraction", "goal": ">= 0.9"},
        {"name": "median_episode_time", "value": median_time, "unit": "s", "goal": None},
        {"name": "trials", "value": len(results), "unit": "count", "goal": ">= 20"},
    ]
    for reason, count in sorted(reasons.items()):
        figures.append({"name": f"outcome_{reason}", "value": count, "unit": "count", "goal": None})
    for key in (
        "speed_peak_to_mean",
        "plateau_fraction",
        "normalized_jerk",
        "joint_straightness",
        "cartesian_straightness",
        "hand_closure_fraction",
    ):
        figures.append(
            {"name": f"{key}_demonstrator", "value": human[key], "unit": "", "goal": None}
        )
        figures.append(
            {"name": f"{key}_planner_style", "value": planner[key], "unit": "", "goal": None}
        )
    if args.ros:
        outcomes = run_ros_trials(args.ros_trials, args.real_time_factor, 60.0 * args.ros_trials)
        ros_rate = sum(1 for o in outcomes if o[1]) / max(1, args.ros_trials)
        print(f"\nthrough ROS (twin node): {outcomes}")
        figures.append(
            {"name": "ros_success_rate", "value": ros_rate, "unit": "fraction", "goal": ">= 0.9"}
        )
        figures.append(
            {"name": "ros_trials", "value": len(outcomes), "unit": "count", "goal": None}
        )
    print(json.dumps({"benchmark": "demonstrator", "figures": figures}))


if __name__ == "__main__":
    main()
