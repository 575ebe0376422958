"""The 2×2 co-training experiment's design and results.

Real-only vs real + each simulated configuration.

- :class:`ExperimentConfig` and the presets ``reduced`` / ``paper`` / ``smoke``.
- :func:`grounding_effects`, :class:`ExperimentResults`: the paper's table and main effects.

Running it (demos, grounding, generation, training and evaluation as cached stages) is the
bring-up's pipeline: ``r2s2r.pipeline.experiment`` (``r2s2r experiment``).
"""

from __future__ import annotations

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
    "contrast",
    "format_table",
    "grounding_effects",
    "load_preset",
    "plot_results",
]
