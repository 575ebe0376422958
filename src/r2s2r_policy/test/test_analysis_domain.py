"""Real vs sim latent measures with known answers: separated clusters, one mixed cluster.

Two clusters far apart: every query's nearest neighbours are of its own domain (real share
1 or 0), both probes separate the domains (~100 %), the distances are large. One cluster
sampled twice: real share ~0.5, probes at chance, distances near 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from r2s2r_policy.analysis.domain import (
    bootstrap_interval,
    fit_probe,
    knn_real_share,
    mmd_rbf,
    sliced_wasserstein,
)

RNG = np.random.default_rng(7)
REAL = RNG.normal(0.0, 1.0, size=(200, 8))
SIM_FAR = RNG.normal(0.0, 1.0, size=(240, 8)) + np.r_[12.0, np.zeros(7)]
SIM_MIXED = RNG.normal(0.0, 1.0, size=(240, 8))


def test_separated_clusters_are_told_apart() -> None:
    queries = np.vstack([REAL[:20] + 0.01, SIM_FAR[:20] + 0.01])
    attribution = knn_real_share(REAL, SIM_FAR, queries, k=10)
    np.testing.assert_array_equal(attribution.real_share, np.r_[np.ones(20), np.zeros(20)])
    assert np.all(attribution.nearest_real_distance[:20] < attribution.nearest_sim_distance[:20])
    assert fit_probe(REAL, SIM_FAR, "linear").accuracy > 0.97
    assert fit_probe(REAL, SIM_FAR, "mlp").accuracy > 0.97
    # Projections of a 12-unit shift along one axis of 8: mean |cos| ~0.27 -> ~3.3.
    assert sliced_wasserstein(REAL, SIM_FAR) > 2.0
    assert mmd_rbf(REAL, SIM_FAR) > 0.3


def test_one_mixed_cluster_is_not() -> None:
    attribution = knn_real_share(REAL, SIM_MIXED, RNG.normal(size=(300, 8)), k=10)
    # 200 real of 440 training vectors: the expected share is 0.45.
    assert attribution.real_share.mean() == pytest.approx(200 / 440, abs=0.05)
    assert fit_probe(REAL, SIM_MIXED, "linear").accuracy == pytest.approx(0.5, abs=0.12)
    assert fit_probe(REAL, SIM_MIXED, "mlp").accuracy == pytest.approx(0.5, abs=0.15)
    assert sliced_wasserstein(REAL, SIM_MIXED) < 0.15
    assert abs(mmd_rbf(REAL, SIM_MIXED)) < 0.02


def test_bootstrap_interval_brackets_the_value() -> None:
    value, low, high = bootstrap_interval(sliced_wasserstein, REAL, SIM_FAR, resamples=50)
    assert low <= value <= high and high - low < 0.5
    _, low, high = bootstrap_interval(sliced_wasserstein, REAL, SIM_MIXED, resamples=50)
    assert low < 0.3


def test_bad_input_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"expected \(N, D\) and \(M, D\)"):
        sliced_wasserstein(REAL, SIM_FAR[:, :3])
    with pytest.raises(ValueError, match="empty set: 0 real"):
        mmd_rbf(REAL[:0], SIM_FAR)
    with pytest.raises(ValueError, match="non-finite"):
        fit_probe(np.full((10, 8), np.nan), SIM_FAR)
    with pytest.raises(ValueError, match="at least 4 vectors per class"):
        fit_probe(REAL[:3], SIM_FAR)
    with pytest.raises(ValueError, match="k = 500"):
        knn_real_share(REAL, SIM_FAR, REAL[:2], k=500)
    with pytest.raises(ValueError, match="expected 'linear' or 'mlp'"):
        fit_probe(REAL, SIM_FAR, "svm")  # type: ignore[arg-type]
