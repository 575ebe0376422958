"""Per-dimension normalisation statistics, computed streaming over datasets.

Statistics are accumulated batch by batch with Chan's parallel update (count, mean, sum of
squared deviations, min, max in float64), so a dataset of any size is summarised in one pass
without holding it in memory, and statistics of several sources merge exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel

MIN_SCALE = 1e-3
"""Smallest std (or half range) used to divide by; a constant dimension (belt speed in a
dataset recorded at one speed) would otherwise blow up to inf."""


class FeatureStats(ConfigModel):
    """Statistics of one feature (per dimension), as stored in a checkpoint's config.yaml."""

    count: int = Field(ge=1, description="Samples summarised.")
    mean: list[float] = Field(min_length=1, description="Per-dimension mean.")
    std: list[float] = Field(min_length=1, description="Per-dimension standard deviation.")
    min: list[float] = Field(min_length=1, description="Per-dimension minimum.")
    max: list[float] = Field(min_length=1, description="Per-dimension maximum.")


class NormalizationStats(ConfigModel):
    """Statistics of every normalised feature, keyed by feature name."""

    features: dict[str, FeatureStats] = Field(description="Feature key → statistics.")

    def offset_scale(
        self, key: str, mode: Literal["mean_std", "min_max"]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(offset, scale)`` so that ``(x - offset) / scale`` is normalised.

        ``mean_std`` gives zero mean, unit variance; ``min_max`` maps [min, max] to [-1, 1].
        Scales below :data:`MIN_SCALE` are raised to it.

        Raises:
            KeyError: If ``key`` has no statistics.

        """
        if key not in self.features:
            raise KeyError(
                f"normalisation: no statistics for {key!r} (have {sorted(self.features)})"
            )
        stats = self.features[key]
        if mode == "mean_std":
            offset = np.asarray(stats.mean, dtype=np.float32)
            scale = np.asarray(stats.std, dtype=np.float32)
        else:
            low = np.asarray(stats.min, dtype=np.float32)
            high = np.asarray(stats.max, dtype=np.float32)
            offset = (low + high) / 2.0
            scale = (high - low) / 2.0
        return offset, np.maximum(scale, MIN_SCALE).astype(np.float32)


@dataclass
class RunningStats:
    """Streaming per-dimension count/mean/variance/min/max of one feature.

    Args:
        dim: Number of dimensions.

    """

    dim: int

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise ValueError(f"RunningStats.dim = {self.dim}: expected >= 1")
        self.count = 0
        self.mean = np.zeros(self.dim, dtype=np.float64)
        self.m2 = np.zeros(self.dim, dtype=np.float64)
        self.min = np.full(self.dim, np.inf)
        self.max = np.full(self.dim, -np.inf)

    def update(self, values: np.ndarray) -> None:
        """Add a batch of samples ``(N, dim)`` (or one sample ``(dim,)``).

        Raises:
            ValueError: If the trailing dimension is not ``dim`` or values are not finite.

        """
        batch = np.asarray(values, dtype=np.float64)
        if batch.ndim == 1:
            batch = batch.reshape(1, -1)
        if batch.ndim != 2 or batch.shape[1] != self.dim:
            raise ValueError(f"RunningStats.update: expected (N, {self.dim}), got {batch.shape}")
        if batch.shape[0] == 0:
            return
        if not np.all(np.isfinite(batch)):
            raise ValueError("RunningStats.update: values contain NaN or Inf")
        n_b = batch.shape[0]
        mean_b = batch.mean(axis=0)
        m2_b = ((batch - mean_b) ** 2).sum(axis=0)
        n_a = self.count
        total = n_a + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / total)
        self.m2 = self.m2 + m2_b + delta**2 * (n_a * n_b / total)
        self.count = total
        self.min = np.minimum(self.min, batch.min(axis=0))
        self.max = np.maximum(self.max, batch.max(axis=0))

    def merge(self, other: RunningStats) -> None:
        """Fold another accumulator of the same dimension into this one."""
        if other.dim != self.dim:
            raise ValueError(f"RunningStats.merge: dim {other.dim} != {self.dim}")
        if other.count == 0:
            return
        n_a, n_b = self.count, other.count
        total = n_a + n_b
        delta = other.mean - self.mean
        self.mean = self.mean + delta * (n_b / total)
        self.m2 = self.m2 + other.m2 + delta**2 * (n_a * n_b / total)
        self.count = total
        self.min = np.minimum(self.min, other.min)
        self.max = np.maximum(self.max, other.max)

    def finish(self) -> FeatureStats:
        """Return the statistics (population std).

        Raises:
            ValueError: If no sample was added.

        """
        if self.count == 0:
            raise ValueError("RunningStats.finish: no samples were added")
        std = np.sqrt(self.m2 / self.count)
        return FeatureStats(
            count=self.count,
            mean=self.mean.tolist(),
            std=std.tolist(),
            min=self.min.tolist(),
            max=self.max.tolist(),
        )


def stats_from_arrays(arrays: Mapping[str, list[np.ndarray]]) -> NormalizationStats:
    """Compute statistics per key from lists of ``(N, dim)`` arrays (e.g. one per episode).

    Raises:
        ValueError: If a key has no arrays.

    """
    features: dict[str, FeatureStats] = {}
    for key, chunks in arrays.items():
        if not chunks:
            raise ValueError(f"normalisation: no data for {key!r}")
        running = RunningStats(int(np.asarray(chunks[0]).reshape(len(chunks[0]), -1).shape[1]))
        for chunk in chunks:
            running.update(np.asarray(chunk).reshape(len(chunk), -1))
        features[key] = running.finish()
    return NormalizationStats(features=features)
