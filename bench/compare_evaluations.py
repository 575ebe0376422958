"""Two evaluations of the same trials, compared seed by seed.

Each argument pair is two ``evaluation.json`` reports (``r2s2r evaluate ... --out DIR``) of one
policy on the same protocol, e.g. the in-process evaluator before and after a change, or the
ROS graph at two real-time factors; several pairs are pooled::

    python bench/compare_evaluations.py A1/evaluation.json B1/evaluation.json \\
        [A2/evaluation.json B2/evaluation.json ...] [--out FILE.json]

Printed per pair and pooled: per-seed agreement, McNemar's exact test on the discordant pairs,
both success rates (trials either side did not run are left out).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import benchlib


def load_records(path: Path) -> list[Any]:
    """Trial records of an evaluation report."""
    from r2s2r_policy.evaluation.trials import TrialRecord

    try:
        data = json.loads(path.read_text())
        return [TrialRecord(**trial) for trial in data["trials"]]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise SystemExit(f"{path}: not an evaluation report ({error})") from None


def main() -> None:
    """Compare the reports (see the module docstring)."""
    from r2s2r_policy.evaluation.fidelity import pair_records, paired_summary

    parser = benchlib.parser(__doc__)
    parser.add_argument("reports", nargs="+", type=Path, help="FIRST SECOND [FIRST SECOND ...]")
    parser.add_argument("--out", type=Path, default=None, help="Write the comparison as JSON.")
    args = parser.parse_args()
    if len(args.reports) % 2:
        raise SystemExit("expected pairs of reports: FIRST SECOND [FIRST SECOND ...]")
    rows: list[dict[str, Any]] = []
    firsts: list[bool] = []
    seconds: list[bool] = []
    for first_path, second_path in zip(args.reports[::2], args.reports[1::2], strict=True):
        try:
            pairs = pair_records(load_records(first_path), load_records(second_path))
        except ValueError as error:
            raise SystemExit(f"{first_path} vs {second_path}: {error}") from None
        pairs = [(a, b) for a, b in pairs if not a.not_run and not b.not_run]
        if not pairs:
            raise SystemExit(f"{first_path} vs {second_path}: no trial ran in both")
        summary = paired_summary([a.success for a, _ in pairs], [b.success for _, b in pairs])
        firsts += [a.success for a, _ in pairs]
        seconds += [b.success for _, b in pairs]
        rows.append(
            {
                "first": str(first_path),
                "second": str(second_path),
                **summary.to_dict(),
                "differing_seeds": [a.seed for a, b in pairs if a.success != b.success],
            }
        )
        print(
            f"{first_path.parent} vs {second_path.parent}: {summary.pairs} pairs, "
            f"agree {summary.agreement:.0%}, {summary.first_successes} vs "
            f"{summary.second_successes} successes, McNemar p {summary.mcnemar_p:.2f}"
        )
    pooled = paired_summary(firsts, seconds)
    figures = [
        benchlib.Figure("paired trials", pooled.pairs),
        benchlib.Figure("per-seed agreement", round(100 * pooled.agreement, 1), "%"),
        benchlib.Figure("McNemar exact p", round(pooled.mcnemar_p, 3)),
        benchlib.Figure("success, first", pooled.first_successes),
        benchlib.Figure("success, second", pooled.second_successes),
    ]
    benchlib.print_table(figures, "pooled")
    if args.out is not None:
        args.out.write_text(json.dumps({"pairs": rows, "pooled": pooled.to_dict()}, indent=1))
    benchlib.print_json_line("compare_evaluations", figures)


if __name__ == "__main__":
    main()
