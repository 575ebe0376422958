"""``r2s2r evaluate``: evaluate a checkpoint on the real twin (ROS graph) or in-process.

Over ROS with ``--launch`` (the default) it starts the ``evaluate`` graph through the one
supervisor (:mod:`r2s2r.pipeline.evaluate`); ``--no-launch`` drives a graph already running.

Examples::

    r2s2r evaluate runs/policy/checkpoints/step_00003000 --out runs/eval/real_only
    r2s2r evaluate CKPT --in-process --out runs/eval/quick
    r2s2r evaluate CKPT --no-launch        # against a running graph (the real cell)
"""

from __future__ import annotations

from pathlib import Path

import click
from r2s2r_common.config import load_config, parse_config
from r2s2r_policy.evaluation.report import EvaluationReport
from r2s2r_policy.evaluation.trials import EvaluationConfig, TrialRecord
from r2s2r_policy.inference.engine import InferenceConfig

from r2s2r.cli.grounded_cell import artifact_option, grounded_arguments

DEFAULT_PROTOCOL = "evaluation/default.yaml"
POLICY_NODE_CONFIG = "nodes/policy_inference.yaml"


def deployed_inference_config(
    execution: str | None = None, executed_steps: int | None = None
) -> InferenceConfig:
    """Return the policy_inference node's engine settings (``config/nodes/``), options applied.

    The in-process evaluator runs the engine with these, so that it executes chunks as the
    node does on the cell unless told otherwise.
    """
    from r2s2r_common.config import resolve_config_path
    from r2s2r_policy.nodes.policy_inference import PolicyInferenceParams

    params = load_config(
        PolicyInferenceParams, resolve_config_path(POLICY_NODE_CONFIG), "policy_inference"
    )
    config = params.inference_config()
    update: dict[str, object] = {}
    if execution is not None:
        update["execution"] = execution
    if executed_steps is not None:
        update["executed_steps"] = executed_steps
    return parse_config(InferenceConfig, config.model_dump() | update, "engine options")


def _load_protocol(
    path: str | None, trials: tuple[str, ...], base_seed: int | None
) -> EvaluationConfig:
    from r2s2r_common.config import resolve_config_path

    config = load_config(EvaluationConfig, resolve_config_path(path or DEFAULT_PROTOCOL))
    data = config.model_dump()
    if trials:
        counts: dict[str, int] = {}
        for item in trials:
            condition, sep, count = item.partition("=")
            if not sep or not count.isdigit():
                raise click.BadParameter(
                    f"{item!r}: expected CONDITION=COUNT", param_hint="--trials"
                )
            counts[condition] = int(count)
        data["trials_per_condition"] = counts
    if base_seed is not None:
        data["base_seed"] = base_seed
    return parse_config(EvaluationConfig, data, "evaluation protocol + options")


def _echo(record: TrialRecord) -> None:
    mark = "ok  " if record.success else "FAIL"
    click.echo(
        f"[{record.index:>2}] {mark} {record.condition:<14} seed {record.seed} "
        f"{record.object_type:<9} {record.reason:<14} {record.duration_s:5.1f} s sim, "
        f"{record.wall_s:5.1f} s wall"
    )


def _check_writable(out_dir: Path) -> None:
    """Refuse an output folder the report could not be written into (before any trial).

    Folders it creates to try are removed again: a refusal later leaves nothing behind.
    """
    import tempfile

    created = [folder for folder in (out_dir, *out_dir.parents) if not folder.exists()]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".write_check_"):
            pass
    except OSError as error:
        raise click.BadParameter(
            f"{out_dir}: cannot write the report there ({error.strerror or error}); give a "
            "writable folder",
            param_hint="--out",
        ) from None
    finally:
        for folder in created:  # deepest first
            try:
                folder.rmdir()
            except OSError:
                break


def _check_artifact(artifact: Path) -> None:
    """Refuse an invalid ``--artifact`` in one line (the one full check of every reader)."""
    from r2s2r_common.config import ConfigError
    from r2s2r_world.grounding import read_artifact

    try:
        read_artifact(artifact)
    except ConfigError as error:
        raise click.BadParameter(str(error), param_hint="--artifact") from None


def _check_joints(checkpoint: str, joint_names: list[str], action_names: list[str]) -> None:
    """Refuse a checkpoint whose joints are not the cell's, naming the field and both lists."""
    from r2s2r_description.robot import ALL_JOINT_NAMES

    cell = list(ALL_JOINT_NAMES)
    for field, names in (("joint_names", joint_names), ("action_names", action_names)):
        if list(names) != cell:
            missing = [name for name in cell if name not in names]
            extra = [name for name in names if name not in cell]
            detail = (
                f"{len(names)} joints, the cell has {len(cell)}"
                + (f" (lacks {missing})" if missing else "")
                + (f" (unknown {extra})" if extra else "")
                if missing or extra or len(names) != len(cell)
                else "the cell's joints in another order"
            )
            raise click.ClickException(
                f"checkpoint {checkpoint}: spec.{field}: {detail}; expected the cell's "
                f"{len(cell)} joints in its order (a policy of another robot, or an edited "
                "config.yaml)"
            )


@click.command("evaluate")
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="runs/evaluation",
    show_default=True,
    help="Folder for evaluation.json and evaluation.png.",
)
@click.option("--name", default="evaluation", show_default=True, help="Output file stem.")
@click.option(
    "--protocol", default=None, help=f"Protocol YAML (default config/{DEFAULT_PROTOCOL})."
)
@click.option("--trials", multiple=True, help="Override counts: CONDITION=COUNT (repeatable).")
@click.option("--base-seed", type=int, default=None, help="Override the seed of trial 0.")
@click.option("--in-process", is_flag=True, help="Fast evaluator without ROS (same trials).")
@click.option(
    "--execution",
    type=click.Choice(["receding", "temporal_ensemble"]),
    default=None,
    help="How chunks become commands (default: the policy_inference node's config).",
)
@click.option(
    "--executed-steps",
    type=click.IntRange(min=1),
    default=None,
    help="receding: chunk steps run before the next inference (default: the node's config).",
)
@click.option(
    "--launch/--no-launch",
    default=True,
    show_default=True,
    help="Start the evaluate graph: twin, cell state publisher, belt_speed, object tracker and "
    "policy_inference (else use a running graph).",
)
@click.option(
    "--twin-config",
    default="twin/default.yaml",
    show_default=True,
    help="Twin world (launched twin / in-process).",
)
@click.option(
    "--real-time-factor",
    type=float,
    default=1.0,
    show_default=True,
    help="Speed of a launched twin.",
)
@click.option(
    "--trace",
    "trace",
    is_flag=True,
    help="Keep each trial's inference trace (what the policy saw and sent) in OUT/traces/.",
)
@click.option(
    "--trace-images",
    is_flag=True,
    help="--trace, and the traces keep the camera images too (latent analysis).",
)
@artifact_option("Evaluate")
@click.option(
    "--graph-timeout-s",
    type=click.FloatRange(min=0.1),
    default=90.0,
    show_default=True,
    help="How long to wait for the graph (twin services and the policy node) to come up.",
)
def evaluate_command(
    checkpoint: str,
    out_dir: str,
    name: str,
    protocol: str | None,
    trials: tuple[str, ...],
    base_seed: int | None,
    in_process: bool,
    execution: str | None,
    executed_steps: int | None,
    launch: bool,
    twin_config: str,
    real_time_factor: float,
    artifact: Path | None,
    graph_timeout_s: float,
    trace: bool,
    trace_images: bool,
) -> None:
    """Evaluate CHECKPOINT: success per condition with 95% CIs and failure reasons."""
    from r2s2r_policy.checkpoint import load_checkpoint

    config = _load_protocol(protocol, trials, base_seed)
    if not in_process and not launch and (execution or executed_steps):
        raise click.UsageError(
            "--execution/--executed-steps set the engine of a launched graph or of --in-process; "
            "a running graph's policy_inference node keeps its own parameters"
        )
    if artifact is not None and not in_process and not launch:
        raise click.UsageError(
            "--artifact sets how a launched graph or --in-process runs the cell; a running "
            "graph keeps the grounding it was started with (real_deploy grounding_artifact:=...)"
        )
    trace = trace or trace_images
    if trace and not in_process and not launch:
        raise click.UsageError(
            "--trace sets the launched policy node's trace_dir (or --in-process); a running "
            "graph's policy_inference node keeps its own trace_dir parameter"
        )
    trace_dir = Path(out_dir) / "traces" if trace else None
    inference = deployed_inference_config(execution, executed_steps)
    # Where the report goes, the artifact and the whole checkpoint (config bound to its
    # weights) are checked before anything starts: no trial runs to be lost or refused later.
    _check_writable(Path(out_dir))
    if artifact is not None and in_process:
        _check_artifact(artifact)
    loaded = load_checkpoint(checkpoint)
    _check_joints(checkpoint, loaded.config.spec.joint_names, loaded.config.spec.action_names)
    click.echo(
        f"evaluating {checkpoint}: {config.total_trials} trials {config.trials_per_condition}"
    )
    report: EvaluationReport
    if in_process:
        from r2s2r_policy.evaluation.in_process import evaluate_in_process

        report = evaluate_in_process(
            checkpoint,
            config,
            twin_config_path=twin_config,
            inference=inference,
            grounding_artifact=artifact,
            progress=_echo,
            trace_dir=trace_dir,
            trace_images=trace_images,
        )
    else:
        from r2s2r.pipeline.evaluate import evaluate_over_ros

        cell_arguments = None
        if artifact is not None:
            cell_arguments = grounded_arguments(artifact, Path(out_dir) / "grounded_cell")

        click.echo(
            f"waiting up to {graph_timeout_s:.0f} s for the "
            f"{'launched' if launch else 'running'} graph: the twin's /trial/start and "
            "/trial/reset services and the /policy_inference lifecycle services"
            + ("" if launch else " (start the cell first, e.g. `r2s2r launch real_deploy`)")
        )
        report = evaluate_over_ros(
            checkpoint,
            config,
            launch=launch,
            twin_config=twin_config,
            real_time_factor=real_time_factor,
            policy_overrides={
                "execution": inference.execution,
                "executed_steps": inference.executed_steps,
            },
            cell_arguments=cell_arguments,
            log_dir=Path(out_dir) / "logs",
            graph_timeout_s=graph_timeout_s,
            progress=_echo,
            trace_dir=trace_dir,
            trace_images=trace_images,
        )
    json_path, png_path = report.save(out_dir, name)
    click.echo(report.table())
    click.echo(f"wall time {report.wall_s:.0f} s; wrote {json_path} and {png_path}")
    report.raise_for_policy_faults(str(json_path))
    not_run = report.not_run
    if not_run:
        from r2s2r_policy.evaluation.ros import HarnessError

        why = report.metadata.get("stopped") or not_run[0].not_run
        raise HarnessError(
            f"{len(not_run)} of {len(report.records)} trials not run (in no rate; the others "
            f"are in {json_path}): {why}"
        )
