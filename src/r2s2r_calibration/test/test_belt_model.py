import cv2
import numpy as np
import pytest
from r2s2r_calibration.belt_model import (
    fit_belt_model,
    image_to_belt_homography,
    surface_speed_from_track,
)
from r2s2r_calibration.errors import DegenerateMotionError, ResidualTooLargeError
from r2s2r_calibration.geometry import invert_pose, look_at_pose
from r2s2r_calibration.synthetic import TEST_CAMERA_MATRIX as K
from r2s2r_calibration.synthetic import TEST_DISTORTION as DIST


def test_fit_recovers_roller_radius():
    rng = np.random.default_rng(0)
    rates = np.array([2.0, 4.0, 6.0, 8.0, 3.0, 5.0])
    speeds = 0.0251 * rates * (1 + rng.normal(0, 0.002, rates.size))
    result = fit_belt_model(rates, speeds)
    assert abs(result.roller_radius_m / 0.0251 - 1) < 0.005
    assert result.relative_residual < 0.005
    assert abs(result.surface_speed_mps(4.0) - 0.1004) < 0.001


def test_stationary_belt_is_degenerate():
    with pytest.raises(DegenerateMotionError, match="run the belt"):
        fit_belt_model([0.0, 0.01, 0.0], [0.0, 0.0, 0.0])


def test_slipping_belt_is_refused():
    rates = np.array([2.0, 4.0, 6.0, 8.0])
    with pytest.raises(ResidualTooLargeError, match="slip"):
        fit_belt_model(rates, [0.05, 0.06, 0.15, 0.2])


def test_speed_from_camera_track_through_homography():
    # Camera above the belt looking down; belt plane z = 0 in belt_link.
    T_belt_camera = look_at_pose([0.05, -0.3, 0.6], [0.0, 0.0, 0.0], [1, 0, 0])
    T_camera_belt = invert_pose(T_belt_camera)
    stamps = np.linspace(0.0, 2.0, 21)
    belt_points = np.column_stack([-0.15 + 0.12 * stamps, np.full_like(stamps, 0.02), 0 * stamps])
    rvec, _ = cv2.Rodrigues(T_camera_belt[:3, :3])
    pixels, _ = cv2.projectPoints(belt_points, rvec, T_camera_belt[:3, 3], K, DIST)
    homography = image_to_belt_homography(K, T_camera_belt)
    speed, residual_m = surface_speed_from_track(pixels.reshape(-1, 2), stamps, homography, K, DIST)
    assert abs(speed / 0.12 - 1) < 0.01
    assert residual_m < 1e-4
    with pytest.raises(DegenerateMotionError, match="track the marker longer"):
        surface_speed_from_track(pixels.reshape(-1, 2)[:2], stamps[:2], homography)
