"""Compare two records of one experiment directory: a refactor's cached rerun must change nothing.

Keep a copy of an experiment's ``results.json``, ``table.txt`` and ``command.txt`` (BEFORE),
rerun the same command with the new code on the same directory (every stage should be up to
date), then compare:

    cp EXP/{results.json,table.txt,command.txt} before/
    r2s2r experiment ...same options... --out EXP
    python bench/compare_experiment_records.py before EXP

Figures: stages the rerun ran (goal 0: the cache keys did not change), whether the table and
the reproduce command are byte-identical, and how many result fields differ outside the
session's own bookkeeping (wall time of this session, which stages were cached, the commit).
Every differing field is listed under the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import benchlib

SESSION_FIELDS = (
    "/metadata/session_wall_s",
    "/metadata/stage_cached/",
    "/metadata/stages_run_this_session",
    "/metadata/stages_skipped_this_session",
    "/commit",
)
"""What a rerun changes by being another session (not a result)."""


def differences(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """Yield the JSON paths at which two documents differ (a missing key is a difference)."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            where = f"{path}/{key}"
            if key not in before or key not in after:
                yield f"{where} ({'added' if key not in before else 'removed'})"
            else:
                yield from differences(before[key], after[key], where)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (left, right) in enumerate(zip(before, after, strict=True)):
            yield from differences(left, right, f"{path}[{index}]")
    elif before != after:
        yield path


def main() -> None:
    """Compare BEFORE and AFTER and print the figures."""
    args_parser = benchlib.parser(__doc__)
    args_parser.add_argument("before", type=Path, help="folder with the earlier record's files")
    args_parser.add_argument("after", type=Path, help="the experiment directory after the rerun")
    args = args_parser.parse_args()
    before = json.loads((args.before / "results.json").read_text())
    after = json.loads((args.after / "results.json").read_text())
    changed = list(differences(before, after))
    results = [d for d in changed if not d.startswith(SESSION_FIELDS)]
    ran = after["metadata"]["stages_run_this_session"]
    same = {
        name: (args.before / name).read_bytes() == (args.after / name).read_bytes()
        for name in ("table.txt", "command.txt")
    }
    benchlib.print_table(
        [
            benchlib.Figure("stages_rerun", len(ran), "stages", 0),
            benchlib.Figure(
                "stages_cached", len(after["metadata"]["stages_skipped_this_session"]), "stages"
            ),
            benchlib.Figure("table_identical", same["table.txt"], "", True),
            benchlib.Figure("command_identical", same["command.txt"], "", True),
            benchlib.Figure("result_fields_differing", len(results), "fields", 0),
        ]
    )
    for path in changed:
        print(f"  {'result ' if path in results else 'session'}  {path}")
    benchlib.print_json_line(
        "compare_experiment_records",
        [
            {"name": "stages_rerun", "value": len(ran), "unit": "stages", "goal": 0},
            {"name": "table_identical", "value": same["table.txt"], "unit": "", "goal": True},
            {"name": "command_identical", "value": same["command.txt"], "unit": "", "goal": True},
            {"name": "result_fields_differing", "value": len(results), "unit": "", "goal": 0},
        ],
        before=str(args.before),
        after=str(args.after),
        differing=changed,
    )


if __name__ == "__main__":
    main()
