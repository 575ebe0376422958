import cv2
import numpy as np
import pytest
from r2s2r_calibration.belt_model import (
    fit_belt_model,
    fit_belt_track,
    image_to_belt_homography,
    surface_speed_from_track,
)
from r2s2r_calibration.errors import DegenerateMotionError, ResidualTooLargeError
from r2s2r_calibration.geometry import look_at_pose
from r2s2r_calibration.synthetic import TEST_CAMERA_MATRIX as K
from r2s2r_calibration.synthetic import TEST_DISTORTION as DIST
from r2s2r_description.transforms import invert_transform as invert_pose


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


def _track(radius_m: float, speed_rad_s, noise_m: float = 0.003, seed: int = 0):
    """Object track (10 Hz) and encoder (50 Hz) of a belt driven at a varying roller rate."""
    rng = np.random.default_rng(seed)
    encoder_t = np.arange(0.0, 8.0, 0.02)
    encoder_a = np.cumsum(speed_rad_s(encoder_t)) * 0.02
    track_t = np.arange(0.5, 7.5, 0.1)
    along = radius_m * np.interp(track_t, encoder_t, encoder_a) - 0.5
    return track_t, along + rng.normal(0.0, noise_m, track_t.size), encoder_t, encoder_a


def test_track_against_roller_angle_recovers_radius_and_speed():
    track_t, along, encoder_t, encoder_a = _track(0.0306, lambda t: np.full_like(t, 3.43))
    along[10] += 0.05  # one mis-segmented frame
    fit = fit_belt_track(track_t, along, encoder_t, encoder_a)
    assert fit.model.roller_radius_m == pytest.approx(0.0306, rel=0.005)
    assert fit.speed_mps == pytest.approx(0.0306 * 3.43, rel=0.01)
    assert fit.n_used == track_t.size - 1
    assert fit.position_residual_m < 0.005


def test_track_radius_holds_when_the_belt_speed_changes():
    track_t, along, encoder_t, encoder_a = _track(0.025, lambda t: 2.0 + 2.0 * (t > 4.0))
    fit = fit_belt_track(track_t, along, encoder_t, encoder_a)
    assert fit.model.roller_radius_m == pytest.approx(0.025, rel=0.005)


def test_track_refusals():
    track_t, along, encoder_t, encoder_a = _track(0.03, lambda t: np.full_like(t, 3.0))
    slipping = along + 0.04 * np.sin(track_t)  # the surface lags and leads the roller
    with pytest.raises(ResidualTooLargeError, match="slip"):
        fit_belt_track(track_t, slipping, encoder_t, encoder_a)
    with pytest.raises(DegenerateMotionError, match="travelled"):
        fit_belt_track(track_t[:8], along[:8], encoder_t, encoder_a)
    with pytest.raises(DegenerateMotionError, match="span the track"):
        fit_belt_track(track_t, along, encoder_t[:100], encoder_a[:100])
    with pytest.raises(ValueError, match="expected equal"):
        fit_belt_track(track_t, along[:-1], encoder_t, encoder_a)


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
