"""Pool runs of the visual-translation experiment: success counts and contrasts over every run.

Run: ``python bench/pool_translation.py SUMMARY.json [SUMMARY.json ...] [--out FILE.json]``.

Each argument is an ``r2s2r experiment --preset translation`` record
(``results/translation_*.json``): training seeds, or cells (twins), whose policies share names.
Their trials add up per policy and condition, and the finding's contrasts (translated minus
rendered, few real + translated minus all real, ...) are recomputed on the pooled counts with
the experiment's own :func:`~r2s2r.experiment.translation.contrasts` (Agresti-Caffo 95 %
intervals, which treat every trial as independent: replicates that share trial seeds make them
somewhat narrow). Prints the table, then one JSON line ``{"benchmark": "pool_translation",
"figures": [...]}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import benchlib
from r2s2r_policy.evaluation.report import ALL

from r2s2r.experiment.translation import pool_records


def load_translation_record(path: Path) -> dict[str, Any]:
    """One translation record; a clear error when it is not one."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"{path}: cannot read a translation record ({error})") from None
    if "plan" not in record or "policies" not in record:
        raise SystemExit(f"{path}: not a translation experiment record (no plan or policies)")
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="also write the pooled JSON")
    args = parser.parse_args()
    records = [load_translation_record(p) for p in args.records]
    policies, effects, table = pool_records(records)
    print(f"{len(records)} runs pooled: {', '.join(str(p) for p in args.records)}")
    print(table)
    figures = [
        {"name": f"{p.name}_all", "value": round(100 * p.groups[ALL].rate, 1), "unit": "%",
         "goal": None}
        for p in policies
    ]  # fmt: skip
    for label, effect in effects[ALL].items():
        if effect is not None:
            figures.append(
                {"name": label, "value": round(effect["points"], 1), "unit": "points",
                 "goal": None}
            )  # fmt: skip
    if args.out:
        pooled = {
            "runs": [str(p) for p in args.records],
            "commits": [r.get("commit", "") for r in records],
            "policies": {p.name: p.to_dict()["groups"] for p in policies},
            "effects": effects,
        }
        args.out.write_text(json.dumps(pooled, indent=2) + "\n")
    benchlib.print_json_line("pool_translation", figures, runs=len(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
