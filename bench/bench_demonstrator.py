"""Demonstrator benchmark: success rate and episode time on the real twin; motion style.

Run: ``python bench/bench_demonstrator.py`` (``--trials N``, ``--style-trials M``).

Plays trials 0..N-1 of the twin world (``config/twin/default.yaml``) with the human-like
demonstrator driven directly against the MuJoCo backend (the demonstrator knows only the
NOMINAL world), and the planner-STYLE reference (straight joint-space segments, trapezoidal
timing, two-finger pinch; for comparison only) on the first M of them, and compares the
style metrics of the recorded joint trajectories.

With ``--ros`` it also records ``--ros-trials`` takes (seeds 0..) through the recording path
at real time: ``r2s2r record-demos`` (:func:`r2s2r_recorder.demos.record_demos`: the twin,
cell state, belt speed, object tracker, recorder and demonstrator as separate processes in a
private ROS domain; needs ``source scripts/env.sh``), judged by ``/trial/outcome``, and shows
its success rate and failure reasons next to the no-ROS rate on the same seeds. The machine's
load average is printed before and after (``--nice N`` lowers the bench's priority, the
recording's processes inherit it). Goal: ``ros_success_rate`` ≥ 0.9.

Last line: ``{"benchmark": "demonstrator", "figures": [...]}``.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

import benchlib
from r2s2r_sim.demonstrator import HumanLikeDemonstrator, run_demo_on_backend
from r2s2r_sim.demonstrator.driver import run_planner_reference_on_backend
from r2s2r_sim.demonstrator.style import StyleMetrics, style_metrics
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import load_world


def _median_metrics(metrics: list[StyleMetrics]) -> dict[str, float]:
    keys = metrics[0].as_dict().keys()
    return {k: float(np.median([m.as_dict()[k] for m in metrics])) for k in keys}


def run_recording(
    trials: int, real_time_factor: float, twin: str, out_dir: Path, launch_args: list[str]
) -> dict:
    """Record ``trials`` takes (seeds 0..) with ``record_demos``; return its manifest."""
    from r2s2r_recorder.demos import quiet_console
    from r2s2r_recorder.demos_config import RecordDemosConfig

    from r2s2r.pipeline.demos import record_demos_on_twin

    config = RecordDemosConfig(
        episodes=trials,
        out_dir=str(out_dir),
        twin_config=twin,
        real_time_factor=real_time_factor,
        launch_args=launch_args,
        force=True,
    )
    with quiet_console() as console:
        result = record_demos_on_twin(config, console=console)
    print(result.format())
    return result.manifest


def load_average() -> tuple[float, float, float]:
    """The machine's 1, 5 and 15 min load averages."""
    return os.getloadavg()


def ros_figures(args: argparse.Namespace, results: list) -> list[dict]:
    """Record takes through ROS; print them next to the no-ROS outcomes; return the figures."""
    load_before = load_average()
    started = time.perf_counter()
    launch_args = list(args.ros_launch_arg)
    if args.ros_out:
        manifest = run_recording(
            args.ros_trials, args.real_time_factor, str(args.twin), Path(args.ros_out), launch_args
        )
    else:
        with tempfile.TemporaryDirectory(prefix="bench_demonstrator_") as folder:
            manifest = run_recording(
                args.ros_trials, args.real_time_factor, str(args.twin), Path(folder), launch_args
            )
    wall = time.perf_counter() - started
    load_after = load_average()
    takes = manifest.get("takes", [])
    no_ros = {seed: r for seed, r in enumerate(results)}
    print(f"\n{'seed':>4} {'object':>9} {'through ROS':>13} {'without ROS':>13}")
    for take in takes:
        seed = take["seed"]
        other = no_ros[seed].outcome.reason if seed in no_ros else "-"
        here = take["reason"] or take["outcome"]
        print(f"{seed!s:>4} {take['object_type']:>9} {here:>13} {other:>13}")
    successes = sum(1 for take in takes if take["outcome"] == "success")
    rate = successes / max(1, args.ros_trials)
    same = [no_ros[t["seed"]].outcome.success for t in takes if t["seed"] in no_ros]
    same_rate = sum(same) / len(same) if same else 0.0
    reasons = manifest.get("failure_reasons", {})
    print(
        f"\nthrough ROS at x{args.real_time_factor}: {successes}/{args.ros_trials} successes "
        f"(failures {reasons}); without ROS on the same seeds {sum(same)}/{len(same)}; "
        f"wall {wall:.0f} s ({wall / max(1, len(takes)):.1f} s per take); load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after (1 min), nice {args.nice}, "
        f"graph arguments {launch_args}"
    )
    figures = [
        {"name": "ros_success_rate", "value": rate, "unit": "fraction", "goal": ">= 0.9"},
        {"name": "ros_takes", "value": len(takes), "unit": "count", "goal": ">= 20"},
        {
            "name": "no_ros_success_rate_same_seeds",
            "value": same_rate,
            "unit": "fraction",
            "goal": None,
        },
        {
            "name": "ros_wall_per_take",
            "value": wall / max(1, len(takes)),
            "unit": "s",
            "goal": None,
        },
        {"name": "load_average_1min_before", "value": load_before[0], "unit": "", "goal": None},
        {"name": "load_average_1min_after", "value": load_after[0], "unit": "", "goal": None},
    ]
    for reason, count in sorted(reasons.items()):
        figures.append(
            {"name": f"ros_outcome_{reason}", "value": count, "unit": "count", "goal": None}
        )
    return figures


def main() -> None:
    """Run the benchmark and print the table and the JSON line."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--trials", type=int, default=20, help="Demonstrator trials.")
    parser.add_argument("--style-trials", type=int, default=5, help="Trials for style metrics.")
    benchlib.add_twin(parser)
    benchlib.add_nominal(parser)
    parser.add_argument("--ros", action="store_true", help="Also record takes through ROS.")
    parser.add_argument("--ros-trials", type=int, default=20, help="Takes through ROS.")
    parser.add_argument("--real-time-factor", type=float, default=1.0, help="Twin speed.")
    parser.add_argument(
        "--ros-out", default="", help="Folder of the ROS recording (default: a temporary one)."
    )
    parser.add_argument(
        "--ros-launch-arg",
        action="append",
        default=[],
        help="NAME:=VALUE argument of the record_demos graph, e.g. "
        "objects_topic:=/objects/tracks (repeatable).",
    )
    parser.add_argument("--nice", type=int, default=0, help="Lower this bench's priority by N.")
    args = parser.parse_args()
    if args.nice:
        os.nice(args.nice)
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
        figures += ros_figures(args, results)
    benchlib.print_json_line("demonstrator", figures)


if __name__ == "__main__":
    main()
