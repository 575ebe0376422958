"""The stats of a LeRobot v3.0 dataset (``meta/stats.json``, per episode in ``meta/episodes``).

Exact: low-dimensional features over every frame, camera features over every pixel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

QUANTILES: tuple[float, ...] = (0.01, 0.10, 0.50, 0.90, 0.99)
"""Quantiles in the stats (LeRobot's ``q01`` ... ``q99``)."""


def array_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Stats over axis 0 of a (N, ...) array (exact quantiles), LeRobot's keys."""
    data = values.astype(np.float64)
    stats = {
        "min": data.min(axis=0),
        "max": data.max(axis=0),
        "mean": data.mean(axis=0),
        "std": data.std(axis=0),
        "count": np.array([data.shape[0]]),
    }
    quantiles = np.quantile(data, QUANTILES, axis=0)
    for q, value in zip(QUANTILES, quantiles, strict=True):
        stats[f"q{round(q * 100):02d}"] = value
    return stats


def image_histogram(images: np.ndarray) -> np.ndarray:
    """Per-channel 256-bin histogram of uint8 (T, H, W, 3) images: int64 (3, 256)."""
    return np.stack(
        [np.bincount(images[..., c].ravel(), minlength=256) for c in range(images.shape[-1])]
    ).astype(np.int64)


def histogram_stats(histogram: np.ndarray, count: int) -> dict[str, np.ndarray]:
    """Per-channel stats of pixel values in [0, 1] from (C, 256) histograms, shape (C, 1, 1).

    Exact: every pixel is counted (LeRobot samples frames); quantiles are the smallest value
    whose cumulative share reaches q. ``count`` is the number of frames, as LeRobot counts.
    """
    levels = np.arange(256, dtype=np.float64) / 255.0
    totals = histogram.sum(axis=1).astype(np.float64)
    mean = (histogram * levels).sum(axis=1) / totals
    var = (histogram * levels**2).sum(axis=1) / totals - mean**2
    present = histogram > 0
    cumulative = np.cumsum(histogram, axis=1) / totals[:, None]
    stats = {
        "min": np.array([levels[np.argmax(row)] for row in present]),
        "max": np.array([levels[255 - np.argmax(row[::-1])] for row in present]),
        "mean": mean,
        "std": np.sqrt(np.maximum(var, 0.0)),
    }
    for q in QUANTILES:
        stats[f"q{round(q * 100):02d}"] = np.array(
            [levels[int(np.searchsorted(row, q - 1e-12))] for row in cumulative]
        )
    shaped = {k: v.reshape(-1, 1, 1) for k, v in stats.items()}
    shaped["count"] = np.array([count])
    return shaped


def jsonable(stats: dict[str, np.ndarray]) -> dict[str, Any]:
    """Return stats as JSON-ready lists."""
    return {k: np.asarray(v).tolist() for k, v in stats.items()}
