"""Pool replicates of the 2x2 experiment: success counts and effects over every run's trials.

Run: ``python bench/pool_experiments.py RESULTS.json [RESULTS.json ...] [--out FILE.json]``.

Each argument is an ``r2s2r experiment`` record (``results/experiment_reduced*.json``). The
runs are replicates when they differ only in the training seed (or are fresh runs of one
command): their trials add up per policy and condition, and the effects (world, behavior,
fully grounded minus real only) are recomputed on the pooled counts with the experiment's own
:func:`~r2s2r.experiment.results.grounding_effects` (Agresti-Caffo 95 % intervals). The
intervals treat every trial as independent; replicates that share the evaluation's trial seeds
make them somewhat too narrow, so read them next to the per-run intervals.

Prints a table, then one JSON line ``{"benchmark": "pool_experiments", "figures": [...]}``
(pooled rates and effects; goals from issue 13: capacity >= 80 %, real only >= 40 % nominal
and >= 25 % overall, fully grounded minus real only >= 20 points overall and shifted, world
effect > 0). ``--out`` also writes the pooled table as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import benchlib
from r2s2r_policy.evaluation.report import ALL, SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL

from r2s2r.experiment.results import (
    REAL_ONLY,
    GroupResult,
    PolicyResult,
    grounding_effects,
    pooled_groups,
)

FULLY_GROUNDED = "grounded_mimicgen"


def load_record(path: Path) -> dict[str, Any]:
    """One experiment record; a clear error when it is not one."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"{path}: cannot read an experiment record ({error})") from None
    missing = [key for key in ("policies", "capacity", "commit") if not record.get(key)]
    if missing:
        raise SystemExit(f"{path}: not a finished experiment record (no {', '.join(missing)})")
    return record


def pool(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled capacity, per-policy groups and effects of ``records``."""
    names = list(records[0]["policies"])
    policies: dict[str, PolicyResult] = {}
    for name in names:
        world, behavior = (None, None) if name == REAL_ONLY else name.split("_", 1)
        policies[name] = PolicyResult(
            name=name, world=world, behavior=behavior, groups=pooled_groups(records, name)
        )
    capacity = GroupResult(
        sum(int(r["capacity"]["successes"]) for r in records),
        sum(int(r["capacity"]["trials"]) for r in records),
    )
    effects = {group: grounding_effects(policies, group) for group in (ALL, SHIFTED)}
    # Records before the field was written were all evaluated in process (the default).
    evaluators = sorted({r.get("evaluator") or "in_process" for r in records})
    if len(evaluators) > 1:
        raise SystemExit(f"records of different evaluators {evaluators} cannot be pooled")
    return {
        "evaluator": evaluators[0],
        "runs": [{"commit": r["commit"], "command": r.get("command", "")} for r in records],
        "capacity": capacity.to_dict(),
        "policies": {name: policy.to_dict()["groups"] for name, policy in policies.items()},
        "effects": {group: value.to_dict() for group, value in effects.items()},
    }


def _effect(effects: dict[str, Any], group: str, key: str) -> tuple[float, float, float]:
    entry = effects[group]
    value = entry["over_real_only"].get(FULLY_GROUNDED) if key == "full" else entry[key]
    if value is None:
        raise SystemExit(f"effect {key} on {group} trials: a co-trained policy is missing")
    low, high = value["ci95_points"]
    return value["points"], low, high


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("records", type=Path, nargs="+", help="experiment records (JSON)")
    parser.add_argument("--out", type=Path, help="write the pooled table here (JSON)")
    args = parser.parse_args()
    records = [load_record(path) for path in args.records]
    pooled = pool(records)
    print(f"{len(records)} runs pooled: " + ", ".join(r["commit"][:12] for r in pooled["runs"]))
    print(f"{'policy':22s} {'nominal':>12s} {'shifted':>12s} {'all':>12s}")
    capacity = pooled["capacity"]
    print(
        f"{'capacity':22s} {'':12s} {'':12s} {capacity['successes']:>5d}/{capacity['trials']:<6d}"
    )
    for name, groups in pooled["policies"].items():
        cells = [
            f"{groups[g]['successes']:>5d}/{groups[g]['trials']:<6d}"
            for g in (NOMINAL, SHIFTED, ALL)
        ]
        print(f"{name:22s} " + " ".join(cells))
    rows: list[tuple[str, float, str, str | None]] = [
        ("capacity_rate", 100.0 * capacity["rate"], "%", ">= 80"),
        (
            "real_only_nominal_rate",
            100.0 * pooled["policies"][REAL_ONLY][NOMINAL]["rate"],
            "%",
            ">= 40",
        ),
        ("real_only_all_rate", 100.0 * pooled["policies"][REAL_ONLY][ALL]["rate"], "%", ">= 25"),
    ]
    for group, label in ((ALL, "all"), (SHIFTED, "shifted")):
        for key, goal in (("full", ">= 20"), ("world", "> 0"), ("behavior", None)):
            points, low, high = _effect(pooled["effects"], group, key)
            name = "grounded_mimicgen_minus_real_only" if key == "full" else f"{key}_effect"
            rows += [
                (f"{name}_{label}", points, "points", goal),
                (f"{name}_{label}_ci95_low", low, "points", None),
                (f"{name}_{label}_ci95_high", high, "points", None),
            ]
    print(f"{'figure':52s} {'value':>9s} {'unit':7s} goal")
    for name, value, unit, goal in rows:
        print(f"{name:52s} {value:9.1f} {unit:7s} {goal or '-'}")
    if args.out is not None:
        args.out.write_text(json.dumps(pooled, indent=2) + "\n")
        print(f"pooled table: {args.out}")
    figures = [
        {"name": name, "value": round(value, 2), "unit": unit, "goal": goal}
        for name, value, unit, goal in rows
    ]
    benchlib.print_json_line("pool_experiments", figures)


if __name__ == "__main__":
    main()
