"""Planner benchmark: RRTConnect planning time, planner-pick success rate, time per episode.

Run: python bench/bench_planner.py [--seeds 20] [--queries 30]
The last line is one JSON object: {"benchmark": "planner", "figures": [...]}.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import benchlib
import numpy as np
from r2s2r_description.robot import ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_planner.collision import Obstacle
from r2s2r_planner.config import MotionConfig
from r2s2r_planner.hand import PinchHand
from r2s2r_planner.motion import OmplPlanner, PlanningError, PlanRequest
from r2s2r_planner.pick import PickPlanner, plan_and_execute_pick
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.task import sample_trial
from r2s2r_world.kinematics import PalmIk, top_down_palm_pose
from r2s2r_world.world import load_world

REPO = Path(__file__).resolve().parents[1]


def rrt_times(
    world_path: Path, queries: int, check_step_rad: float
) -> tuple[list[float], list[float], int, int]:
    """RRTConnect (forced, no straight-line shortcut) around a wall between two belt poses."""
    world = load_world(world_path)
    ik = PalmIk(world.layout())
    home = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
    a = ik.solve(top_down_palm_pose([0.5, -0.25, 1.0], 0.0), home)
    b = ik.solve(top_down_palm_pose([0.5, 0.25, 1.0], 0.0), a)
    pose = np.eye(4)
    pose[:3, 3] = ik.forward(0.5 * (a + b))[:3, 3] + [0.0, 0.0, -0.05]
    planner = OmplPlanner(
        world.layout(),
        MotionConfig(try_straight_first=False, timeout_s=5.0, motion_check_step_rad=check_step_rad),
        obstacles=[Obstacle("wall", (0.5, 0.02, 0.3), pose)],
    )
    hand = PinchHand().configure(0.05).pre_grasp
    rrt, total, rejected, failed = [], [], 0, 0
    for _ in range(queries):
        try:
            result = planner.plan(PlanRequest(a, b, hand))
        except PlanningError:
            failed += 1
            rejected += planner.motion.max_attempts
            continue
        rrt.append(result.timings_s["rrt_s"] / result.attempts)
        total.append(result.planning_time_s)
        rejected += result.attempts - 1
    return rrt, total, rejected, failed


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--world", type=Path, default=REPO / "config" / "world" / "nominal.yaml")
    parser.add_argument("--seeds", type=int, default=20, help="planner picks to synthesize")
    parser.add_argument("--queries", type=int, default=30, help="RRTConnect queries")
    args = parser.parse_args()

    rrt, total, rejected, failed = rrt_times(args.world, args.queries, 0.01)
    _, _, coarse_rejected, _ = rrt_times(args.world, args.queries, 0.03)
    world = load_world(args.world)
    pick_planner = PickPlanner(world)
    backend = MujocoBackend(enable_rendering=False)
    successes, reasons, wall, plan_wall, sim = 0, Counter(), [], [], []
    for seed in range(args.seeds):
        plan = sample_trial(world, seed, randomize_belt_speed=True)
        start = time.perf_counter()
        result = plan_and_execute_pick(
            backend, world, plan, np.random.default_rng(seed), planner=pick_planner
        )
        wall.append(time.perf_counter() - start)
        plan_wall.append(result.timings.get("plan_s", 0.0))
        sim.append(result.timings.get("sim_s", 0.0))
        successes += int(result.outcome.success)
        reasons[result.failure_reason.split(":")[0] or "success"] += 1
        print(
            f"seed {seed:3d} {plan.arrivals[0].instance.type_name:9s} "
            f"{result.failure_reason or 'success'}  {wall[-1]:.2f} s"
        )

    figures = [
        {
            "name": "rrtconnect_median_ms",
            "value": 1e3 * float(np.median(rrt)),
            "unit": "ms",
            "goal": "~90 (7 joints, issue)",
        },
        {
            "name": "rrtconnect_p90_ms",
            "value": 1e3 * float(np.percentile(rrt, 90)),
            "unit": "ms",
            "goal": None,
        },
        {
            "name": "dense_recheck_rejections_at_0.01rad",
            "value": float(rejected),
            "unit": "plans",
            "goal": None,
        },
        {
            "name": "dense_recheck_rejections_at_0.03rad",
            "value": float(coarse_rejected),
            "unit": "plans",
            "goal": None,
        },
        {"name": "rrt_failed_queries", "value": float(failed), "unit": "queries", "goal": 0},
        {
            "name": "plan_total_median_ms",
            "value": 1e3 * float(np.median(total)),
            "unit": "ms",
            "goal": None,
        },
        {
            "name": "pick_success_rate",
            "value": successes / max(args.seeds, 1),
            "unit": "fraction",
            "goal": None,
        },
        {
            "name": "pick_plan_median_s",
            "value": float(np.median(plan_wall)),
            "unit": "s",
            "goal": None,
        },
        {
            "name": "episode_wall_median_s",
            "value": float(np.median(wall)),
            "unit": "s",
            "goal": None,
        },
        {"name": "episode_sim_median_s", "value": float(np.median(sim)), "unit": "s", "goal": None},
    ]
    print()
    print("failure reasons:", dict(reasons))
    benchlib.report("planner", figures)


if __name__ == "__main__":
    main()
