"""Fidelity of the in-process evaluator: the same trials in process and through the ROS graph.

For each policy of an experiment (its checkpoint, the chunk execution chosen for it on
validation seeds, the experiment's twin and grounded cell), the same trials run twice: in
process (``evaluate_in_process``) and through the launched ``evaluate`` graph at real time
(twin, cell state publisher, belt speed, object tracker, policy_inference; the harness switches
the policy node trial by trial). Both keep every trial's inference trace. Reported: per-seed
agreement, McNemar's exact test, both success rates (per policy and pooled), per trial what
the policy saw and sent on both paths (first command, image-to-command time, tracked-object
lag, inference latency, image age, where the two paths' arm positions part), the ROS path's
wall time per trial and what the paper's 50 trials x 6 policies cost through ROS here.

    python bench/bench_eval_fidelity.py \\
        --policy EXPERIMENT_DIR:POLICY [--policy ...] \\
        --trials nominal=12 --trials lighting=4 --trials belt_speed=4 --trials unseen_object=4 \\
        --out runs/bench/eval_fidelity [--publish results/eval_fidelity]

A policy is named by its experiment folder and name (``runs/exp/reduced:real_only``); the
experiment's record says its twin, grounding artifact, checkpoint and chosen execution.
Trials already evaluated in ``--out`` (a report per policy and path) are reused, so an
interrupted run continues.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import benchlib
import yaml

PAPER_TRIALS = 50
PAPER_POLICIES = 6
SELECTION_TRIALS = 20  # the experiment's execution_selection_trials


def policy_inputs(spec: str) -> dict[str, Any]:
    """Resolve ``EXPERIMENT_DIR:POLICY`` into checkpoint, execution, twin and artifact."""
    directory, _, name = spec.rpartition(":")
    root = Path(directory)
    if not name or not (root / "experiment.yaml").is_file():
        raise SystemExit(f"--policy {spec}: expected EXPERIMENT_DIR:POLICY of a run experiment")
    config = yaml.safe_load((root / "experiment.yaml").read_text())
    evaluation = root / "evaluation" / name / "evaluation.json"
    selection = root / "selection" / name / "selection.json"
    for path in (evaluation, selection):
        if not path.is_file():
            raise SystemExit(f"--policy {spec}: {path} missing (policy not evaluated there)")
    record = json.loads(evaluation.read_text())
    artifact = root / "grounding" / "artifact.yaml"
    twin = Path(config["twin_config"])
    if not twin.is_absolute():
        twin = benchlib.REPO / "config" / twin
    return {
        "name": f"{root.name}:{name}",
        "checkpoint": record["policy"],
        "settings": json.loads(selection.read_text())["settings"],
        "twin": twin,
        "artifact": artifact if artifact.is_file() else None,
        "experiment_rate": record["summary"]["all"]["rate"],
    }


def same_trials(saved: Any, wanted: Any, mode: str) -> bool:
    """Whether a saved evaluation ran ``wanted``'s protocol as far as ``mode`` reads it."""
    ignored = {"in_process_inference_delay_s"} if mode == "ros" else set()
    return saved.model_dump(exclude=ignored) == wanted.model_dump(exclude=ignored)


def evaluate_path(inputs: dict[str, Any], mode: str, protocol: Any, out: Path) -> Any:
    """Run (or reuse) one path's evaluation of a policy; return its report."""
    from r2s2r_policy.evaluation.report import EvaluationReport
    from r2s2r_policy.evaluation.trials import EvaluationConfig, TrialRecord
    from r2s2r_policy.inference.engine import InferenceConfig

    folder = out / inputs["name"].replace(":", "__") / mode
    saved = folder / "evaluation.json"
    if saved.is_file():
        data = json.loads(saved.read_text())
        if same_trials(EvaluationConfig(**data["protocol"]), protocol, mode):
            report = EvaluationReport(inputs["checkpoint"], data["mode"], protocol)
            report.records = [TrialRecord(**trial) for trial in data["trials"]]
            report.wall_s = data["wall_s"]
            report.metadata = data["metadata"]
            print(f"{inputs['name']} {mode}: reused {saved}")
            return report
    inference = InferenceConfig(**inputs["settings"])

    def echo(record: Any) -> None:
        mark = "ok  " if record.success else "FAIL"
        print(
            f"  {mode:<10} [{record.index:>2}] {mark} seed {record.seed} {record.reason:<14} "
            f"{record.wall_s:5.1f} s wall",
            flush=True,
        )

    if mode == "in_process":
        from r2s2r_policy.evaluation.in_process import evaluate_in_process

        report = evaluate_in_process(
            inputs["checkpoint"],
            protocol,
            twin_config_path=inputs["twin"],
            inference=inference,
            grounding_artifact=inputs["artifact"],
            progress=echo,
            trace_dir=folder / "traces",
        )
    else:
        from r2s2r.pipeline.evaluate import evaluate_over_ros
        from r2s2r.pipeline.stages import grounded_cell_arguments

        cell = (
            grounded_cell_arguments(inputs["artifact"], folder / "grounded_cell")
            if inputs["artifact"] is not None
            else None
        )
        report = evaluate_over_ros(
            inputs["checkpoint"],
            protocol,
            launch=True,
            twin_config=str(inputs["twin"]),
            policy_overrides={
                "execution": inference.execution,
                "executed_steps": inference.executed_steps,
            },
            cell_arguments=cell,
            log_dir=folder / "logs",
            progress=echo,
            trace_dir=folder / "traces",
        )
    report.metadata["commit"] = git_commit()
    report.save(folder)
    return report


def git_commit() -> str:
    """HEAD of the workspace, with ``-dirty`` when tracked files differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=benchlib.REPO, capture_output=True, text=True
        ).stdout.strip()

    return git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain", "-uno") else "")


def trial_rows(name: str, pairs: list, out: Path) -> list[dict[str, Any]]:
    """Per trial: both outcomes and what both traces say."""
    from r2s2r_policy.evaluation.fidelity import divergence_time, trace_timing
    from r2s2r_policy.evaluation.trials import trace_file_name
    from r2s2r_policy.inference.trace import load_trace

    folder = out / name.replace(":", "__")
    rows = []
    for in_process, ros in pairs:
        row: dict[str, Any] = {
            "policy": name,
            "index": in_process.index,
            "seed": in_process.seed,
            "condition": in_process.condition,
            "in_process": in_process.reason,
            "ros": ros.reason,
            "agree": in_process.success == ros.success,
            "commands_sent": [in_process.commands_sent, ros.commands_sent],
            "ros_wall_s": round(ros.wall_s, 2),
        }
        traces = {}
        for mode, record in (("in_process", in_process), ("ros", ros)):
            path = folder / mode / "traces" / trace_file_name(record.index)
            if path.is_file():
                traces[mode] = (load_trace(path), record.started_at_s)
                row[f"{mode}_timing"] = trace_timing(*traces[mode]).to_dict()
        if len(traces) == 2:
            row["arms_part_at_s"] = divergence_time(*traces["in_process"], *traces["ros"])
        rows.append(row)
    return rows


def plot(per_policy: dict[str, Any], rows: list[dict[str, Any]], path: Path) -> None:
    """Success per path and policy; per trial, when the two paths' arms part, and agreement."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(per_policy)
    labels = [n.replace("family_", "").replace(":", "\n") for n in names]
    figure, (bars, parts) = plt.subplots(1, 2, figsize=(13, 4.2))
    x = np.arange(len(names))
    for offset, key, label in ((-0.2, "in_process_rate", "in process"), (0.2, "ros_rate", "ROS")):
        bars.bar(x + offset, [per_policy[n][key] for n in names], 0.4, label=label)
    for i, name in enumerate(names):
        summary = per_policy[name]
        bars.text(
            i,
            0.97,
            f"agree {summary['agreement']:.0%}\np={summary['mcnemar_p']:.2f}",
            ha="center",
            va="top",
            fontsize=8,
        )
    bars.set_xticks(x, labels, fontsize=7)
    bars.set_ylim(0, 1)
    bars.set_ylabel("success rate (same trials)")
    bars.legend(loc="center right", fontsize=8)
    bars.set_title("in process vs through the ROS graph at real time")
    horizon = max([r["arms_part_at_s"] or 0.0 for r in rows] + [10.0]) + 1.0
    for i, name in enumerate(names):
        mine = [r for r in rows if r["policy"] == name]
        for row in mine:
            part = row.get("arms_part_at_s")
            parts.scatter(
                horizon if part is None else part,
                i + np.random.default_rng(row["index"]).uniform(-0.25, 0.25),
                s=18,
                color="#999999" if row["agree"] else "#d62728",
                marker="o" if part is not None else ">",
            )
    parts.axvline(horizon - 0.5, color="#cccccc", lw=0.8)
    parts.set_yticks(x, labels, fontsize=8)
    parts.set_xlabel("trial time at which the two paths' arm joints differ by > 0.05 rad (s)")
    parts.set_title("where a trial's two runs part (red: outcomes differ; ▸: never)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main() -> None:
    """Run the benchmark (see the module docstring)."""
    from r2s2r_common.config import parse_config
    from r2s2r_policy.evaluation.fidelity import pair_records, paired_summary
    from r2s2r_policy.evaluation.trials import EvaluationConfig

    parser = benchlib.parser(__doc__)
    parser.add_argument(
        "--policy", action="append", required=True, help="EXPERIMENT_DIR:POLICY (repeatable)."
    )
    parser.add_argument(
        "--trials",
        action="append",
        default=[],
        help="CONDITION=COUNT (repeatable; default nominal=12 and 4 per shift).",
    )
    parser.add_argument("--base-seed", type=int, default=10_000)
    parser.add_argument(
        "--in-process-delay-s",
        type=float,
        default=None,
        help="The in-process evaluator's inference delay (default: the protocol's).",
    )
    parser.add_argument("--out", type=Path, default=benchlib.REPO / "runs/bench/eval_fidelity")
    parser.add_argument(
        "--publish",
        type=Path,
        default=None,
        help="Write PATH.json and PATH.png (the committed record).",
    )
    args = parser.parse_args()
    counts = dict(item.split("=") for item in args.trials) or {
        "nominal": 12,
        "lighting": 4,
        "belt_speed": 4,
        "unseen_object": 4,
    }
    protocol = parse_config(
        EvaluationConfig,
        {
            "trials_per_condition": {k: int(v) for k, v in counts.items()},
            "base_seed": args.base_seed,
        }
        | (
            {"in_process_inference_delay_s": args.in_process_delay_s}
            if args.in_process_delay_s is not None
            else {}
        ),
        "fidelity protocol",
    )
    started = time.perf_counter()
    per_policy: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    all_pairs: list = []
    ros_walls: list[float] = []
    for spec in args.policy:
        inputs = policy_inputs(spec)
        print(f"== {inputs['name']}: {inputs['checkpoint']} ({inputs['settings']['execution']})")
        in_process = evaluate_path(inputs, "in_process", protocol, args.out)
        ros = evaluate_path(inputs, "ros", protocol, args.out)
        pairs = pair_records(in_process.records, ros.records)
        summary = paired_summary([a.success for a, _ in pairs], [b.success for _, b in pairs])
        per_policy[inputs["name"]] = {
            **summary.to_dict(),
            "in_process_rate": summary.first_successes / summary.pairs,
            "ros_rate": summary.second_successes / summary.pairs,
            "execution": inputs["settings"]["execution"],
            "experiment_rate_50_trials": inputs["experiment_rate"],
            "ros_wall_s": ros.wall_s,
            "in_process_wall_s": in_process.wall_s,
            "evaluated_at": sorted(
                {report.metadata.get("commit", "unknown") for report in (in_process, ros)}
            ),
        }
        rows += trial_rows(inputs["name"], pairs, args.out)
        all_pairs += pairs
        ros_walls += [b.wall_s for _, b in pairs]
    pooled = paired_summary([a.success for a, _ in all_pairs], [b.success for _, b in all_pairs])
    per_trial_s = sum(ros_walls) / len(ros_walls)
    paper_h = PAPER_TRIALS * PAPER_POLICIES * per_trial_s / 3600.0
    # An experiment through ROS (--ros) also chooses each policy's execution on validation
    # trials: two settings x SELECTION_TRIALS per policy, through the same graph.
    experiment_h = (PAPER_TRIALS + 2 * SELECTION_TRIALS) * PAPER_POLICIES * per_trial_s / 3600.0
    in_process_walls = [a.wall_s for a, _ in all_pairs]
    in_process_per_trial_s = sum(in_process_walls) / len(in_process_walls)
    timings = [r["ros_timing"] for r in rows if "ros_timing" in r]

    def median(key: str) -> float:
        values = [t[key] for t in timings if t.get(key) is not None]
        return float(sorted(values)[len(values) // 2]) if values else math.nan

    figures = [
        benchlib.Figure("paired trials", pooled.pairs, "", ">= 72"),
        benchlib.Figure("policies", len(per_policy), "", ">= 3"),
        benchlib.Figure("per-seed agreement", round(100 * pooled.agreement, 1), "%", ">= 90"),
        benchlib.Figure("McNemar exact p", round(pooled.mcnemar_p, 3), "", "> 0.05"),
        benchlib.Figure(
            "success in process", round(100 * pooled.first_successes / pooled.pairs, 1), "%"
        ),
        benchlib.Figure(
            "success through ROS", round(100 * pooled.second_successes / pooled.pairs, 1), "%"
        ),
        benchlib.Figure(
            "|rate difference|", round(100 * abs(pooled.rate_difference), 1), "points", "<= 5"
        ),
        benchlib.Figure(
            "ROS wall per trial",
            round(per_trial_s, 2),
            "s",
            None,
            "real time, reset + start included",
        ),
        benchlib.Figure(
            "ROS image->command (median of trials)",
            round(1e3 * median("image_to_command_s"), 1),
            "ms",
        ),
        benchlib.Figure(
            "ROS tracked-object lag (median of trials)",
            round(1e3 * median("track_lag_s"), 1),
            "ms",
            0.0,
        ),
        benchlib.Figure(
            "ROS inference latency p99 (median of trials)",
            round(1e3 * median("latency_p99_s"), 1),
            "ms",
        ),
        benchlib.Figure("in-process wall per trial", round(in_process_per_trial_s, 2), "s"),
        benchlib.Figure(
            "paper protocol through ROS (50 x 6)",
            round(paper_h, 2),
            "h",
            None,
            "sequential, one graph at a time",
        ),
        benchlib.Figure(
            "experiment evaluation through ROS (+ selection)",
            round(experiment_h, 2),
            "h",
            None,
            f"(50 + 2 x {SELECTION_TRIALS} trials) x 6 policies",
        ),
    ]
    benchlib.print_table(figures, "evaluation fidelity: in process vs ROS graph")
    for name, item in per_policy.items():
        print(
            f"  {name:<40} in-process {item['in_process_rate']:.0%}  ROS {item['ros_rate']:.0%}"
            f"  agree {item['agreement']:.0%}  McNemar p {item['mcnemar_p']:.2f}"
        )
    if args.publish is not None:
        commit = git_commit()
        record = {
            "benchmark": "eval_fidelity",
            "command": "python bench/bench_eval_fidelity.py "
            + " ".join(
                [f"--policy {p}" for p in args.policy]
                + [f"--trials {k}={v}" for k, v in counts.items()]
                + [f"--base-seed {args.base_seed}"]
                + (
                    [f"--in-process-delay-s {args.in_process_delay_s}"]
                    if args.in_process_delay_s is not None
                    else []
                )
            ),
            "commit": commit,
            "protocol": protocol.model_dump(),
            "pooled": pooled.to_dict(),
            "policies": per_policy,
            "trials": rows,
            "ros_wall_per_trial_s": per_trial_s,
            "paper_protocol_ros_h": paper_h,
            "experiment_evaluation_ros_h": experiment_h,
            "in_process_wall_per_trial_s": in_process_per_trial_s,
            "evaluations_wall_s": sum(
                p["ros_wall_s"] + p["in_process_wall_s"] for p in per_policy.values()
            ),
            "evaluated_at": sorted({c for p in per_policy.values() for c in p["evaluated_at"]}),
            "wall_s": time.perf_counter() - started,
            "figures": [benchlib.as_dict(f) for f in figures],
        }
        args.publish.parent.mkdir(parents=True, exist_ok=True)
        args.publish.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
        plot(per_policy, rows, args.publish.with_suffix(".png"))
        print(f"wrote {args.publish.with_suffix('.json')} and .png")
    benchlib.print_json_line("eval_fidelity", figures)


if __name__ == "__main__":
    main()
