"""A policy's learning curve on validation seeds: how many training steps a preset needs.

One training run (the experiment's own training config for the preset, ``train_config_for``,
with ``--set`` overrides) keeps a checkpoint every ``--every`` steps; each checkpoint is then
evaluated in process on the twin on *validation* seeds (20000 and up, never the evaluation's
10000 and up), the same trials for every checkpoint. The held-out L1 of the actions
(``validation_fraction`` of each source's episodes kept out of training) is logged beside it.
It prints a table (steps, successes with a 95 % Wilson interval, held-out L1, seconds per step)
and ends with one JSON line; ``summary.json`` and ``learning_curve.png`` go to ``--out``.

Interrupted, it resumes: training from its newest checkpoint, evaluation from the checkpoints
already scored (``eval/step_N.json``, each written whole). The cosine schedule decays over
``--steps``, so an intermediate checkpoint has not had its learning rate annealed: read the
curve for where success stops rising, then train the chosen step count from scratch.

Example (the paper preset, grounded + MimicGen data, 64 px)::

    python bench/learning_curve.py --preset paper \\
        --real /work/paper_run/demos/real_demos.hdf5 \\
        --sim /work/paper_run/generation/grounded_mimicgen/run/... \\
        --steps 30000 --every 5000 --set policy.image_height_px=64 \\
        --set policy.image_width_px=64 --trials nominal=20 --out runs/curve/gm64
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml
from r2s2r_common.files import write_atomic
from r2s2r_policy.evaluation.trials import VALIDATION_BASE_SEED


def dotted(items: list[str]) -> dict[str, Any]:
    """``["a.b=3", "c=[1, 2]"]`` -> ``{"a": {"b": 3}, "c": [1, 2]}`` (YAML values)."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--set {item!r}: expected key.path=value")
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(value)
    return out


def counts_of(items: list[str] | None) -> dict[str, int]:
    """``["nominal=20"]`` -> ``{"nominal": 20}``."""
    if not items:
        return {"nominal": 20}
    out: dict[str, int] = {}
    for item in items:
        condition, eq, count = item.partition("=")
        if not eq or not count.isdigit():
            raise ValueError(f"--trials {item!r}: expected CONDITION=COUNT")
        out[condition] = int(count)
    return out


def write_json(path: Path, data: Any) -> None:
    """Write JSON whole or not at all (:func:`r2s2r_common.files.write_atomic`)."""
    write_atomic(path, json.dumps(data, indent=1))


def checkpoint_step(path: Path) -> int:
    """``.../step_00005000`` -> 5000."""
    return int(path.name.rsplit("_", 1)[1])


def plot(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    """Success (with its interval) and held-out L1 against training steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [row["step"] for row in rows]
    rate = [row["success_rate"] for row in rows]
    low = [row["success_rate"] - row["interval"][0] for row in rows]
    high = [row["interval"][1] - row["success_rate"] for row in rows]
    figure, axis = plt.subplots(figsize=(7, 4))
    axis.errorbar(steps, rate, yerr=[low, high], marker="o", capsize=3, label="validation success")
    axis.set_xlabel("training step")
    axis.set_ylabel("success on validation seeds")
    axis.set_ylim(0, 1)
    held = [(row["step"], row["held_out_l1"]) for row in rows if row["held_out_l1"] is not None]
    if held:
        other = axis.twinx()
        other.plot(*zip(*held, strict=True), color="tab:red", marker="s", label="held-out L1")
        other.set_ylabel("held-out action L1 (rad)", color="tab:red")
    axis.set_title(textwrap.fill(title, 90), fontsize=9)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    """Train once, score every kept checkpoint on validation seeds, print and plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", default=None, help="Real dataset (file or shard folder).")
    parser.add_argument("--sim", default=None, help="Simulated dataset.")
    parser.add_argument("--sim-ratio", type=float, default=None, help="Default: the preset's.")
    parser.add_argument("--preset", default="paper", help="Experiment preset (sizes).")
    parser.add_argument("--steps", type=int, required=True, help="Training steps in all.")
    parser.add_argument("--every", type=int, required=True, help="Checkpoint period (steps).")
    parser.add_argument("--set", action="append", default=[], help="key.path=value override.")
    parser.add_argument("--held-out", type=float, default=0.05, help="validation_fraction.")
    parser.add_argument("--trials", action="append", default=None, help="CONDITION=COUNT.")
    parser.add_argument("--base-seed", type=int, default=VALIDATION_BASE_SEED)
    parser.add_argument("--world", default=None, help="World to evaluate in (default: twin).")
    parser.add_argument("--out", required=True, help="Folder for the run and the summary.")
    args = parser.parse_args(argv)
    if args.base_seed < VALIDATION_BASE_SEED:
        parser.error(
            f"--base-seed {args.base_seed}: validation seeds start at {VALIDATION_BASE_SEED}"
        )
    if not 0 < args.every <= args.steps:
        parser.error(f"--every {args.every}: must be in 1..--steps ({args.steps})")
    try:
        overrides = dotted(args.set)
        counts = counts_of(args.trials)
    except ValueError as error:
        parser.error(str(error))

    from r2s2r_policy.checkpoint import list_checkpoints
    from r2s2r_policy.evaluation.in_process import evaluate_in_process
    from r2s2r_policy.evaluation.stats import wilson_interval
    from r2s2r_policy.evaluation.trials import EvaluationConfig
    from r2s2r_policy.inference.engine import InferenceConfig
    from r2s2r_policy.training import train
    from r2s2r_policy.training_config import TrainConfig

    from r2s2r.experiment.config import load_preset
    from r2s2r.experiment.products import EpisodeDataset
    from r2s2r.experiment.training import deep_merge, train_config_for
    from r2s2r.pipeline.cache import current_commit

    preset = load_preset(args.preset).model_copy(update={"train_steps": args.steps})
    real = EpisodeDataset(args.real, "") if args.real else None
    sim = EpisodeDataset(args.sim, "") if args.sim else None
    config_dict = deep_merge(train_config_for(preset, real, sim, args.sim_ratio), overrides)
    config_dict.update(
        checkpoint_every_steps=args.every,
        keep_last_checkpoints=args.steps // args.every + 1,
        validation_fraction=args.held_out,
        validate_every_steps=args.every,
        progress_bar=True,
    )
    out = Path(args.out)
    store = config_dict.get("image_store_dir")
    if store and not Path(store).is_absolute():  # as the experiment does: a folder of the run
        config_dict["image_store_dir"] = str((out / store).resolve())
    config = TrainConfig.model_validate(config_dict)
    (out / "eval").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = train(config, out / "train")
    train_s = time.monotonic() - started
    history_path = out / "held_out.json"
    history = json.loads(history_path.read_text()) if history_path.exists() else []
    known = {entry["step"] for entry in history}
    history += [entry for entry in result.validation if entry["step"] not in known]
    write_json(history_path, sorted(history, key=lambda entry: entry["step"]))
    if result.step > result.start_step:
        commit = current_commit(Path(__file__).parent)
        timing = {"steps": result.step - result.start_step, "seconds": train_s, "commit": commit}
        write_json(out / "train_timing.json", timing)
    timing = json.loads((out / "train_timing.json").read_text())
    seconds_per_step = timing["seconds"] / max(timing["steps"], 1)

    protocol = EvaluationConfig(trials_per_condition=counts, base_seed=args.base_seed)
    inference = InferenceConfig(execution=preset.execution, executed_steps=preset.executed_steps)
    held_by_step = {
        int(entry["step"]): sum(v for k, v in entry.items() if k != "step") / max(len(entry) - 1, 1)
        for entry in history
    }
    rows: list[dict[str, Any]] = []
    for checkpoint in list_checkpoints(out / "train"):
        step = checkpoint_step(checkpoint)
        scored = out / "eval" / f"step_{step}.json"
        if not scored.exists():
            began = time.monotonic()
            report = evaluate_in_process(
                checkpoint,
                protocol,
                twin_config_path=args.world or preset.twin_config,
                inference=inference,
            )
            reasons: dict[str, int] = {}
            for record in report.records:
                if not record.success:
                    reasons[record.reason] = reasons.get(record.reason, 0) + 1
            write_json(
                scored,
                {
                    "step": step,
                    "successes": sum(r.success for r in report.records),
                    "trials": len(report.records),
                    "failures": reasons,
                    "eval_s": round(time.monotonic() - began, 1),
                },
            )
        row = json.loads(scored.read_text())
        low, high = wilson_interval(row["successes"], row["trials"])
        row.update(
            success_rate=row["successes"] / row["trials"],
            interval=[low, high],
            held_out_l1=held_by_step.get(step),
        )
        rows.append(row)
        print(
            f"step {step:>6}  {row['successes']:>3}/{row['trials']:<3} "
            f"[{low:.2f}, {high:.2f}]  held-out L1 "
            + (f"{row['held_out_l1']:.4f}" if row["held_out_l1"] is not None else "   -  ")
            + f"  failures {row['failures']}",
            flush=True,
        )
    title = f"{args.preset}: " + ", ".join(
        f"{k}={v}" for k, v in sorted(dotted_items(overrides)) if k
    )
    plot(rows, out / "learning_curve.png", title or args.preset)
    summary = {
        "benchmark": "learning_curve",
        "figures": [
            {
                "name": f"success_rate_step_{row['step']}",
                "value": row["success_rate"],
                "unit": "fraction",
                "goal": None,
            }
            for row in rows
        ]
        + [{"name": "seconds_per_step", "value": seconds_per_step, "unit": "s", "goal": None}],
        "preset": args.preset,
        "real": args.real,
        "sim": args.sim,
        "overrides": overrides,
        "protocol": protocol.model_dump(mode="json"),
        "execution": inference.execution,
        "rows": rows,
        "held_out": history,
        "command": " ".join(["python", *sys.argv]),
        "commit": current_commit(Path(__file__).parent),
        "train_commit": json.loads((out / "train_timing.json").read_text()).get("commit", ""),
    }
    write_json(out / "summary.json", summary)
    print(json.dumps({"benchmark": summary["benchmark"], "figures": summary["figures"]}))
    return 0


def dotted_items(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested overrides back to ``(key.path, value)`` pairs (for titles)."""
    items: list[tuple[str, Any]] = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            items += dotted_items(value, name + ".")
        else:
            items.append((name, value))
    return items


if __name__ == "__main__":
    raise SystemExit(main())
