"""MimicGen-with-moving-objects benchmark: yield, failure reasons and time per attempt.

Source demonstrations: N human-like demonstrations played by the demonstrator on the twin's
world through the backend driver (the stand-in for demos recorded on the real cell; object
poses from the backend standing in for the tracker), cached in a temp dir (or --cache).
Then M generation attempts (one rollout each, ``max_attempts = 1``, so the yield is per
attempt, as MimicGen reports it) on the same M sampled trials (belt speed randomized over the
nominal range) in:

- ``nominal``: the uncalibrated world (what nominal_mimicgen generates in);
- ``twin (upper bound)``: the twin's own world, i.e. a perfectly grounded world. Labelled an
  upper bound: no grounding recovers the twin exactly;
- ``nominal, static frame (ablation)``: MimicGen's object pose read once per subtask.

Anchors: MimicGen users call 20-30 % normal; Isaac Lab Mimic reports up to 70 % on simple
tasks.

Run: source scripts/env.sh && python bench/bench_mimicgen.py [--demos 10] [--attempts 20]
The last line is one JSON object: {"benchmark": "mimicgen", "figures": [...]}.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import benchlib
from r2s2r_datagen.config import RecordingConfig
from r2s2r_datagen.generator import EpisodeJob, EpisodeSkipped
from r2s2r_datagen.mimicgen.config import load_mimicgen_config
from r2s2r_datagen.mimicgen.demos import write_demonstrations
from r2s2r_datagen.mimicgen.generator import generator_from_dataset
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.task import sample_trial
from r2s2r_world.world import WorldParams, load_world

REPO = Path(__file__).resolve().parents[1]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
TWIN = REPO / "config" / "twin" / "default.yaml"


def source_demos(
    cache: Path, count: int, backend: MujocoBackend, recording: RecordingConfig
) -> Path:
    """The cached demo dataset (recorded on first use)."""
    path = cache / f"demos_{count}.hdf5"
    if not path.exists():
        started = time.perf_counter()
        episodes = write_demonstrations(
            path, backend, load_world(TWIN), list(range(count)), load_world(NOMINAL), recording
        )
        ok = sum(e.metadata.outcome == "success" for e in episodes)
        print(f"recorded {count} demos ({ok} successful) in {time.perf_counter() - started:.1f} s")
    return path


def run_condition(
    label: str,
    world: WorldParams,
    nominal: WorldParams,
    dataset: Path,
    attempts: int,
    backend: MujocoBackend,
    recording: RecordingConfig,
    **options: object,
) -> dict[str, object]:
    """M single-rollout generations; yield, reasons, seconds per attempt."""
    config, _ = load_mimicgen_config()
    params = config.generation.model_copy(update={"max_attempts": 1, **options})
    generator = generator_from_dataset(dataset, config, NOMINAL, params)
    reasons: Counter[str] = Counter()
    seconds = []
    for index in range(attempts):
        seed = 1000 + index
        plan = sample_trial(nominal, seed, randomize_belt_speed=True)
        job = EpisodeJob(label, "mimicgen", index, seed, world, label, plan, 0, recording)
        started = time.perf_counter()
        try:
            result = generator.generate(job, backend)
            reasons[result.outcome] += 1
        except EpisodeSkipped as skipped:
            reasons[skipped.reason] += 1
        seconds.append(time.perf_counter() - started)
    successes = reasons.get("success", 0)
    return {
        "label": label,
        "attempts": attempts,
        "successes": successes,
        "yield": successes / attempts,
        "s_per_attempt": sum(seconds) / len(seconds),
        "reasons": dict(reasons),
        "source_skipped": dict(generator.library.skipped),
        "sources": len(generator.library.demos),
    }


def main() -> None:
    """Run the benchmark and print the table and the JSON line."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--demos", type=int, default=10, help="source demonstrations N")
    parser.add_argument("--attempts", type=int, default=20, help="generation attempts M")
    parser.add_argument("--cache", type=Path, default=None, help="demo cache dir (default: temp)")
    args = parser.parse_args()
    recording = RecordingConfig()  # the dataset's 10 Hz, 128 x 128 images
    backend = MujocoBackend(enable_rendering=True)
    nominal, twin = load_world(NOMINAL), load_world(TWIN)
    with tempfile.TemporaryDirectory() as temp:
        cache = args.cache or Path(temp)
        cache.mkdir(parents=True, exist_ok=True)
        dataset = source_demos(cache, args.demos, backend, recording)
        rows = [
            run_condition("nominal", nominal, nominal, dataset, args.attempts, backend, recording),
            run_condition(
                "twin (upper bound)", twin, nominal, dataset, args.attempts, backend, recording
            ),
            run_condition(
                "nominal, static frame (ablation)",
                nominal,
                nominal,
                dataset,
                args.attempts,
                backend,
                recording,
                moving_frame=False,
            ),
        ]
    print(f"\nMimicGen with moving objects: {args.demos} source demos, {args.attempts} attempts")
    print(f"usable sources {rows[0]['sources']}, skipped {rows[0]['source_skipped']}")
    print(f"{'world':36s} {'yield':>7s} {'s/attempt':>10s}  failure reasons")
    for row in rows:
        failures = {k: v for k, v in row["reasons"].items() if k != "success"}  # type: ignore[union-attr]
        print(f"{row['label']:36s} {row['yield']:7.0%} {row['s_per_attempt']:10.2f}  {failures}")
    print("anchors: MimicGen users call 20-30 % normal; Isaac Lab Mimic up to 70 % (simple tasks)")
    figures = []
    for row, key in zip(
        rows, ("nominal", "twin_upper_bound", "nominal_static_ablation"), strict=True
    ):
        figures.append(
            {
                "name": f"yield_{key}",
                "value": round(float(row["yield"]), 3),
                "unit": "fraction",
                "goal": ">= 0.2 (MimicGen normal 0.2-0.3)" if "ablation" not in key else "-",
            }
        )
        figures.append(
            {
                "name": f"s_per_attempt_{key}",
                "value": round(float(row["s_per_attempt"]), 2),
                "unit": "s",
                "goal": "-",
            }
        )
    figures.append(
        {
            "name": "failure_reasons_nominal",
            "value": rows[0]["reasons"],
            "unit": "count",
            "goal": "-",
        }
    )
    benchlib.print_json_line("mimicgen", figures)


if __name__ == "__main__":
    main()
