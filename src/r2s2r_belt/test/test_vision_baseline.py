"""Vision belt speed: long frame baseline, undistortion, parallax correction, late readings."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pydantic import ValidationError
from r2s2r_belt.config import FilterConfig
from r2s2r_belt.estimates import SpeedMeasurement
from r2s2r_belt.speed_filter import BeltSpeedFilter
from r2s2r_belt.synthetic import SyntheticBeltCamera, look_at_rotation
from r2s2r_belt.vision_speed import VisionSpeedEstimator, camera_height_above_plane_m
from r2s2r_common.config import ConfigError

RATE_HZ = 30.0


@pytest.fixture(scope="module")
def camera() -> SyntheticBeltCamera:
    return SyntheticBeltCamera(noise_std=2.0)


def extrinsics(camera: SyntheticBeltCamera) -> tuple[np.ndarray, np.ndarray]:
    """(R, t): belt frame -> camera optical frame of the synthetic camera."""
    position = np.asarray(camera.camera_position_m, dtype=float)
    rotation = look_at_rotation(position, np.zeros(3)).T
    return rotation, -rotation @ position


def homography_below(camera: SyntheticBeltCamera, depth_m: float) -> np.ndarray:
    """Image -> plane homography of the plane ``depth_m`` below the textured belt surface."""
    rotation, translation = extrinsics(camera)
    columns = np.column_stack(
        [rotation[:, 0], rotation[:, 1], translation - depth_m * rotation[:, 2]]
    )
    homography = np.linalg.inv(camera.camera_matrix @ columns)
    return homography / homography[2, 2]


def run(
    estimator: VisionSpeedEstimator, camera: SyntheticBeltCamera, speed_mps: float, frames: int
) -> list[SpeedMeasurement]:
    results = []
    for index in range(frames):
        stamp_s = index / RATE_HZ
        reading = estimator.update(camera.render(speed_mps * stamp_s, index), stamp_s)
        if reading is not None:
            results.append(reading)
    return results


def test_slow_belt_is_measured_over_a_longer_baseline(camera: SyntheticBeltCamera) -> None:
    # 0.02 m/s is ~0.5 px per frame here: the estimator must reach back ~8 frames for 4 px.
    speed_mps = 0.02
    results = run(VisionSpeedEstimator(camera.vision_config()), camera, speed_mps, frames=24)
    assert all(m.valid for m in results)
    steady = results[3:]
    for measurement in steady:
        assert measurement.speed_mps == pytest.approx(speed_mps, rel=0.02)
    # Stamped midway between the reference and the current frame, which is >= 4 px back.
    last = results[-1]
    baseline_s = 2.0 * ((len(results)) / RATE_HZ - last.stamp_s)
    assert baseline_s > 5.0 / RATE_HZ
    assert baseline_s <= 0.5 + 1e-9
    # A fast belt keeps a short baseline: its last reading is stamped within 2 frames.
    fast = run(VisionSpeedEstimator(camera.vision_config()), camera, 0.3, frames=8)
    assert all(m.valid for m in fast)
    assert 7 / RATE_HZ - fast[-1].stamp_s <= 1.0 / RATE_HZ + 1e-9
    assert fast[-1].speed_mps == pytest.approx(0.3, rel=0.03)


def test_baseline_is_bounded_and_history_resets(camera: SyntheticBeltCamera) -> None:
    estimator = VisionSpeedEstimator(camera.vision_config(max_baseline_s=0.1))
    results = run(estimator, camera, 0.01, frames=12)
    last = results[-1]
    assert 2.0 * (11 / RATE_HZ - last.stamp_s) <= 0.1 + 1e-9
    # An out-of-order frame restarts the history: no reading until a second frame arrives.
    assert estimator.update(camera.render(0.0, 0), 0.0) is None


def test_camera_height_from_homography_and_k(camera: SyntheticBeltCamera) -> None:
    height_m = camera.camera_position_m[2]
    homography = camera.image_to_belt_homography()
    assert camera_height_above_plane_m(homography, camera.camera_matrix) == pytest.approx(height_m)
    below = homography_below(camera, 0.05)
    assert camera_height_above_plane_m(below, camera.camera_matrix) == pytest.approx(
        height_m + 0.05
    )
    wrong_k = camera.camera_matrix @ np.diag([1.3, 1.0, 1.0])
    with pytest.raises(ValueError, match="use the K the homography was computed with"):
        camera_height_above_plane_m(homography, wrong_k)


def test_tracked_height_corrects_parallax(camera: SyntheticBeltCamera) -> None:
    # The texture lies 5 cm above the plane of the homography (like features on items).
    depth_m = 0.05
    settings = {
        "image_to_belt_homography": [float(v) for v in homography_below(camera, depth_m).ravel()],
        "camera_matrix": [float(v) for v in camera.camera_matrix.ravel()],
    }
    speed_mps = 0.1
    plain = run(VisionSpeedEstimator(camera.vision_config(**settings)), camera, speed_mps, 6)
    corrected = run(
        VisionSpeedEstimator(camera.vision_config(tracked_height_m=depth_m, **settings)),
        camera,
        speed_mps,
        6,
    )
    expected_bias = (camera.camera_position_m[2] + depth_m) / camera.camera_position_m[2]
    assert np.mean([m.speed_mps for m in plain]) == pytest.approx(
        speed_mps * expected_bias, rel=0.01
    )
    for measurement in corrected:
        assert measurement.valid
        assert measurement.speed_mps == pytest.approx(speed_mps, rel=0.01)


def test_distorted_points_are_undistorted_before_the_homography(
    camera: SyntheticBeltCamera,
) -> None:
    distortion = [-0.4, 0.1, 0.001, -0.001, 0.0]
    k = camera.camera_matrix
    belt_m = np.array([[x, y, 0.0] for x in (-0.2, 0.0, 0.2) for y in (-0.1, 0.05, 0.1)])
    rotation, translation = extrinsics(camera)
    pixels, _ = cv2.projectPoints(
        belt_m, cv2.Rodrigues(rotation)[0], translation, k, np.asarray(distortion)
    )
    pixels = pixels.reshape(-1, 2)
    undistorting = VisionSpeedEstimator(
        camera.vision_config(camera_matrix=[float(v) for v in k.ravel()], distortion=distortion)
    )
    assert undistorting.image_to_belt(pixels) == pytest.approx(belt_m[:, :2], abs=2e-4)
    ignoring = VisionSpeedEstimator(camera.vision_config())
    assert (
        np.max(np.abs(ignoring.image_to_belt(pixels) - belt_m[:, :2])) > 2e-3
    )  # 10x the tolerance


def test_intrinsics_settings_are_checked(camera: SyntheticBeltCamera) -> None:
    with pytest.raises((ConfigError, ValidationError), match=r"need vision\.camera_matrix"):
        camera.vision_config(distortion=[0.1, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises((ConfigError, ValidationError), match=r"need vision\.camera_matrix"):
        camera.vision_config(tracked_height_m=0.03)
    with pytest.raises((ConfigError, ValidationError), match="9 values"):
        camera.vision_config(camera_matrix=[1.0, 2.0])
    with pytest.raises(ValueError, match="tracked_height_m"):
        VisionSpeedEstimator(
            camera.vision_config(
                camera_matrix=[float(v) for v in camera.camera_matrix.ravel()],
                tracked_height_m=0.6,
            )
        )


def test_filter_discounts_late_readings() -> None:
    def gain_for(stamp_s: float) -> float:
        fusion = BeltSpeedFilter(FilterConfig(initial_variance_mps2=1e-4))
        fusion.update(SpeedMeasurement("encoder", 1.0, 0.0, 1e-4))  # variance -> 0.5e-4
        fusion.update(SpeedMeasurement("vision", stamp_s, 0.3, 1e-4))
        return fusion.estimate(1.0).speed_mps / 0.3

    fresh, late = gain_for(1.0), gain_for(0.75)
    assert fresh == pytest.approx(1.0 / 3.0, rel=1e-6)
    # 0.25 s old: variance grows by 0.02^2 * 0.25 = 1e-4 -> gain 0.5e-4 / (0.5e-4 + 2e-4).
    assert late == pytest.approx(0.2, rel=1e-6)
