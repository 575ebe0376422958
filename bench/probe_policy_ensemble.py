"""Validation probe: several checkpoints' mean chunk, evaluated in process on validation seeds.

Each control step every member predicts its chunk (joint targets, rad) and the engine executes
their mean, with the preset's execution (temporal ensembling). Used to ask whether averaging
independently trained real-only policies (different training seeds) makes them more precise.

    python bench/probe_policy_ensemble.py OUT.json nominal=20,lighting=20 CKPT [CKPT ...] \
        [--base-seed 20000]

Prints one JSON line (successes per condition, failure reasons) and writes it to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from r2s2r_policy.checkpoint import load_checkpoint
from r2s2r_policy.evaluation.in_process import evaluate_in_process
from r2s2r_policy.evaluation.trials import EvaluationConfig
from r2s2r_policy.inference import InferenceConfig

VALIDATION_BASE_SEED = 20_000


def main() -> int:
    """Evaluate the members' mean chunk; write and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("trials", help="CONDITION=COUNT[,CONDITION=COUNT...]")
    parser.add_argument("checkpoints", nargs="+", help="member checkpoint folders")
    parser.add_argument("--base-seed", type=int, default=VALIDATION_BASE_SEED)
    args = parser.parse_args()
    if args.base_seed < VALIDATION_BASE_SEED:
        parser.error("validation seeds start at 20000")
    counts = {k: int(v) for k, v in (item.split("=") for item in args.trials.split(","))}
    members = [load_checkpoint(path).policy.eval() for path in args.checkpoints]
    predictors = [member.predict_chunk for member in members]

    def mean_chunk(observation: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.mean([predict(observation) for predict in predictors], axis=0).astype(np.float32)

    lead = members[0]
    lead.predict_chunk = mean_chunk  # type: ignore[method-assign]
    protocol = EvaluationConfig(trials_per_condition=counts, base_seed=args.base_seed)
    started = time.monotonic()
    report = evaluate_in_process(
        lead,
        protocol,
        twin_config_path="twin/default.yaml",
        inference=InferenceConfig(execution="temporal_ensemble", executed_steps=3),
    )
    by_condition: dict[str, list[int]] = {}
    failures: dict[str, int] = {}
    for record in report.records:
        tally = by_condition.setdefault(record.condition, [0, 0])
        tally[0] += int(record.success)
        tally[1] += 1
        if not record.success:
            failures[record.reason] = failures.get(record.reason, 0) + 1
    row = {
        "members": args.checkpoints,
        "by_condition": by_condition,
        "failures": failures,
        "eval_s": round(time.monotonic() - started, 1),
    }
    Path(args.out).write_text(json.dumps(row, indent=1))
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
