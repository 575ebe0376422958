"""Generation benchmark: yield and episodes/min per configuration, overhead vs raw sim, scaling.

Run: python bench/bench_datagen.py [--attempts 50] [--workers 2]

- Per configuration of config/datagen/configurations.yaml whose generator (and, for grounded
  ones, grounding artifact) exists here: yield and episodes/min for N attempts on the local
  process pool. Configurations that cannot run are listed with the reason.
- Overhead: generation throughput (episodes per worker-minute, everything a job does: trial,
  recording, resize, HDF5 write) over the raw simulator's step+render throughput for the same
  episode length (physics steps + both cameras rendered at every frame, nothing else).
  Goal >= 0.7. Measured on the first available generator, else on the test-only scripted
  generator (src/r2s2r_datagen/test/datagen_test_generators.py), which is labelled as such.
- Scaling: end-to-end episodes/min with 2 workers over 1 worker (goal >= 1.7x).

The last line is one JSON object: {"benchmark": "datagen", "figures": [...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

REPO = Path(__file__).resolve().parents[1]
TEST_DIR = REPO / "src" / "r2s2r_datagen" / "test"
SCRIPTED = "datagen_test_generators:make_scripted_generator"

from r2s2r_datagen.config import GenerateConfig, bundled_configurations_path  # noqa: E402
from r2s2r_datagen.configurations import (  # noqa: E402
    load_datagen_config,
    make_jobs,
    prepare_configurations,
)
from r2s2r_datagen.ledger import Ledger  # noqa: E402
from r2s2r_datagen.runner import run_generation  # noqa: E402
from r2s2r_sim.mujoco_backend import MujocoBackend  # noqa: E402
from r2s2r_sim.task import TrialRunner  # noqa: E402


def run(config_path: Path, names: list[str], attempts: int, workers: int, out: Path,
        overrides: list[str]) -> tuple[dict, float, list[dict]]:  # fmt: skip
    config = GenerateConfig(
        configurations_path=str(config_path),
        configurations=names,
        episodes_per_configuration=attempts,
        workers=workers,
        output_dir=str(out),
        resume=False,
        generator_overrides=overrides,
        progress=False,
    )
    started = time.perf_counter()
    summary = run_generation(config, log=lambda _text: None)
    elapsed = time.perf_counter() - started
    summary_dict = summary.as_dict()
    summary_dict["end_to_end_s"] = elapsed
    return summary_dict, summary.jobs_elapsed_s, Ledger(out / "ledger.jsonl").records()


def raw_seconds_per_frame(config_path: Path, steps_per_frame: int, frames: int = 60) -> float:
    """Physics for one frame period + both cameras rendered, on the episode's scene."""
    datagen = load_datagen_config(config_path)
    nominal, prepared = prepare_configurations(
        datagen, config_path, ["nominal_planner"], generator_overrides={"planner": SCRIPTED}
    )
    job = make_jobs(nominal, prepared, [0], 0, datagen)[0]
    backend = MujocoBackend(enable_rendering=True)
    runner = TrialRunner(backend, job.world, job.plan)
    runner.start()
    runner.step(steps_per_frame * 10)  # object on the belt
    started = time.perf_counter()
    for _ in range(frames):
        backend.step(steps_per_frame)
        backend.render("head_camera")
        backend.render("hand_camera")
    return (time.perf_counter() - started) / frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=50, help="episodes per configuration")
    parser.add_argument("--workers", type=int, default=2, help="workers for the yield runs")
    args = parser.parse_args()
    sys.path.insert(0, str(TEST_DIR))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TEST_DIR), os.environ.get("PYTHONPATH", "")])
    config_path = bundled_configurations_path()
    datagen = load_datagen_config(config_path)
    _, prepared = prepare_configurations(datagen, config_path)
    figures: list[dict] = []
    rows: list[tuple[str, str, str, str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench_datagen_"))
    available = [p.spec.name for p in prepared if p.unavailable is None]
    for entry in prepared:
        name = entry.spec.name
        if entry.unavailable:
            rows.append((name, "-", "-", "-", f"not available: {entry.unavailable[:70]}"))
            continue
        summary, elapsed, _ = run(config_path, [name], args.attempts, args.workers,
                                  tmp / name, [])  # fmt: skip
        elapsed = summary["end_to_end_s"]
        (item,) = summary["configurations"]
        rate = item["finished"] / (elapsed / 60.0)
        rows.append((name, f"{item['attempts']}", f"{item['yield'] or 0:.0%}", f"{rate:.1f}", ""))
        figures.append({"name": f"{name}_yield", "value": item["yield"],
                        "unit": "successes/attempt", "goal": None})  # fmt: skip
        figures.append({"name": f"{name}_episodes_per_min", "value": round(rate, 2),
                        "unit": "episodes/min", "goal": None})  # fmt: skip

    # Overhead and scaling: on the first available generator, else the scripted test one.
    if available:
        label, names, overrides = available[0], [available[0]], []
    else:
        label, names, overrides = (
            "scripted (test-only)",
            ["nominal_planner"],
            [f"planner={SCRIPTED}"],
        )
    s1, elapsed_1, records_1 = run(config_path, names, args.attempts, 1, tmp / "w1", overrides)
    s2, elapsed_2, _ = run(config_path, names, args.attempts, 2, tmp / "w2", overrides)
    frames = [r["frames"] for r in records_1 if r["frames"]]
    worker_s = sum(r["timings"]["total"] for r in records_1)
    steps_per_frame = round(1.0 / (datagen.recording.rate_hz * 0.002))
    raw_frame_s = raw_seconds_per_frame(config_path, steps_per_frame)
    mean_frames = statistics.mean(frames) if frames else 0.0
    gen_rate = len(records_1) / (worker_s / 60.0)
    raw_rate = 60.0 / (mean_frames * raw_frame_s) if mean_frames else 0.0
    ratio = gen_rate / raw_rate if raw_rate else 0.0
    rate_1 = len(records_1) / (elapsed_1 / 60.0)
    rate_2 = args.attempts / (elapsed_2 / 60.0)
    scaling = rate_2 / rate_1

    print(f"\nsim_generate benchmark ({args.attempts} attempts per configuration, "
          f"{args.workers} workers, {os.cpu_count()} CPUs)")  # fmt: skip
    print(f"{'configuration':<22}{'attempts':>9}{'yield':>7}{'ep/min':>8}  note")
    for name, attempts, yld, rate, note in rows:
        print(f"{name:<22}{attempts:>9}{yld:>7}{rate:>8}  {note}")
    print(f"\noverhead and scaling measured on: {label}")
    print(f"  mean episode length            {mean_frames:8.1f} frames")
    print(f"  generation, 1 worker           {gen_rate:8.1f} episodes per worker-minute")
    print(f"  raw step+render, same length   {raw_rate:8.1f} episodes/min")
    print(f"  ratio (goal >= 0.7)            {ratio:8.2f}")
    print(
        f"  jobs, 1 worker                 {rate_1:8.1f} episodes/min ({elapsed_1:.1f} s; "
        f"{s1['end_to_end_s']:.1f} s with start-up and merge)"
    )
    print(
        f"  jobs, 2 workers                {rate_2:8.1f} episodes/min ({elapsed_2:.1f} s; "
        f"{s2['end_to_end_s']:.1f} s with start-up and merge)"
    )
    print(f"  scaling 1 -> 2 (goal >= 1.7)   {scaling:8.2f}x")
    figures += [
        {"name": "generation_vs_raw_sim_ratio", "value": round(ratio, 3), "unit": "ratio",
         "goal": 0.7},
        {"name": "episodes_per_min_1_worker", "value": round(rate_1, 2), "unit": "episodes/min",
         "goal": None},
        {"name": "episodes_per_min_2_workers", "value": round(rate_2, 2), "unit": "episodes/min",
         "goal": None},
        {"name": "scaling_1_to_2_workers", "value": round(scaling, 3), "unit": "x", "goal": 1.7},
        {"name": "overhead_measured_on", "value": label, "unit": "", "goal": None},
    ]  # fmt: skip
    print(json.dumps({"benchmark": "datagen", "figures": figures}))


if __name__ == "__main__":
    main()
