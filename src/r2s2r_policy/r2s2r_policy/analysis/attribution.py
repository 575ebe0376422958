"""Per-step attribution of a deployed policy to its real or its simulated training data.

Two independent measures for each step of a rollout (each a *real-likeness* in [0, 1]: 1 is
real-derived, 0 sim-derived, 0.5 undecided):

- **state** (:func:`state_attribution`): where the observation's latent lies among the
  policy's training latents: the real share of its k nearest neighbours in a class-balanced
  training set (as many sim frames as real ones), a probe's p(real), and the distance to the
  nearest real frame in units of the real frames' own typical nearest-neighbour distance
  (1: as close as real frames are to each other; large: off the demonstrations' support);
- **behavior** (:func:`behavior_real_likeness`): whether the chunk the policy outputs for
  that observation is closer to what a real-only policy outputs for it or to what a sim-only
  policy (trained on the same simulated dataset alone) outputs:
  ``d_sim / (d_real + d_sim)``.

:func:`group_interval` summarises per-step values as the mean of per-trial means with a
bootstrap interval over trials (trials, not steps, are the independent units).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .domain import DomainProbe, knn_real_share

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class StateAttribution:
    """State measures of each query (see the module docstring).

    Attributes:
        knn_real_share: ``(Q,)`` real share of the k nearest balanced training latents.
        probe_p_real: ``(Q,)`` the probe's p(real) (NaN without a probe).
        nearest_real_ratio: ``(Q,)`` distance to the nearest real latent / the real latents'
            median nearest-neighbour distance.

    """

    knn_real_share: FloatArray
    probe_p_real: FloatArray
    nearest_real_ratio: FloatArray


def balanced(real: NDArray, sim: NDArray, seed: int = 0) -> tuple[NDArray, NDArray]:
    """Return both sets cut to the smaller one's size (random, reproducible subsets)."""
    rng = np.random.default_rng(seed)
    n = min(len(real), len(sim))
    return (
        real[np.sort(rng.permutation(len(real))[:n])],
        sim[np.sort(rng.permutation(len(sim))[:n])],
    )


def nearest_distance(
    train: NDArray, queries: NDArray, exclude_self: bool = False, chunk: int = 1024
) -> FloatArray:
    """Return each query's distance to its nearest training latent.

    ``exclude_self``: the queries are ``train`` itself, and a latent is not its own neighbour.
    """
    a = np.asarray(train, dtype=np.float64)
    q = np.asarray(queries, dtype=np.float64)
    squared = np.sum(a**2, axis=1)
    nearest = np.empty(len(q))
    for start in range(0, len(q), chunk):
        block = q[start : start + chunk]
        d2 = np.maximum(np.sum(block**2, axis=1)[:, None] + squared - 2 * block @ a.T, 0)
        if exclude_self:
            d2[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        nearest[start : start + len(block)] = np.sqrt(d2.min(axis=1))
    return nearest


def real_spacing(real: NDArray) -> float:
    """Median distance from each real latent to its nearest other real latent."""
    if len(real) < 2:
        raise ValueError(f"real spacing needs at least 2 latents, got {len(real)}")
    return float(np.median(nearest_distance(real, real, exclude_self=True))) or 1.0


def state_attribution(
    real: NDArray,
    sim: NDArray,
    queries: NDArray,
    probe: DomainProbe | None = None,
    k: int = 10,
    seed: int = 0,
) -> StateAttribution:
    """Attribute each query latent to the real or simulated training latents.

    Args:
        real: ``(N, D)`` latents of the real training frames.
        sim: ``(M, D)`` latents of the simulated training frames.
        queries: ``(Q, D)`` latents of rollout steps.
        probe: A real-vs-sim probe fit on the same latents (:func:`~.domain.fit_probe`).
        k: Neighbours.
        seed: Seed of the balanced subsets.

    """
    a, b = balanced(np.asarray(real), np.asarray(sim), seed)
    knn = knn_real_share(a, b, queries, k=min(k, len(a) + len(b)))
    spacing = real_spacing(real)
    p_real = probe.p_real(queries) if probe is not None else np.full(len(queries), np.nan)
    return StateAttribution(knn.real_share, p_real, nearest_distance(real, queries) / spacing)


def behavior_real_likeness(
    chunks: NDArray, real_only_chunks: NDArray, sim_only_chunks: NDArray
) -> FloatArray:
    """``d_sim / (d_real + d_sim)`` per query: 1 when the chunk is the real-only policy's.

    Distances are the RMS over a chunk's steps and joints (rad). Where both are zero (the
    two references agree exactly) the value is 0.5.

    Raises:
        ValueError: On shapes that differ.

    """
    c, r, s = (np.asarray(x, dtype=np.float64) for x in (chunks, real_only_chunks, sim_only_chunks))
    if not (c.shape == r.shape == s.shape) or c.ndim != 3:
        raise ValueError(f"chunks {c.shape}, {r.shape}, {s.shape}: expected equal (Q, H, A)")
    d_real = np.sqrt(np.mean((c - r) ** 2, axis=(1, 2)))
    d_sim = np.sqrt(np.mean((c - s) ** 2, axis=(1, 2)))
    total = d_real + d_sim
    out = np.full(len(c), 0.5)
    moving = total > 0
    out[moving] = d_sim[moving] / total[moving]
    return out


def group_interval(
    per_trial: Sequence[NDArray], resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of per-trial means and its bootstrap interval over trials: ``(mean, lo, hi)``.

    Trials without a finite value are left out; none left gives NaNs.
    """
    means = np.array([np.nanmean(t) for t in per_trial if np.isfinite(t).any()])
    if means.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = means[rng.integers(0, means.size, (resamples, means.size))].mean(axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(means.mean()), float(low), float(high)


def spearman(x: NDArray, y: NDArray) -> float:
    """Spearman rank correlation of two series (NaN pairs dropped; NaN if < 3 pairs)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(a) & np.isfinite(b)
    if keep.sum() < 3:
        return float("nan")
    ranks_a = np.argsort(np.argsort(a[keep])).astype(np.float64)
    ranks_b = np.argsort(np.argsort(b[keep])).astype(np.float64)
    if ranks_a.std() == 0 or ranks_b.std() == 0:
        return float("nan")
    return float(np.corrcoef(ranks_a, ranks_b)[0, 1])
