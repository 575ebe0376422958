"""Real vs simulated latents: alignment, discernibility and nearest-neighbour attribution.

Two sets of vectors, ``real`` ``(N, D)`` and ``sim`` ``(M, D)`` (e.g. the features a policy's
action head reads, for frames of the real and of a simulated dataset):

- **alignment** (Lei et al. 2026): :func:`sliced_wasserstein` (the mean over random unit
  directions of the 1-D Wasserstein-1 distance of the projections) and :func:`mmd_rbf` (the
  unbiased squared maximum mean discrepancy, Gaussian kernel, median-distance bandwidth);
- **discernibility** (Wei et al. 2025; Lei et al. 2026): :func:`fit_probe`, the held-out
  accuracy of a class-balanced probe telling real from sim, linear or a 2-layer MLP: a 2-D
  picture that looks aligned proves nothing while a probe still separates the domains;
- **attribution of a query** (a rollout frame): :func:`knn_real_share`, the share of real
  frames among its k nearest training neighbours (Wei et al. 2025), and its distance to the
  nearest real frame;
- :func:`bootstrap_interval` for any of them over resampled sets.

Plain NumPy (and torch for the MLP probe); no ROS. Inputs are standardised by the caller's
choice: the probes standardise with the training split's statistics themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def _as_sets(real: NDArray, sim: NDArray) -> tuple[FloatArray, FloatArray]:
    a = np.asarray(real, dtype=np.float64)
    b = np.asarray(sim, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected (N, D) and (M, D) sets, got {a.shape} and {b.shape}")
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"empty set: {len(a)} real and {len(b)} sim vectors")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("non-finite values in the latents")
    return a, b


def sliced_wasserstein(real: NDArray, sim: NDArray, directions: int = 128, seed: int = 0) -> float:
    """Mean 1-D Wasserstein-1 distance of the sets projected on random unit directions.

    The 1-D distance is computed exactly from the quantile functions on a common grid of
    ``max(N, M)`` levels.
    """
    a, b = _as_sets(real, sim)
    rng = np.random.default_rng(seed)
    axes = rng.normal(size=(a.shape[1], directions))
    axes /= np.linalg.norm(axes, axis=0, keepdims=True)
    levels = (np.arange(max(len(a), len(b))) + 0.5) / max(len(a), len(b))
    qa = np.quantile(a @ axes, levels, axis=0)
    qb = np.quantile(b @ axes, levels, axis=0)
    return float(np.mean(np.abs(qa - qb)))


def mmd_rbf(real: NDArray, sim: NDArray, bandwidth: float | None = None) -> float:
    """Unbiased squared MMD with a Gaussian kernel (bandwidth: median pairwise distance)."""
    a, b = _as_sets(real, sim)
    if len(a) < 2 or len(b) < 2:
        raise ValueError("MMD needs at least 2 vectors per set")
    both = np.vstack([a, b])
    squared = np.sum(both**2, axis=1)
    distances = np.maximum(squared[:, None] + squared[None, :] - 2.0 * both @ both.T, 0.0)
    if bandwidth is None:
        upper = distances[np.triu_indices(len(both), k=1)]
        bandwidth = float(np.sqrt(np.median(upper))) or 1.0
    kernel = np.exp(-distances / (2.0 * bandwidth**2))
    n, m = len(a), len(b)
    k_aa, k_bb, k_ab = kernel[:n, :n], kernel[n:, n:], kernel[:n, n:]
    term_a = (k_aa.sum() - np.trace(k_aa)) / (n * (n - 1))
    term_b = (k_bb.sum() - np.trace(k_bb)) / (m * (m - 1))
    return float(term_a + term_b - 2.0 * k_ab.mean())


def _balanced_split(
    a: FloatArray, b: FloatArray, holdout: float, rng: np.random.Generator
) -> tuple[FloatArray, NDArray, FloatArray, NDArray]:
    """Equal numbers of each class (the smaller set's size), split into train and test."""
    n = min(len(a), len(b))
    if n < 4:
        raise ValueError(f"a probe needs at least 4 vectors per class, got {n}")
    pick_a = a[rng.permutation(len(a))[:n]]
    pick_b = b[rng.permutation(len(b))[:n]]
    test = max(1, round(holdout * n))
    x_train = np.vstack([pick_a[test:], pick_b[test:]])
    y_train = np.r_[np.ones(n - test), np.zeros(n - test)]
    x_test = np.vstack([pick_a[:test], pick_b[:test]])
    y_test = np.r_[np.ones(test), np.zeros(test)]
    return x_train, y_train, x_test, y_test


@dataclass
class DomainProbe:
    """A trained real-vs-sim probe: its held-out accuracy and p(real) of any latent.

    Attributes:
        kind: ``linear`` or ``mlp``.
        accuracy: Held-out accuracy on a class-balanced split (0.5 is chance).
        tested: Held-out latents the accuracy was measured on (both classes).

    """

    kind: str
    accuracy: float
    model: Any
    mean: FloatArray
    std: FloatArray
    tested: int = 0

    def p_real(self, queries: NDArray) -> FloatArray:
        """Return the probe's probability that each query ``(Q, D)`` is a real frame."""
        import torch

        x = (np.asarray(queries, dtype=np.float64) - self.mean) / self.std
        with torch.no_grad():
            logits = self.model(torch.as_tensor(x, dtype=torch.float32)).numpy()[:, 0]
        return 0.5 * (1.0 + np.tanh(0.5 * logits.astype(np.float64)))  # the logistic, stable


def fit_probe(
    real: NDArray,
    sim: NDArray,
    kind: Literal["linear", "mlp"] = "linear",
    holdout: float = 0.3,
    hidden: int = 64,
    epochs: int = 300,
    seed: int = 0,
) -> DomainProbe:
    """Train a class-balanced probe telling real (1) from sim (0); held-out accuracy kept.

    ``linear``: logistic regression; ``mlp``: two hidden layers of ``hidden`` units (ReLU).
    Both trained full-batch with Adam on standardised inputs (the training split's mean and
    standard deviation).
    """
    import torch

    a, b = _as_sets(real, sim)
    rng = np.random.default_rng(seed)
    x_train, y_train, x_test, y_test = _balanced_split(a, b, holdout, rng)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + 1e-8
    torch.manual_seed(seed)
    width = a.shape[1]
    model: torch.nn.Module
    if kind == "linear":
        model = torch.nn.Linear(width, 1)
    elif kind == "mlp":
        model = torch.nn.Sequential(
            torch.nn.Linear(width, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(hidden, 1),
        )
    else:
        raise ValueError(f"kind = {kind!r}: expected 'linear' or 'mlp'")
    inputs = torch.as_tensor((x_train - mean) / std, dtype=torch.float32)
    labels = torch.as_tensor(y_train, dtype=torch.float32)[:, None]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
    model.eval()
    probe = DomainProbe(kind, 0.0, model, mean, std, len(y_test))
    predicted = (probe.p_real(x_test) > 0.5).astype(np.float64)
    probe.accuracy = float(np.mean(predicted == y_test))
    return probe


@dataclass(frozen=True)
class KnnAttribution:
    """Per query: the real share of its k nearest training vectors and the nearest real one.

    Attributes:
        real_share: ``(Q,)`` fraction of real vectors among the k nearest training vectors.
        nearest_real_distance: ``(Q,)`` Euclidean distance to the nearest real vector.
        nearest_sim_distance: ``(Q,)`` the same to the nearest simulated vector.

    """

    real_share: FloatArray
    nearest_real_distance: FloatArray
    nearest_sim_distance: FloatArray


def knn_real_share(
    real: NDArray, sim: NDArray, queries: NDArray, k: int = 10, chunk: int = 1024
) -> KnnAttribution:
    """Attribute each query to the domains by its k nearest training neighbours (Euclidean).

    Raises:
        ValueError: On shape mismatches, empty sets or ``k`` above the training set's size.

    """
    a, b = _as_sets(real, sim)
    q = np.asarray(queries, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != a.shape[1]:
        raise ValueError(f"queries {q.shape}: expected (Q, {a.shape[1]})")
    train = np.vstack([a, b])
    is_real = np.r_[np.ones(len(a), dtype=bool), np.zeros(len(b), dtype=bool)]
    if not 1 <= k <= len(train):
        raise ValueError(f"k = {k}: expected 1..{len(train)}")
    share = np.empty(len(q))
    near_real = np.empty(len(q))
    near_sim = np.empty(len(q))
    train_sq = np.sum(train**2, axis=1)
    for start in range(0, len(q), chunk):
        block = q[start : start + chunk]
        d2 = np.maximum(
            np.sum(block**2, axis=1)[:, None] + train_sq[None, :] - 2 * block @ train.T, 0
        )
        nearest = np.argpartition(d2, k - 1, axis=1)[:, :k]
        share[start : start + len(block)] = is_real[nearest].mean(axis=1)
        near_real[start : start + len(block)] = np.sqrt(d2[:, is_real].min(axis=1))
        near_sim[start : start + len(block)] = np.sqrt(d2[:, ~is_real].min(axis=1))
    return KnnAttribution(share, near_real, near_sim)


def bootstrap_interval(
    statistic: Callable[[FloatArray, FloatArray], float],
    real: NDArray,
    sim: NDArray,
    resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(value, low, high)``: the statistic and its percentile bootstrap interval.

    Both sets are resampled with replacement, independently.
    """
    a, b = _as_sets(real, sim)
    rng = np.random.default_rng(seed)
    value = statistic(a, b)
    draws = [
        statistic(a[rng.integers(0, len(a), len(a))], b[rng.integers(0, len(b), len(b))])
        for _ in range(resamples)
    ]
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(value), float(low), float(high)
