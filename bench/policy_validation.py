"""Choose policy settings on validation seeds: train variants, evaluate them on the twin.

The experiment's evaluation trials (seeds 10000 and up) must never choose a hyper-parameter.
This script is how choices are made instead: each variant (a dotted override of the preset's
training config, e.g. ``policy.palm_object_features=true``) is trained exactly as the experiment
trains its policies (``r2s2r.experiment.training.train_config_for`` on the preset) and
evaluated in process on the twin on *validation* seeds (20000 and up by default), the same
seeds for every variant. It prints a table and ends with one JSON line.

Example (real-only variants on the experiment's recorded demonstrations)::

    python bench/policy_validation.py --real runs/exp/r1/demos/real_demos.hdf5 \\
        --variant baseline: --variant palm:policy.palm_object_features=true \\
        --trials nominal=20 --out runs/validation/real_only

A co-trained variant adds ``--sim PATH``; the capacity check trains on ``--sim`` alone
(``--sim-ratio 1``) and evaluates in ``--world world/nominal.yaml``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from r2s2r_policy.evaluation.trials import VALIDATION_BASE_SEED


def parse_value(text: str) -> Any:
    """A YAML scalar or list from the command line (``true``, ``3``, ``[512, 512]``)."""
    return yaml.safe_load(text)


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME:key.path=value,key2=value2`` -> (name, nested overrides).

    Raises:
        ValueError: If the text is not of that form.

    """
    name, sep, rest = text.partition(":")
    if not sep or not name:
        raise ValueError(f"--variant {text!r}: expected NAME:key=value[,key=value...]")
    overrides: dict[str, Any] = {}
    for item in filter(None, rest.split(";")):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--variant {text!r}: {item!r} is not key=value")
        node = overrides
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = parse_value(value)
    return name, overrides


def tally(records: Sequence[Any]) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Trial records -> ({condition: [successes, trials]}, {failure reason: count})."""
    by_condition: dict[str, list[int]] = {}
    reasons: dict[str, int] = {}
    for record in records:
        counts = by_condition.setdefault(record.condition, [0, 0])
        counts[0] += int(record.success)
        counts[1] += 1
        if not record.success:
            reasons[record.reason] = reasons.get(record.reason, 0) + 1
    return by_condition, reasons


def main(argv: list[str] | None = None) -> int:
    """Train and evaluate every variant; print the table and a JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", default=None, help="Real dataset (file or shard folder).")
    parser.add_argument("--sim", default=None, help="Simulated dataset.")
    parser.add_argument("--sim-ratio", type=float, default=None, help="Default: the preset's.")
    parser.add_argument("--preset", default="reduced", help="Experiment preset (sizes).")
    parser.add_argument(
        "--variant",
        action="append",
        required=True,
        help="NAME:key.path=value;key=value (training-config overrides; empty for the preset).",
    )
    parser.add_argument("--trials", action="append", default=None, help="CONDITION=COUNT.")
    parser.add_argument("--base-seed", type=int, default=VALIDATION_BASE_SEED)
    parser.add_argument("--world", default=None, help="World to evaluate in (default: twin).")
    parser.add_argument("--steps", type=int, default=None, help="Override the preset's steps.")
    parser.add_argument(
        "--execution",
        choices=["receding", "temporal_ensemble"],
        default=None,
        help="Chunk execution in evaluation (default: the preset's).",
    )
    parser.add_argument(
        "--executed-steps", type=int, default=None, help="receding: steps per chunk (preset's)."
    )
    parser.add_argument("--out", required=True, help="Folder for runs and the summary.")
    args = parser.parse_args(argv)

    from r2s2r_policy.evaluation.in_process import evaluate_in_process
    from r2s2r_policy.evaluation.trials import EvaluationConfig
    from r2s2r_policy.inference.engine import InferenceConfig
    from r2s2r_policy.training import train
    from r2s2r_policy.training_config import TrainConfig

    from r2s2r.experiment.config import load_preset
    from r2s2r.experiment.products import DatasetProduct
    from r2s2r.experiment.training import deep_merge, train_config_for

    if args.base_seed < VALIDATION_BASE_SEED:
        parser.error(
            f"--base-seed {args.base_seed}: validation seeds start at {VALIDATION_BASE_SEED}"
        )
    preset = load_preset(args.preset)
    if args.steps is not None:
        preset = preset.model_copy(update={"train_steps": args.steps})
    counts = {"nominal": 20}
    if args.trials:
        counts = {}
        for item in args.trials:
            condition, _, count = item.partition("=")
            counts[condition] = int(count)
    protocol = EvaluationConfig(trials_per_condition=counts, base_seed=args.base_seed)
    inference = InferenceConfig(
        execution=args.execution or preset.execution,
        executed_steps=args.executed_steps or preset.executed_steps,
    )
    real = DatasetProduct(args.real, "") if args.real else None
    sim = DatasetProduct(args.sim, "") if args.sim else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for text in args.variant:
        name, overrides = parse_variant(text)
        config_dict = train_config_for(preset, real, sim, args.sim_ratio)
        config_dict = deep_merge(config_dict, overrides)
        config = TrainConfig.model_validate(config_dict)
        config = config.model_copy(update={"progress_bar": False})
        run_dir = out / name
        started = time.monotonic()
        result = train(config, run_dir)
        train_s = time.monotonic() - started
        assert result.checkpoint is not None
        started = time.monotonic()
        report = evaluate_in_process(
            result.checkpoint,
            protocol,
            twin_config_path=args.world or preset.twin_config,
            inference=inference,
        )
        eval_s = time.monotonic() - started
        successes = sum(r.success for r in report.records)
        by_condition, reasons = tally(report.records)
        row = {
            "variant": name,
            "overrides": overrides,
            "successes": successes,
            "trials": len(report.records),
            "by_condition": by_condition,
            "failures": reasons,
            "final_loss": float(sum(result.losses[-50:]) / max(len(result.losses[-50:]), 1)),
            "train_s": round(train_s, 1),
            "eval_s": round(eval_s, 1),
        }
        rows.append(row)
        (run_dir / "validation.json").write_text(json.dumps(row, indent=1))
        print(
            f"{name:<24} {successes:>3}/{len(report.records):<3} loss {row['final_loss']:.4f} "
            f"train {train_s:5.0f} s eval {eval_s:5.0f} s by condition {by_condition} "
            f"failures {reasons}",
            flush=True,
        )
    print()
    print(f"{'variant':<24} {'success':>9}  failures")
    for row in rows:
        print(f"{row['variant']:<24} {row['successes']:>4}/{row['trials']:<4}  {row['failures']}")
    summary = {
        "benchmark": "policy_validation",
        "figures": [
            {
                "name": f"{row['variant']}_success_rate",
                "value": row["successes"] / row["trials"],
                "unit": "fraction",
                "goal": None,
            }
            for row in rows
        ],
        "protocol": protocol.model_dump(mode="json"),
        "execution": inference.execution,
        "executed_steps": inference.executed_steps,
        "preset": args.preset,
        "real": args.real,
        "sim": args.sim,
        "variants": rows,
        "command": " ".join(["python", *sys.argv]),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
