"""Evaluation of a policy on the real twin (or the real cell): 24 nominal + 26 shifted trials.

- :func:`r2s2r_policy.evaluation.ros.evaluate_ros` (the ROS edge, imported from there): through a
  running ROS graph, as on hardware (policy_inference node drives the cell; ``/trial/start`` /
  ``/trial/outcome`` score each trial); the bring-up starts the ``evaluate`` graph for a
  self-contained run (``r2s2r.pipeline.evaluate``).
- :func:`evaluate_in_process`: the same trials on the twin's cell without ROS, faster.
- :class:`EvaluationReport`: success per condition with 95% Wilson intervals, failure reasons,
  JSON + bar plot.

MuJoCo loads only when the in-process evaluator is used.
"""

from __future__ import annotations

from typing import Any

from .report import ConditionSummary, EvaluationReport, plot_success
from .stats import wilson_interval
from .trials import DEFAULT_CONDITION_COUNTS, EvaluationConfig, TrialRecord, TrialSpec, trial_plan


def evaluate_in_process(*args: Any, **kwargs: Any) -> EvaluationReport:
    """See :func:`r2s2r_policy.evaluation.in_process.evaluate_in_process`."""
    from .in_process import evaluate_in_process as run

    return run(*args, **kwargs)


__all__ = [
    "DEFAULT_CONDITION_COUNTS",
    "ConditionSummary",
    "EvaluationConfig",
    "EvaluationReport",
    "TrialRecord",
    "TrialSpec",
    "evaluate_in_process",
    "plot_success",
    "trial_plan",
    "wilson_interval",
]
