"""The experiment's evaluation stages: choose how a policy executes, then run the protocol.

- ``selection/<name>``: with ``execution_selection_trials`` > 0, each execution candidate
  (receding with ``executed_steps``, temporal ensembling) runs that many nominal trials from
  ``validation_base_seed`` (in process); the one with more successes is used.
- ``evaluation/<name>``: the protocol (24 nominal + 26 shifted trials by default) in process
  or through the launched ``evaluate`` graph (``evaluator: ros``), on the grounded cell.

Every policy of an experiment is evaluated on the same trials.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from r2s2r_common.config import parse_config
from r2s2r_common.console import progress_reporter
from r2s2r_common.errors import raise_if_stop_requested
from r2s2r_policy.evaluation.report import ALL, SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL, EvaluationConfig
from r2s2r_policy.inference.engine import InferenceConfig

from r2s2r.experiment.config import ExperimentConfig
from r2s2r.experiment.products import Checkpoint
from r2s2r.experiment.results import GROUPS, GroupResult, PolicyResult
from r2s2r.experiment.session import ExperimentSession, evaluator_config_hashes
from r2s2r.pipeline.cache import StageError, content_hash


def deploy_command(checkpoint: str | Path, inference: InferenceConfig) -> str:
    """Return the ``ros2 launch`` line that runs ``checkpoint`` on the cell, as ``inference``."""
    from r2s2r_policy.evaluation.ros import deploy_graph_arguments

    arguments = deploy_graph_arguments(checkpoint, inference.execution, inference.executed_steps)
    return "ros2 launch r2s2r real_deploy.launch.py " + " ".join(
        f"{name}:={shlex.quote(value)}" for name, value in arguments.items()
    )


def evaluation_protocol(config: ExperimentConfig) -> EvaluationConfig:
    """Return the evaluation protocol of the experiment (same trials for every policy)."""
    return EvaluationConfig(
        trials_per_condition=dict(config.trials_per_condition),
        base_seed=config.evaluation_base_seed,
    )


def policy_result_from_json(
    name: str, data: dict[str, Any], world: str | None, behavior: str | None, checkpoint: str
) -> PolicyResult:
    """Rebuild a policy's table row from its ``evaluation.json`` (also for cached stages)."""
    summary = data["summary"]
    groups = {
        group: GroupResult(int(summary[group]["successes"]), int(summary[group]["trials"]))
        for group in GROUPS
        if group in summary
    }
    conditions = {
        condition: {
            "successes": int(entry["successes"]),
            "trials": int(entry["trials"]),
            "failures": dict(entry.get("failure_reasons", {})),
        }
        for condition, entry in summary.items()
        if condition not in (SHIFTED, ALL)
    }
    return PolicyResult(
        name=name,
        world=world,
        behavior=behavior,
        groups=groups,
        failure_reasons=dict(summary.get(ALL, {}).get("failure_reasons", {})),
        checkpoint=checkpoint,
        conditions=conditions,
    )


def inference_config(config: ExperimentConfig) -> InferenceConfig:
    """Return the engine settings of the preset (``execution``, ``executed_steps``)."""
    return InferenceConfig(execution=config.execution, executed_steps=config.executed_steps)


def execution_candidates(config: ExperimentConfig) -> dict[str, InferenceConfig]:
    """Label -> engine settings the selection compares (the preset's own first)."""
    preset = inference_config(config)
    receding = preset.model_copy(update={"execution": "receding"})
    ensemble = preset.model_copy(update={"execution": "temporal_ensemble"})
    candidates = {
        f"receding_{receding.executed_steps}": receding,
        "temporal_ensemble": ensemble,
    }
    first = next(k for k, v in candidates.items() if v.execution == preset.execution)
    return {first: candidates[first]} | candidates


def select_execution(
    session: ExperimentSession, name: str, checkpoint: Checkpoint, world: Path
) -> InferenceConfig:
    """Choose how ``checkpoint``'s chunks are executed, on validation seeds.

    With ``execution_selection_trials`` = 0 the preset's settings. Otherwise each candidate
    runs that many nominal trials from ``validation_base_seed`` in ``world`` (in process,
    whatever the evaluator) and the one with more successes is returned (ties: the
    preset's). Stage ``selection/<name>``.

    Raises:
        StageError: The evaluator failed.

    """
    trials = session.config.execution_selection_trials
    preset = inference_config(session.config)
    if trials == 0:
        session.state.execution[name] = {
            "chosen": preset.model_dump(mode="json"),
            "deploy": deploy_command(checkpoint.path, preset),
        }
        return preset
    candidates = execution_candidates(session.config)
    protocol = EvaluationConfig(
        trials_per_condition={NOMINAL: trials}, base_seed=session.config.validation_base_seed
    )
    inputs: dict[str, Any] = {
        "checkpoint": checkpoint.fingerprint,
        "protocol": protocol.model_dump(mode="json"),
        "twin": content_hash(world),
        "cell": session.cell_knowledge(world),
        "candidates": {k: v.model_dump(mode="json") for k, v in candidates.items()},
        **evaluator_config_hashes(),
    }

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        successes = {}
        for label, candidate in candidates.items():
            report = run_trials(
                session,
                f"selection/{name} {label}",
                checkpoint,
                protocol,
                world,
                candidate,
                "in_process",
                folder / "logs",
            )
            successes[label] = [sum(r.success for r in report.records), len(report.records)]
        chosen = max(candidates, key=lambda label: successes[label][0])  # first on ties
        record = {
            "validation_successes": successes,
            "validation_base_seed": session.config.validation_base_seed,
            "chosen": chosen,
            "settings": candidates[chosen].model_dump(mode="json"),
        }
        path = folder / "selection.json"
        path.write_text(json.dumps(record, indent=1))
        session.log(
            f"[selection/{name}] "
            + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in successes.items())
            + f": {chosen}"
        )
        return {"selection": str(path)}, record

    stage = f"selection/{name}"
    outcome = session.stages.run(stage, inputs, body)
    session.state.note(stage, outcome)
    data: dict[str, Any] = json.loads(Path(outcome.outputs["selection"]).read_text())
    chosen = parse_config(InferenceConfig, data["settings"], str(outcome.outputs["selection"]))
    session.state.execution[name] = {
        "chosen": data["settings"],
        "validation_successes": data["validation_successes"],
        "validation_base_seed": data["validation_base_seed"],
        "deploy": deploy_command(checkpoint.path, chosen),
    }
    return chosen


def run_trials(
    session: ExperimentSession,
    label: str,
    checkpoint: Checkpoint,
    protocol: EvaluationConfig,
    world: Path,
    inference: InferenceConfig,
    evaluator: str,
    log_dir: Path,
) -> Any:
    """Run ``protocol``'s trials of ``checkpoint`` with a progress bar; the report.

    Args:
        session: The experiment.
        label: Progress bar and error prefix.
        checkpoint: The checkpoint.
        protocol: Trials.
        world: World (twin file) to run them in.
        inference: Engine settings.
        evaluator: ``in_process``, or ``ros`` (the evaluate graph, launched).
        log_dir: Folder for the graph's logs (``ros``).

    Raises:
        StageError: The evaluator failed (graph not up, checkpoint refused, ...).

    """
    bar = progress_reporter(
        label, sum(protocol.trials_per_condition.values()), session.progress_bars, unit="trial"
    )
    counts = {"done": 0, "successes": 0}

    def echo(record: Any) -> None:
        # Every trial is in the report; the console shows the count so far.
        counts["done"] += 1
        counts["successes"] += bool(record.success)
        bar.update(counts["done"], f"{counts['successes']} succeeded")
        raise_if_stop_requested()

    try:
        if evaluator == "ros":
            from r2s2r.pipeline.evaluate import evaluate_over_ros

            # The evaluate graph's policy node gets the checkpoint's image size (as the
            # in-process evaluator resizes to the spec) and the engine settings.
            report = evaluate_over_ros(
                checkpoint.path,
                protocol,
                launch=True,
                twin_config=str(world),
                real_time_factor=session.config.real_time_factor,
                policy_overrides={
                    "execution": inference.execution,
                    "executed_steps": inference.executed_steps,
                },
                # A simulator world is a cell that knows itself: its own camera_info and
                # mounts (the twin's datasheet ones), extrinsics trusted.
                cell_arguments=session.cell_arguments
                if world == session.twin_path
                else {"tracker_anchor_to_belt": "false"},
                log_dir=log_dir,
                progress=echo,
            )
            not_run = report.not_run
            if not_run:  # a partial protocol is no result: the stage fails and reruns whole
                why = report.metadata.get("stopped") or not_run[0].not_run
                raise RuntimeError(f"{len(not_run)} of {len(report.records)} trials not run: {why}")
            return report
        from r2s2r_policy.evaluation.in_process import evaluate_in_process

        return evaluate_in_process(
            checkpoint.path,
            protocol,
            twin_config_path=world,
            inference=inference,
            grounding_artifact=session.cell_arguments.get("grounding_artifact")
            if world == session.twin_path
            else None,
            progress=echo,
        )
    except (RuntimeError, ValueError) as error:
        raise StageError(f"{label}: {error}") from None
    finally:
        bar.close()


def evaluate_policy(
    session: ExperimentSession,
    name: str,
    checkpoint: Checkpoint,
    world_path: Path | None = None,
    protocol: EvaluationConfig | None = None,
    inference: InferenceConfig | None = None,
) -> dict[str, Any]:
    """Evaluate one checkpoint on the protocol; returns the ``evaluation.json`` content.

    Args:
        session: The experiment.
        name: Policy name (stage ``evaluation/<name>``).
        checkpoint: The checkpoint.
        world_path: World to evaluate in (default: the twin's).
        protocol: Trials (default: the experiment's protocol).
        inference: Engine settings (default: the preset's).

    Raises:
        StageError: The evaluator failed (graph not up, checkpoint refused, ...).

    """
    protocol = protocol or evaluation_protocol(session.config)
    world = world_path or session.twin_path
    inference = inference or inference_config(session.config)
    inputs: dict[str, Any] = {
        "checkpoint": checkpoint.fingerprint,
        "protocol": protocol.model_dump(mode="json"),
        "evaluator": session.config.evaluator,
        "twin": content_hash(world),
        "cell": session.cell_knowledge(world),
        "inference": inference.model_dump(mode="json"),
        **evaluator_config_hashes(),
    }
    if session.config.evaluator == "ros":
        inputs["real_time_factor"] = session.config.real_time_factor

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        report = run_trials(
            session,
            f"evaluation/{name}",
            checkpoint,
            protocol,
            world,
            inference,
            evaluator=session.config.evaluator,
            log_dir=folder / "logs",
        )
        json_path, _ = report.save(folder, "evaluation")
        successes = sum(r.success for r in report.records)
        session.log(f"[evaluation/{name}] {successes}/{len(report.records)} trials succeeded")
        return {"evaluation": str(json_path)}, {"wall_s": report.wall_s}

    stage = f"evaluation/{name}"
    outcome = session.stages.run(stage, inputs, body)
    session.state.note(stage, outcome)
    data: dict[str, Any] = json.loads(Path(outcome.outputs["evaluation"]).read_text())
    return data
