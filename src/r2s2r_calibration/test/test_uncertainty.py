"""The 95 % interval arithmetic: normal quantiles, vector radii, jackknife, pose deviations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from r2s2r_calibration.geometry import pose_from_xyz_rpy
from r2s2r_calibration.uncertainty import (
    Z_95,
    UncertaintyConfig,
    interval_95,
    jackknife_covariance,
    pose_deviation,
    pose_intervals,
    radius_95,
)


def test_interval_of_independent_errors_adds_in_quadrature() -> None:
    assert interval_95(3.0, 4.0) == pytest.approx(5.0 * Z_95)
    assert interval_95() == 0.0


@pytest.mark.parametrize(("dimension", "quantile"), [(1, 1.95996), (2, 2.44775), (3, 2.79548)])
def test_radius_of_an_isotropic_gaussian_is_the_chi_quantile(dimension, quantile) -> None:
    assert radius_95(np.eye(dimension) * 4.0) == pytest.approx(2.0 * quantile, rel=0.02)


def test_radius_of_a_flat_gaussian_is_its_long_axis_quantile() -> None:
    assert radius_95(np.diag([1.0, 1e-12, 1e-12])) == pytest.approx(Z_95, rel=0.02)


def test_radius_covers_95_percent_of_samples() -> None:
    covariance = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, 0.2], [0.0, 0.2, 0.5]])
    samples = np.random.default_rng(5).multivariate_normal(np.zeros(3), covariance, 40000)
    inside = np.linalg.norm(samples, axis=1) <= radius_95(covariance)
    assert inside.mean() == pytest.approx(0.95, abs=0.01)


def test_jackknife_covariance_of_leave_one_out_means_is_the_mean_variance() -> None:
    values = np.random.default_rng(1).normal(size=200)
    replicates = [np.delete(values, i).mean() for i in range(values.size)]
    jackknife = jackknife_covariance(np.array(replicates))[0, 0]
    assert jackknife == pytest.approx(values.var(ddof=1) / values.size, rel=1e-9)
    assert jackknife_covariance(np.ones((1, 3))).shape == (3, 3)


def test_pose_deviation_is_in_the_reference_frame() -> None:
    reference = pose_from_xyz_rpy((1.0, 2.0, 3.0), (0.0, 0.0, math.pi / 2))
    moved = reference @ pose_from_xyz_rpy((0.01, 0.0, 0.0), (0.0, 0.0, 0.02))
    np.testing.assert_allclose(
        pose_deviation(reference, moved), [0.01, 0, 0, 0, 0, 0.02], atol=1e-12
    )


def test_pose_intervals_combine_replicates_fit_and_floors() -> None:
    estimate = pose_from_xyz_rpy((0.5, 0.0, 0.2), (0.0, 0.0, 0.0))
    only_floors = pose_intervals(estimate, [], (0, 0, 0), (0, 0, 0), 0.001, 0.002)
    assert only_floors[0] == pytest.approx(0.001 * 2.79548, rel=0.02)
    assert only_floors[1] == pytest.approx(0.002 * 2.79548, rel=0.02)
    shifted = [estimate @ pose_from_xyz_rpy((0.0, s, 0.0), (0, 0, 0)) for s in (-0.002, 0.002)]
    across = pose_intervals(estimate, shifted, (0, 0, 0), (0, 0, 0), 0.0, 0.0, (1,))
    # Two replicates +-2 mm: jackknife variance (1/2)(2 * 0.002^2) = 0.002^2.
    assert across[0] == pytest.approx(0.002 * Z_95, rel=0.02)
    along = pose_intervals(estimate, shifted, (0, 0, 0), (0, 0, 0), 0.0, 0.0, (0,))
    assert along[0] == pytest.approx(0.0, abs=1e-9)


def test_every_floor_states_its_reason() -> None:
    for name, field in UncertaintyConfig.model_fields.items():
        assert field.description and len(field.description) > 20, name
