"""Grounding on a family of twins: pass rate, median and worst of every figure.

Samples one twin per seed from ``config/twin/family.yaml`` (:mod:`r2s2r_sim.twin_family`),
writes it under ``--out``, grounds against it and scores the artifact against the twin's
truth with the figures of ``bench_grounding.py`` (plus the replay improvement, here required on
every twin, and whether each reported 95 % interval contains the true error). Only this
benchmark reads the twins' values; the procedure gets each one only as the cell it talks to.

- ``--mode inprocess`` (default): the twin's :class:`SimCell` in this process, as
  ``bench_grounding.py`` does;
- ``--mode ros``: ``r2s2r ground --launch real_deploy`` against each twin (use a few seeds:
  each run takes about five minutes).

A failed figure prints the seed; ``--seeds N`` re-runs that twin alone. ``--outer-fifth`` draws
every axis from the outer fifth of its range (cells set up in a hurry). Twins are loaded without
refusing any outside the family (e.g. an edited family file): one warning line per parameter
outside its range, then the same scoring.

Run: ``MUJOCO_GL=egl python bench/bench_grounding_family.py [--seeds 0:20] [--outer-fifth]
[--mode ros]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")

import bench_grounding  # noqa: E402  (the single-twin benchmark's grounding and scoring)
import benchlib  # noqa: E402

REPLAY_GOAL = 50.0
"""Replay improvement required on every twin of the family."""
PASS_GOAL = 19.0 / 20.0
"""Fraction of twins on which each figure must pass."""
COVERAGE_GOAL = 0.90
"""Fraction of (twin, quantity) pairs whose 95 % interval must contain the true error."""


def replay_figure(twin: str, improvement: float | None) -> dict[str, Any]:
    """The replay-improvement figure of one twin (not measured: None, and a failure)."""
    value = float(improvement) if improvement is not None and math.isfinite(improvement) else None
    return {
        "twin": twin,
        "figure": "replay_improvement",
        "value": value,
        "target": REPLAY_GOAL,
        "higher_is_better": True,
        "pass": value is not None and value >= REPLAY_GOAL,
    }


def ground_one(seed: int, path: Path, nominal: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Ground one twin; return its figures, wall time and step failures."""
    from r2s2r_calibration.artifact import load_artifact
    from r2s2r_calibration.report import build_report
    from r2s2r_world.world import load_world

    truth = load_world(path)
    name = f"seed {seed}"
    figures: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    if args.mode == "inprocess":
        run, wall = bench_grounding.ground_in_process(path, nominal, progress=args.verbose)
        artifact = run.artifact
        failures = dict(run.failures)
        report, _ = build_report(run, nominal)
        for axis in report:
            if axis.axis == "replay_joint_rms_rad":
                figures.append(replay_figure(name, axis.improvement))
    else:
        output = ROOT / args.out / f"artifact_{seed:04d}.yaml"
        wall = bench_grounding.ground_over_ros(path, output, args.rtf)
        if not output.is_file():
            return {"seed": seed, "figures": [], "wall_s": wall, "failures": {"all": "no artifact"}}
        artifact = load_artifact(output)
        report_path = output.with_name(output.stem + ".report.json")
        if report_path.is_file():
            report = json.loads(report_path.read_text())
            for axis in report.get("figures", []) if isinstance(report, dict) else report:
                if axis.get("axis") == "replay_joint_rms_rad":
                    figures.append(replay_figure(name, axis.get("improvement")))
    figures += bench_grounding.score(name, artifact, truth, nominal, quiet=not args.verbose)
    return {"seed": seed, "figures": figures, "wall_s": wall, "failures": failures}


def summarise(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per figure: pass rate, median and worst value over the twins, and the failing seeds."""
    by_figure: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for result in results:
        for entry in result["figures"]:
            if "target" in entry:
                by_figure.setdefault(entry["figure"], []).append((result["seed"], entry))
    rows = []
    for figure, entries in by_figure.items():
        higher = bool(entries[0][1].get("higher_is_better"))
        values = [e["value"] for _, e in entries if e["value"] is not None]
        measured = len(values)
        if values:
            worst = min(values) if higher else max(values)
            median = float(np.median(values))
        else:
            worst = median = math.nan
        failed = [seed for seed, e in entries if not e.get("pass")]
        rows.append(
            {
                "figure": figure,
                "target": entries[0][1]["target"],
                "higher_is_better": higher,
                "twins": len(entries),
                "measured": measured,
                "passed": len(entries) - len(failed),
                "pass_rate": (len(entries) - len(failed)) / len(entries),
                "median": median,
                "worst": worst,
                "failed_seeds": failed,
            }
        )
    return rows


def coverage_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per figure with reported intervals: how often the true error lay inside them.

    A figure may cover several quantities per twin (fx and fy; kp and kd of every joint); each
    is one trial.
    """
    by_figure: dict[str, list[tuple[int, bool]]] = {}
    for result in results:
        for entry in result["figures"]:
            for ok in entry.get("inside_interval") or []:
                by_figure.setdefault(entry["figure"], []).append((result["seed"], bool(ok)))
    rows = []
    for figure, entries in by_figure.items():
        inside = sum(1 for _, ok in entries if ok)
        rows.append(
            {
                "figure": figure,
                "quantities": len(entries),
                "inside": inside,
                "coverage": inside / len(entries),
                "outside_seeds": sorted({seed for seed, ok in entries if not ok}),
            }
        )
    return rows


def main() -> int:
    """Run the benchmark; the last line is one JSON object with every figure."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--seeds", default="0:20", help="Twin seeds: A:B, A,B,C or one seed.")
    parser.add_argument("--mode", choices=["inprocess", "ros"], default="inprocess")
    parser.add_argument("--rtf", type=float, default=1.0, help="Twin real-time factor (ros).")
    parser.add_argument("--out", default="runs/bench_grounding_family", help="Twins, artifacts.")
    parser.add_argument("--family", default="twin/family.yaml")
    parser.add_argument(
        "--outer-fifth",
        action="store_true",
        help="Draw every axis from the outer fifth of its range (twin_outer_fifth_<seed>.yaml).",
    )
    parser.add_argument("--verbose", action="store_true", help="Print the procedure's progress.")
    args = parser.parse_args()
    from r2s2r_common.config import resolve_config_path
    from r2s2r_sim.twin_family import (
        OUTER_FIFTH,
        load_family,
        load_twin_with_warnings,
        parse_seeds,
        write_family_twins,
    )
    from r2s2r_world.world import load_world

    nominal_path = ROOT / "config/world/nominal.yaml"
    family_path = resolve_config_path(args.family)
    nominal = load_world(nominal_path)
    family = load_family(family_path)
    seeds = parse_seeds(args.seeds)
    outer_fraction = OUTER_FIFTH if args.outer_fifth else 0.0
    paths = write_family_twins(nominal_path, family_path, seeds, ROOT / args.out, outer_fraction)
    results = []
    started = time.perf_counter()
    for seed, path in zip(seeds, paths, strict=True):
        # Scored whatever it is: a twin outside the family gets one warning line per parameter.
        load_twin_with_warnings(path, nominal, family, lambda line: print(f"warning: {line}"))
        result = ground_one(seed, path, nominal, args)
        results.append(result)
        failed = [e for e in result["figures"] if "target" in e and not e.get("pass")]
        status = "all pass" if not failed else f"{len(failed)} FAIL"
        print(f"[seed {seed}] {result['wall_s']:.0f} s, {status}", flush=True)
        for entry in failed:
            value = "not measured" if entry["value"] is None else f"{entry['value']:.4g}"
            print(
                f"    FAIL {entry['figure']} = {value} (target {entry['target']}); reproduce: "
                f"python bench/bench_grounding_family.py --seeds {seed} --mode {args.mode}"
            )
        for step, message in result["failures"].items():
            print(f"    step {step} refused: {message}")
    total = time.perf_counter() - started
    rows = summarise(results)
    cover = coverage_rows(results)
    walls = [r["wall_s"] for r in results]
    print()
    print(f"{len(results)} twins ({args.mode}), seeds {args.seeds}, total {total:.0f} s")
    print(f"{'figure':<34} {'target':>8} {'pass':>7} {'median':>10} {'worst':>10}  failing seeds")
    for row in rows:
        print(
            f"{row['figure']:<34} {row['target']:>8.4g} {row['passed']:>3}/{row['twins']:<3} "
            f"{row['median']:>10.4g} {row['worst']:>10.4g}  {row['failed_seeds'] or ''}"
        )
    print(
        f"{'procedure wall time (s)':<34} {'':>8} {'':>7} {float(np.median(walls)):>10.1f} "
        f"{max(walls):>10.1f}"
    )
    if cover:
        print()
        print(f"{'95 % interval coverage':<34} {'inside':>9} {'coverage':>9}  outside on seeds")
        for row in cover:
            print(
                f"{row['figure']:<34} {row['inside']:>4}/{row['quantities']:<4} "
                f"{row['coverage']:>9.0%}  {row['outside_seeds'] or ''}"
            )
    figures: list[dict[str, Any]] = []
    for row in rows:
        figures.append(
            {
                "name": f"{row['figure']}_pass_rate",
                "value": row["pass_rate"],
                "unit": "fraction of twins",
                "goal": 1.0 if row["figure"] == "replay_improvement" else PASS_GOAL,
                "median": row["median"],
                "worst": row["worst"],
                "target": row["target"],
                "failed_seeds": row["failed_seeds"],
            }
        )
    for row in cover:
        figures.append(
            {
                "name": f"{row['figure']}_interval_coverage",
                "value": row["coverage"],
                "unit": "fraction of twins",
                "goal": COVERAGE_GOAL,
                "outside_seeds": row["outside_seeds"],
            }
        )
    figures.append(
        {
            "name": "procedure_wall_time_s",
            "value": float(np.median(walls)),
            "worst": max(walls),
            "unit": "s",
            "goal": None,
            "mode": args.mode,
        }
    )
    benchlib.print_json_line(
        "grounding_family", figures, seeds=seeds, outer_fraction=outer_fraction
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
