"""Grounding accuracy benchmark: ground against twins, then compare with their hidden truth.

Only this benchmark reads the twin files' values (to score the artifact); the procedure gets
them only as the twin cell it talks to. Run: ``MUJOCO_GL=egl python bench/bench_grounding.py``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    from r2s2r_calibration.cli import ground_in_process_twin
    from r2s2r_calibration.procedure import STEP_NAMES
    from r2s2r_calibration.report import build_report, format_report
    from r2s2r_sim.world import load_world

    nominal = load_world(ROOT / "config/world/nominal.yaml")
    figures = []
    for name in ("default", "perturbed"):
        path = ROOT / f"config/twin/{name}.yaml"
        started = time.perf_counter()
        run = ground_in_process_twin(path, nominal, list(STEP_NAMES), progress=print)
        wall = time.perf_counter() - started
        truth = load_world(path)  # benchmark only: score against the hidden truth
        print(f"[{name}] procedure wall time {wall:.1f} s; steps ok {run.steps_run}")
        figures.append({"twin": name, "figure": "wall_time_s", "value": wall})
        controller = run.artifact.controller
        if controller is not None:
            errors = []
            for joint, record in controller.gains.items():
                kp, kd = truth.controller.gains[joint].kp, truth.controller.gains[joint].kd
                errors.append(max(abs(record.kp / kp - 1), abs(record.kd / kd - 1)))
            worst = float(max(errors))
            period = 1.0 / truth.physics.control_rate_hz
            latency_error = abs((controller.latency_s or 0.0) - truth.controller.latency_s)
            print(f"[{name}] worst gain error {worst:.3%} (target 5%)")
            print(
                f"[{name}] latency error {latency_error * 1000:.2f} ms (target {period * 1000} ms)"
            )
            figures.append(
                {
                    "twin": name,
                    "figure": "gain_rel_error_max",
                    "value": worst,
                    "target": 0.05,
                    "pass": worst <= 0.05,
                }
            )
            figures.append(
                {
                    "twin": name,
                    "figure": "latency_error_s",
                    "value": latency_error,
                    "target": period,
                    "pass": latency_error <= period,
                }
            )
        report, _ = build_report(run, nominal)
        print(format_report(report))
        for axis in report:
            figures.append(
                {
                    "twin": name,
                    "figure": f"report_{axis.axis}_nominal",
                    "value": None if math.isnan(axis.before) else axis.before,
                }
            )
            figures.append(
                {
                    "twin": name,
                    "figure": f"report_{axis.axis}_grounded",
                    "value": None if math.isnan(axis.after) else axis.after,
                }
            )
            if axis.axis == "replay_joint_rms_rad" and not math.isnan(axis.improvement):
                figures.append(
                    {
                        "twin": name,
                        "figure": "replay_improvement",
                        "value": axis.improvement,
                        "target": 5.0,
                        "pass": axis.improvement >= 5.0,
                    }
                )
        for step, message in run.failures.items():
            print(f"[{name}] NOT MEASURED {step}: {message}")
            figures.append(
                {"twin": name, "figure": f"{step}", "value": None, "not_measured": message}
            )
    print(json.dumps({"benchmark": "grounding", "figures": figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
