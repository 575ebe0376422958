"""Real-twin benchmark: real-time-factor capacity with both cameras at 10 Hz, and its cost split.

Two measurements, side by side in one run:
1. ``SimCell`` alone (no ROS), stepping as fast as it can through a trial with the head camera
   (RGB + depth) and the hand camera at their world rates: capacity = simulated / wall seconds.
2. The ``real_twin`` node with ``real_time_factor`` far above what it can reach, so that it steps
   as fast as possible, while a separate subscriber process receives the camera streams,
   ``/joint_states`` and the operator's object poses (the publish cost of a demonstration
   session, with matched readers). The node
   spins a single-threaded executor: MuJoCo's EGL rendering contexts are bound to the thread
   that made them current, so a multi-threaded executor (timer callbacks on changing threads)
   fails with EGL_BAD_ACCESS on the second render thread.

Run: source scripts/env.sh && python bench/bench_twin.py [--twin config/twin/default.yaml]
The last line is one JSON object: {"benchmark": "twin", "figures": [...]}.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import benchlib

os.environ.setdefault("MUJOCO_GL", "egl")

import rclpy
from r2s2r_sim.cell_runtime import SimCell
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.nodes.real_twin import RealTwinNode
from r2s2r_sim.pacing import CostAccount
from r2s2r_world.world import load_world
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

TRAFFIC = Path(__file__).resolve().parent / "ros_traffic.py"
"""The matched readers run in a process of their own (bench/ros_traffic.py)."""


def bench_cell(twin_path: Path, nominal_path: Path, sim_seconds: float) -> CostAccount:
    """Step a SimCell through a trial as fast as possible; return its cost account."""
    cell = SimCell(MujocoBackend(), load_world(twin_path), load_world(nominal_path))
    cell.start_trial(seed=0)
    for _ in range(round(0.2 / cell.control_period_s)):  # warm-up: renderers, caches
        cell.step_control()
    before = cell.costs.copy()
    wall = time.perf_counter()
    frames = 0
    for _ in range(round(sim_seconds / cell.control_period_s)):
        frames += len(cell.step_control().frames)
    costs = cell.costs.minus(before)
    costs.publish_s = 0.0
    elapsed = time.perf_counter() - wall
    print(
        f"SimCell: {costs.sim_s:.1f} sim s in {elapsed:.2f} wall s, {frames / costs.sim_s:.1f} "
        f"frames per sim s (both cameras)"
    )
    cell.close()
    return costs


def bench_node(
    twin_path: Path, nominal_path: Path, wall_seconds: float
) -> tuple[float, CostAccount, float]:
    """Run the twin node flat out for ``wall_seconds``; return (achieved RTF, costs, wall)."""
    subscriber = subprocess.Popen(
        [sys.executable, str(TRAFFIC), "count-twin-topics", str(wall_seconds + 3.0)],
        stdout=subprocess.PIPE,
        text=True,
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    node = RealTwinNode(
        context=context,
        parameter_overrides=[
            Parameter("twin_config_path", value=str(twin_path)),
            Parameter("nominal_world_path", value=str(nominal_path)),
            Parameter("real_time_factor", value=100.0),
            Parameter("tick_rate_hz", value=100.0),
        ],
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        assert node.autostart(), "the twin failed to configure"
        cell = node.cell
        assert cell is not None
        cell.start_trial(seed=0)
        warm = time.monotonic() + 1.5  # discovery of the subscriber + renderer warm-up
        while time.monotonic() < warm:
            executor.spin_once(timeout_sec=0.01)
        before, sim_before, wall = cell.costs.copy(), cell.time_s, time.monotonic()
        while time.monotonic() < wall + wall_seconds:
            executor.spin_once(timeout_sec=0.01)
        elapsed = time.monotonic() - wall
        rtf = (cell.time_s - sim_before) / elapsed
        costs = cell.costs.minus(before)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    received = subscriber.communicate(timeout=30)[0].strip()
    print(f"node: x{rtf:.2f} real time; subscriber received {received}")
    return rtf, costs, elapsed


def per_sim_second_ms(costs: CostAccount, wall_s: float | None = None) -> dict[str, float]:
    """Wall milliseconds per simulated second for each cost (and executor overhead)."""
    split = {
        "physics": 1e3 * costs.physics_s / costs.sim_s,
        "render": 1e3 * costs.render_s / costs.sim_s,
        "publish": 1e3 * costs.publish_s / costs.sim_s,
    }
    if wall_s is not None:
        split["executor+other"] = 1e3 * (wall_s - costs.busy_s) / costs.sim_s
    return split


def main() -> None:
    parser = benchlib.parser(__doc__)
    benchlib.add_twin(parser)
    benchlib.add_nominal(parser)
    parser.add_argument("--cell-seconds", type=float, default=5.0, help="sim s, SimCell run")
    parser.add_argument("--node-seconds", type=float, default=6.0, help="wall s per node run")
    args = parser.parse_args()
    world = load_world(args.twin)
    print(
        f"cameras: head {world.cameras.head.width_px}x{world.cameras.head.height_px} RGB+depth at "
        f"{world.cameras.head.rate_hz} Hz, hand {world.cameras.hand.width_px}x"
        f"{world.cameras.hand.height_px} RGB at {world.cameras.hand.rate_hz} Hz; control "
        f"{world.physics.control_rate_hz} Hz; {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}"
    )
    cell_costs = bench_cell(args.twin, args.nominal, args.cell_seconds)
    node = bench_node(args.twin, args.nominal, args.node_seconds)

    rows = [
        ("SimCell (no ROS)", cell_costs.rtf_capacity, per_sim_second_ms(cell_costs)),
        ("real_twin node", node[0], per_sim_second_ms(node[1], node[2])),
    ]
    header = f"{'run':<24}{'RTF':>8}" + "".join(
        f"{k + ' ms/s':>22}" for k in ("physics", "render", "publish", "executor+other")
    )
    print()
    print(header)
    print("-" * len(header))
    for name, rtf, split in rows:
        cells = "".join(
            f"{split[k]:>22.1f}" if k in split else f"{'-':>22}"
            for k in ("physics", "render", "publish", "executor+other")
        )
        print(f"{name:<24}{rtf:>8.2f}{cells}")
    print("(ms/s = wall milliseconds per simulated second; RTF = simulated / wall seconds)")

    node_split = per_sim_second_ms(node[1], node[2])
    figures = [
        {
            "name": "twin_rtf_capacity_node",
            "value": round(node[0], 3),
            "unit": "x",
            "goal": ">= 1.0",
        },
        {
            "name": "twin_rtf_capacity_simcell",
            "value": round(cell_costs.rtf_capacity, 3),
            "unit": "x",
            "goal": ">= 1.0",
        },
    ]
    figures += [
        {
            "name": f"twin_{key.split('+')[0]}_ms_per_sim_s",
            "value": round(value, 1),
            "unit": "ms/s",
            "goal": None,
        }
        for key, value in node_split.items()
    ]
    benchlib.print_json_line("twin", figures)


if __name__ == "__main__":
    main()
