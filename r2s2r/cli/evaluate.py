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

DEFAULT_PROTOCOL = "evaluation/default.yaml"


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
    "--launch/--no-launch",
    default=True,
    show_default=True,
    help="Start twin, belt_speed and policy_inference (else use a running graph).",
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
    launch: bool,
    twin_config: str,
    real_time_factor: float,
    graph_timeout_s: float,
) -> None:
    """Evaluate CHECKPOINT: success per condition with 95% CIs and failure reasons."""
    from r2s2r_policy.checkpoint import load_checkpoint

    config = _load_protocol(protocol, trials, base_seed)
    # The whole checkpoint (config and weights) is read before anything starts.
    load_checkpoint(checkpoint)
    click.echo(
        f"evaluating {checkpoint}: {config.total_trials} trials {config.trials_per_condition}"
    )
    report: EvaluationReport
    if in_process:
        from r2s2r_policy.evaluation.in_process import evaluate_in_process

        report = evaluate_in_process(
            checkpoint, config, twin_config_path=twin_config, progress=_echo
        )
    else:
        from r2s2r.pipeline.evaluate import evaluate_over_ros

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
            log_dir=Path(out_dir) / "logs",
            graph_timeout_s=graph_timeout_s,
            progress=_echo,
        )
    json_path, png_path = report.save(out_dir, name)
    click.echo(report.table())
    click.echo(f"wall time {report.wall_s:.0f} s; wrote {json_path} and {png_path}")
