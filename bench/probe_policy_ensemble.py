"""Validation probe: several checkpoints' mean chunk, evaluated in process on validation seeds.

Each control step every member predicts its chunk (joint targets, rad) and the engine executes
their mean, with the reduced experiment preset's twin and execution (as
``policy_validation.py``). Used to ask whether averaging independently trained real-only
policies (different training seeds) makes them more precise.

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
from policy_validation import tally
from r2s2r_policy.checkpoint import load_checkpoint
from r2s2r_policy.evaluation.in_process import evaluate_in_process
from r2s2r_policy.evaluation.trials import VALIDATION_BASE_SEED, EvaluationConfig
from r2s2r_policy.inference.engine import InferenceConfig

from r2s2r.experiment.config import load_preset


def main() -> int:
    """Evaluate the members' mean chunk; write and print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("trials", help="CONDITION=COUNT[,CONDITION=COUNT...]")
    parser.add_argument("checkpoints", nargs="+", help="member checkpoint folders")
    parser.add_argument("--base-seed", type=int, default=VALIDATION_BASE_SEED)
    args = parser.parse_args()
    if args.base_seed < VALIDATION_BASE_SEED:
        parser.error(f"validation seeds start at {VALIDATION_BASE_SEED}")
    counts = {k: int(v) for k, v in (item.split("=") for item in args.trials.split(","))}
    members = [load_checkpoint(path).policy.eval() for path in args.checkpoints]
    predictors = [member.predict_chunk for member in members]

    def mean_chunk(observation: Mapping[str, np.ndarray]) -> np.ndarray:
        return np.mean([predict(observation) for predict in predictors], axis=0).astype(np.float32)

    lead = members[0]
    lead.predict_chunk = mean_chunk  # type: ignore[method-assign]
    protocol = EvaluationConfig(trials_per_condition=counts, base_seed=args.base_seed)
    preset = load_preset("reduced")
    started = time.monotonic()
    report = evaluate_in_process(
        lead,
        protocol,
        twin_config_path=preset.twin_config,
        inference=InferenceConfig(execution=preset.execution, executed_steps=preset.executed_steps),
    )
    by_condition, failures = tally(report.records)
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
