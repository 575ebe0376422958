"""The evaluate stage over ROS: the ``evaluate`` graph, started by the one supervisor.

:func:`evaluate_over_ros` starts ``config/graphs/evaluate.yaml`` (twin, belt speed, object
tracker, policy_inference) through :func:`r2s2r.supervisor.running_graph`, with the arguments
the policy package computes from the checkpoint
(:func:`r2s2r_policy.evaluation.ros.evaluation_graph_arguments`), runs the operator's side
(:func:`r2s2r_policy.evaluation.ros.evaluate_ros`) against it and stops every node at the end.
Without ``launch`` it runs the harness against a graph that is already up (the real cell).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from r2s2r_common.ros_domain import DomainClaim, claim_domain
from r2s2r_policy.evaluation.report import EvaluationReport
from r2s2r_policy.evaluation.ros import GRAPH_NAME, evaluate_ros, evaluation_graph_arguments
from r2s2r_policy.evaluation.trials import EvaluationConfig

from r2s2r.supervisor import running_graph


@contextlib.contextmanager
def _released(claim: DomainClaim | None) -> Iterator[None]:
    try:
        yield
    finally:
        if claim is not None:
            claim.release()


# Seconds a node of the evaluation graph gets to stop (SIGINT, then again before SIGKILL).
EVALUATION_GRACE_PERIOD_S = 5.0


def evaluate_over_ros(
    checkpoint: str | Path,
    config: EvaluationConfig | None = None,
    launch: bool = True,
    twin_config: str = "twin/default.yaml",
    real_time_factor: float = 1.0,
    policy_node: str = "policy_inference",
    policy_overrides: dict[str, Any] | None = None,
    cell_arguments: dict[str, str] | None = None,
    log_dir: str | Path = "runs/evaluation/logs",
    graph_timeout_s: float = 90.0,
    domain_id: int | None = None,
    progress: Any = None,
    trace_dir: str | Path | None = None,
    trace_images: bool = False,
) -> EvaluationReport:
    """Evaluate a checkpoint through the ROS graph, starting the ``evaluate`` graph if asked.

    Args:
        checkpoint: Policy checkpoint directory (the policy node loads it).
        config: Protocol (default: 24 nominal + 26 shifted trials).
        launch: Start the ``evaluate`` graph (False: use the graph that is already running,
            e.g. on the real cell).
        twin_config: Twin world of a launched graph (relative: against ``config/``).
        real_time_factor: Twin speed of a launched graph.
        policy_node: Policy node name ('' = do not switch its lifecycle).
        policy_overrides: policy_inference parameters of a launched graph (image size,
            execution settings; see ``evaluation_graph_arguments``).
        cell_arguments: Launch arguments of how the cell runs (a grounded cell:
            :func:`r2s2r.pipeline.stages.grounded_cell_arguments`).
        log_dir: Node logs of a launched graph.
        graph_timeout_s: Wall-clock limit for the graph to come up.
        domain_id: ROS_DOMAIN_ID of the harness and of launched nodes (None: a launched
            graph gets a private domain claimed for it, :func:`r2s2r_common.ros_domain.
            claim_domain`; a running graph is looked for in the environment's).
        progress: Called after each trial with its record.
        trace_dir: The launched policy node writes each trial's inference trace there
            (``trial_NNN.npz``); ignored without ``launch`` (a running node keeps its own
            ``trace_dir`` parameter).
        trace_images: The traces keep the camera images too (with ``trace_dir``).

    Returns:
        The report (``mode='ros'``).

    Raises:
        r2s2r_policy.evaluation.ros.HarnessError: Graph not up, a node died, a service
            refused or the checkpoint refused.
        r2s2r.graph.GraphError: A launch argument the graph refuses, or a missing executable.

    """
    if not launch:
        report = evaluate_ros(
            checkpoint, config, policy_node, graph_timeout_s, domain_id=domain_id, progress=progress
        )
    else:
        overrides = dict(policy_overrides or {})
        if trace_dir is not None:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
            overrides["trace_dir"] = str(Path(trace_dir).resolve())
            overrides["trace_images"] = trace_images
        arguments = evaluation_graph_arguments(
            checkpoint, twin_config, real_time_factor, overrides, cell_arguments
        )
        # The evaluate graph is self-contained (the twin is its cell): a domain of its own,
        # claimed so that no other job on this host shares it, unless one is given.
        claim = claim_domain() if domain_id is None else None
        if claim is not None:
            domain_id = claim.domain_id
        env = {"ROS_DOMAIN_ID": str(domain_id)}
        with (
            _released(claim),
            open(os.devnull, "w", encoding="utf-8") as quiet,
            running_graph(
                GRAPH_NAME,
                arguments,
                Path(log_dir),
                EVALUATION_GRACE_PERIOD_S,
                console=quiet,  # the nodes' output is in their logs; the console is the trials
                env=env,
            ) as graph,
        ):
            report = evaluate_ros(
                checkpoint,
                config,
                policy_node,
                graph_timeout_s,
                domain_id=domain_id,
                progress=progress,
                watch=graph,
                policy_log=Path(log_dir) / "policy_inference.log",
                trace_dir=trace_dir,
            )
    report.metadata.update({"real_time_factor": real_time_factor, "twin_config": twin_config})
    return report
