"""The 2×2 co-training experiment: real-only vs real + each simulated configuration.

- :func:`run_experiment` / :class:`Experiment`: resumable cached stages (demos, grounding,
  generation, training, evaluation) in one experiment directory.
- :class:`ExperimentConfig` and the presets ``reduced`` / ``paper`` / ``smoke``.
- :func:`grounding_effects`, :class:`ExperimentResults`: the paper's table and main effects.

Heavy modules (torch, MuJoCo, data generation) load only when a stage needs them.
"""

from __future__ import annotations

from typing import Any

from .config import ALL_CONFIGURATIONS, PRESETS, ExperimentConfig, load_preset
from .results import (
    REAL_ONLY,
    Effect,
    Effects,
    ExperimentResults,
    GroupResult,
    PolicyResult,
    contrast,
    format_table,
    grounding_effects,
    plot_results,
)
from .stages import StageError, StageRunner, inputs_hash


def run_experiment(*args: Any, **kwargs: Any) -> ExperimentResults:
    """See :func:`r2s2r_policy.experiment.runner.run_experiment`."""
    from .runner import run_experiment as run

    return run(*args, **kwargs)


__all__ = [
    "ALL_CONFIGURATIONS",
    "PRESETS",
    "REAL_ONLY",
    "Effect",
    "Effects",
    "ExperimentConfig",
    "ExperimentResults",
    "GroupResult",
    "PolicyResult",
    "StageError",
    "StageRunner",
    "contrast",
    "format_table",
    "grounding_effects",
    "inputs_hash",
    "load_preset",
    "plot_results",
    "run_experiment",
]
