"""The diagnostic policy's style on a finished experiment (issue 37, item 5).

``r2s2r analyze diagnostic EXPDIR`` reads an experiment made with ``--preset diagnostic`` (10
real demonstrations + the nominal-world planner's episodes), records rollouts of its
co-trained ``nominal_planner`` policy on the experiment's protocol with the execution chosen
for it, and measures the style of those rollouts, of the real demonstrations it trained on
(the demonstrator) and of its simulated dataset (the planner)
(:mod:`r2s2r_policy.analysis.style`). Everything goes to ``EXPDIR/analysis/diagnostic/``:

    rollouts/trial_NNN.npz   one rollout per trial (``r2s2r_policy.evaluation.rollouts``), with
    rollouts/trial_NNN.json  its outcome; a trial recorded by the same policy is kept
    diagnostic.json          success, per-group style with intervals, pinch shares, verdicts
    diagnostic.png           the groups' metrics side by side

``--trials N`` caps the protocol's trials per condition (as ``r2s2r analyze experiment``): the
capped plan is the first N rounds of the protocol's interleaved plan, so its trials keep their
indices and seeds, and a later, larger run records only the trials it lacks.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.config import read_yaml
from r2s2r_common.console import progress_reporter
from r2s2r_common.files import move_into_place, write_atomic
from r2s2r_policy.evaluation.report import SHIFTED
from r2s2r_policy.evaluation.stats import wilson_interval
from r2s2r_policy.evaluation.trials import (
    NOMINAL,
    EvaluationConfig,
    TrialRecord,
    TrialSpec,
    trace_file_name,
    trial_plan,
)

from r2s2r.experiment.analysis import (
    ANALYSIS_DIR,
    AnalysisError,
    FinishedExperiment,
    FinishedPolicy,
    read_finished,
    training_datasets,
)
from r2s2r.experiment.evaluation import evaluation_protocol
from r2s2r.experiment.results import configuration_name
from r2s2r.pipeline.cache import StageRunner, current_commit

DIAGNOSTIC_POLICY = configuration_name("nominal", "planner")
"""The diagnostic policy: co-trained on the real demonstrations and the nominal planner data."""
DIAGNOSTIC_DIR = Path(ANALYSIS_DIR) / "diagnostic"
REPORT_FILE = "diagnostic.json"
FIGURE_FILE = "diagnostic.png"
ROLLOUTS = "rollouts"
RUN_FIRST = "run r2s2r experiment --preset diagnostic first"


def read_diagnostic(directory: str | Path) -> tuple[FinishedExperiment, FinishedPolicy]:
    """Read a finished diagnostic experiment and its co-trained policy.

    Raises:
        AnalysisError: No experiment there, or its diagnostic policy or that policy's
            execution selection is missing (one line), or another stage is unfinished.

    """
    root = Path(directory).resolve()
    stages = StageRunner(root)
    needed = ["experiment.yaml"] if not (root / "experiment.yaml").is_file() else []
    needed += [
        f"{stage}/stage.json"
        for stage in (f"policies/{DIAGNOSTIC_POLICY}", f"selection/{DIAGNOSTIC_POLICY}")
        if stages.record(stage) is None
    ]
    if needed:
        raise AnalysisError(
            f"{root}: no diagnostic policy ({', '.join(needed)} missing): {RUN_FIRST}"
        )
    finished = read_finished(root)
    if DIAGNOSTIC_POLICY not in finished.policies:
        raise AnalysisError(
            f"{root}: its configurations {finished.config.configurations} leave out "
            f"{DIAGNOSTIC_POLICY}: {RUN_FIRST}"
        )
    return finished, finished.policies[DIAGNOSTIC_POLICY]


def capped_protocol(protocol: EvaluationConfig, trials: int | None) -> EvaluationConfig:
    """Return ``protocol`` with at most ``trials`` trials per condition (None: as it is).

    Raises:
        AnalysisError: The capped plan is not the protocol plan's first trials (it is when
            the conditions are interleaved).

    """
    if trials is None:
        return protocol
    counts = {c: min(n, trials) for c, n in protocol.trials_per_condition.items()}
    capped = protocol.model_copy(update={"trials_per_condition": counts})
    plan = trial_plan(capped)
    if plan != trial_plan(protocol)[: len(plan)]:
        raise AnalysisError(
            f"--trials {trials}: the capped plan is not the protocol's first {len(plan)} trials "
            "(its conditions are not interleaved)"
        )
    return capped


def _recorded(folder: Path, trial: TrialSpec, policy: Any) -> dict[str, Any] | None:
    """Return the record of a trial already recorded by ``policy`` in ``folder``, else None."""
    from r2s2r_policy.evaluation.rollouts import load_rollout

    trace = folder / trace_file_name(trial.index)
    outcome = trace.with_suffix(".json")
    try:
        record: dict[str, Any] = json.loads(outcome.read_text())
        if (record["seed"], record["condition"]) != (trial.seed, trial.condition):
            return None
        load_rollout(trace, policy)
    except (OSError, ValueError, KeyError):
        return None
    return record


def _renumber(source: Path, target: Path, index: int) -> None:
    """Move a one-trial protocol's trace to ``target`` as trial ``index`` of the protocol."""
    with np.load(source, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    header = json.loads(str(arrays["header"]))
    header["metadata"]["trial_index"] = index
    arrays["header"] = np.array(json.dumps(header))
    partial = target.with_name(f".{target.name}.partial")
    with open(partial, "wb") as stream:
        np.savez_compressed(stream, **arrays)
    move_into_place(partial, target)
    source.unlink()


def record_diagnostic_rollouts(
    finished: FinishedExperiment,
    policy: FinishedPolicy,
    protocol: EvaluationConfig,
    folder: Path,
    progress_bars: bool = True,
    log: Callable[[str], None] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Record the trials of ``protocol`` that ``folder`` lacks; the policy and every record.

    A trial is kept when its rollout and outcome files are there, for the same seed and
    condition, recorded by the same weights (:func:`~r2s2r_policy.evaluation.rollouts.
    policy_fingerprint`). From nothing, the protocol runs in one go, as the experiment's
    evaluation ran it; otherwise each missing trial runs alone (same seed and condition, a
    reset cell) and is filed under its index.
    """
    from r2s2r_policy.checkpoint import load_checkpoint
    from r2s2r_policy.evaluation.rollouts import policy_fingerprint, record_rollouts

    say = log or (lambda text: None)
    model = load_checkpoint(policy.checkpoint).policy
    fingerprint = policy_fingerprint(model)
    plan = trial_plan(protocol)
    folder.mkdir(parents=True, exist_ok=True)
    records = {t.index: r for t in plan if (r := _recorded(folder, t, model)) is not None}
    missing = [t for t in plan if t.index not in records]
    if not missing:
        say(f"[{DIAGNOSTIC_DIR / ROLLOUTS}] {len(plan)} trials up to date")
        return model, [records[t.index] for t in plan]
    say(f"[{DIAGNOSTIC_DIR / ROLLOUTS}] recording {len(missing)} of {len(plan)} trials")
    bar = progress_reporter(
        str(DIAGNOSTIC_DIR / ROLLOUTS), len(missing), progress_bars, unit="trial"
    )
    done = {"n": 0, "ok": 0}

    def keep(record: TrialRecord, index: int) -> None:
        data = {**dataclasses.replace(record, index=index).to_dict(), "policy": fingerprint}
        write_atomic((folder / trace_file_name(index)).with_suffix(".json"), json.dumps(data))
        records[index] = data
        done["n"] += 1
        done["ok"] += bool(record.success)
        bar.update(done["n"], f"{done['ok']} succeeded")

    def run(trials: EvaluationConfig, into: Path, index: int | None) -> None:
        record_rollouts(
            model,
            into,
            trials,
            finished.twin,
            policy.inference,
            finished.artifact,
            progress=lambda r: keep(r, r.index if index is None else index),
        )

    scratch = folder / ".one_trial"
    try:
        if len(missing) == len(plan):
            run(protocol, folder, None)
        for trial in [] if len(missing) == len(plan) else missing:
            shutil.rmtree(scratch, ignore_errors=True)
            alone = protocol.model_copy(
                update={"trials_per_condition": {trial.condition: 1}, "base_seed": trial.seed}
            )
            run(alone, scratch, trial.index)
            _renumber(
                scratch / trace_file_name(0), folder / trace_file_name(trial.index), trial.index
            )
    finally:
        bar.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return model, [records[t.index] for t in plan]


def _group_of(record: dict[str, Any]) -> str:
    return NOMINAL if record["condition"] == NOMINAL else SHIFTED


def success_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Return successes per group (nominal, shifted, all) with Wilson 95 % intervals."""
    groups = {
        NOMINAL: [r for r in records if _group_of(r) == NOMINAL],
        SHIFTED: [r for r in records if _group_of(r) == SHIFTED],
        "all": records,
    }
    out = {}
    for name, members in groups.items():
        successes = sum(bool(r["success"]) for r in members)
        low, high = wilson_interval(successes, len(members))
        rate = successes / len(members) if members else math.nan
        out[name] = {
            "successes": successes,
            "trials": len(members),
            "rate": rate,
            "ci95": [low, high],
        }
    return out


def _success_lines(success: dict[str, Any], evaluation: dict[str, Any]) -> list[str]:
    lines = [f"{DIAGNOSTIC_POLICY} success on the twin (rollouts) [95% Wilson CI]"]
    for name, entry in success.items():
        low, high = entry["ci95"]
        lines.append(
            f"  {name:<8} {entry['successes']:>3}/{entry['trials']:<3} "
            f"{entry['rate']:.0%} [{low:.0%}, {high:.0%}]"
        )
    summary = evaluation.get("summary", {}).get("all")
    if summary:
        lines.append(
            f"  (the experiment's evaluation: {summary['successes']}/{summary['trials']} on the "
            "full protocol)"
        )
    return lines


def _describe(group: Any, demonstrator: Any, planner: Any) -> dict[str, Any]:
    """Summarise a group of rollouts: metrics, pinch shares and the verdicts per metric.

    Two pinch shares: of every trial's grasp posture (the hand's most closed moment), and of
    the trials with a grasp event only (the hand closed on the object).
    """
    from r2s2r_policy.analysis.style import (
        STYLE_METRICS,
        StyleGroup,
        closeness,
        pinch_share,
        summarize,
    )

    grasped = [s for s in group.styles if s.fingers_in_contact is not None]
    verdicts = {}
    if group.styles:
        verdicts = {
            m: closeness(m, group.values(m), demonstrator.values(m), planner.values(m)).to_dict()
            for m in STYLE_METRICS
        }
    return {
        "measured": len(group.styles),
        "skipped": group.skipped,
        "pinch_share": pinch_share(group),
        "pinch_share_grasped": pinch_share(StyleGroup(group.name, group.source, grasped)),
        "metrics": {m: list(v) for m, v in summarize(group).items()},
        "verdicts": verdicts,
    }


def _share_text(share: dict[str, Any]) -> str:
    if not share["of"]:
        return "- n=0"
    low, high = share["ci95"]
    return f"{share['share']:.0%} [{low:.0%}, {high:.0%}] n={share['of']}"


def _condition_lines(conditions: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "diagnostic by trial group: pinch share [95% Wilson CI] of the grasp postures (every "
        "trial) and of the grasps (trials with a grasp event); verdicts per metric"
    ]
    for name, entry in conditions.items():
        by: dict[str, list[str]] = {}
        for metric, verdict in entry["verdicts"].items():
            by.setdefault(verdict["verdict"], []).append(metric)
        lines.append(
            f"  {name:<8} postures {_share_text(entry['pinch_share']):<20} grasps "
            f"{_share_text(entry['pinch_share_grasped']):<20} "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by.items()))
        )
    return lines


def run_diagnostic(
    directory: str | Path,
    trials: int | None = None,
    progress_bars: bool = True,
    command: str = "",
    log: Callable[[str], None] | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """Measure the diagnostic policy's style (see the module docstring); the report's data.

    ``threads``: torch intra-op threads while recording (0: torch's default; 1 on a loaded
    2-core machine, as ``r2s2r analyze experiment``: more threads wait on busy cores).

    Raises:
        AnalysisError: Not a finished diagnostic experiment, or an input does not fit
            (r2s2r_policy.analysis.embeddings.AnalysisInputError is one).

    """
    from r2s2r_policy.analysis.style import (
        CLOSURE_SEARCH_WINDOW_S,
        GRASP_FLEXION_RAD,
        StyleGroup,
        compare_styles,
        dataset_group,
        plot_intervals,
        rollout_group,
        style_ik,
    )
    from r2s2r_policy.evaluation.rollouts import CONTACT_COUNT_WINDOW_S, rollout_paths
    from r2s2r_sim.demonstrator.style import FLEXED_RAD

    say = log or (lambda text: print(text, flush=True))
    started = time.perf_counter()
    finished, policy = read_diagnostic(directory)
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    out = finished.directory / DIAGNOSTIC_DIR
    protocol = capped_protocol(evaluation_protocol(finished.config), trials)
    model, records = record_diagnostic_rollouts(
        finished, policy, protocol, out / ROLLOUTS, progress_bars, say
    )
    datasets = training_datasets(policy)
    if set(datasets) != {"real", "sim"}:
        raise AnalysisError(
            f"{policy.train_config}: {DIAGNOSTIC_POLICY} trained on {sorted(datasets)} data, "
            "expected real and sim"
        )
    outcomes = read_yaml(policy.train_config).get("episode_outcomes")
    ik = style_ik()
    demonstrator, rate_hz = dataset_group("demonstrator", datasets["real"], ik, outcomes=outcomes)
    planner, _ = dataset_group("planner", datasets["sim"], ik, rate_hz, outcomes)
    paths = rollout_paths(out / ROLLOUTS, len(records))
    by_condition: dict[str, StyleGroup] = {}
    for name in (NOMINAL, SHIFTED):
        chosen = [p for p, r in zip(paths, records, strict=True) if _group_of(r) == name]
        if chosen:
            by_condition[name] = rollout_group(name, chosen, ik, rate_hz, model)
    diagnostic = StyleGroup("diagnostic", str(out / ROLLOUTS))
    for group in by_condition.values():
        diagnostic.extend(group)
    measured = dict(zip(diagnostic.keys, diagnostic.styles, strict=True))
    for path, record in zip(paths, records, strict=True):
        style = measured.get(path.name)
        record["style"] = style.to_dict() if style is not None else None
    comparison = compare_styles(demonstrator, planner, diagnostic)
    success = success_summary(records)
    conditions = {
        name: _describe(group, demonstrator, planner) for name, group in by_condition.items()
    }
    conditions["all"] = _describe(diagnostic, demonstrator, planner)
    table = "\n".join(
        [
            *_success_lines(success, policy.evaluation),
            "",
            comparison.table(),
            "",
            *_condition_lines(conditions),
        ]
    )
    data = {
        "command": command,
        "commit": current_commit(Path(__file__).parent),
        "experiment": str(finished.directory),
        "policy": DIAGNOSTIC_POLICY,
        "checkpoint": str(policy.checkpoint),
        "execution": policy.inference.model_dump(mode="json"),
        "protocol": protocol.model_dump(mode="json"),
        "success": success,
        "experiment_evaluation": policy.evaluation.get("summary", {}).get("all"),
        "datasets": {"demonstrator": str(datasets["real"]), "planner": str(datasets["sim"])},
        "episode_outcomes": outcomes,
        "rate_hz": rate_hz,
        "thresholds": {
            "grasp_flexion_rad": GRASP_FLEXION_RAD,
            "grasp_window_s": CLOSURE_SEARCH_WINDOW_S,  # the key earlier reports have
            "contact_count_window_s": CONTACT_COUNT_WINDOW_S,
            "hand_closure_flexed_rad": FLEXED_RAD,
        },
        **comparison.to_dict(),
        "diagnostic_by_condition": conditions,
        "trials": records,
        "table": table,
        "wall_s": time.perf_counter() - started,
        "rollouts_wall_s": sum(float(r["wall_s"]) for r in records),
    }
    figure = out / FIGURE_FILE
    intervals = dict(plot_intervals(comparison))
    for name in (NOMINAL, SHIFTED):
        if name in conditions:
            entry = conditions[name]
            share = entry["pinch_share"]
            intervals[f"diagnostic {name}"] = {
                **{m: tuple(v) for m, v in entry["metrics"].items()},
                "pinch_share": (share["share"], *share["ci95"]),
            }
    _plot(figure, intervals)
    write_atomic(out / REPORT_FILE, json.dumps(data, indent=1, default=float))
    say("")
    say(table)
    say(f"wrote {out / REPORT_FILE} and {figure.name}")
    return data


def _plot(path: Path, groups: Any) -> None:
    from r2s2r_policy.analysis.plots import plot_style_comparison

    plot_style_comparison(path, groups)
