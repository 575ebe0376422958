"""Belt speed: encoder regression, vision flow on synthetic sequences, Kalman fusion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from r2s2r_belt.config import EncoderConfig, FilterConfig
from r2s2r_belt.encoder_speed import EncoderSpeedEstimator
from r2s2r_belt.estimates import SpeedMeasurement
from r2s2r_belt.speed_filter import BeltSpeedFilter
from r2s2r_belt.synthetic import SpeedProfile, SyntheticBeltCamera, encoder_samples
from r2s2r_belt.vision_speed import VisionSpeedEstimator

RADIUS_M = 0.025


@pytest.fixture(scope="module")
def camera() -> SyntheticBeltCamera:
    return SyntheticBeltCamera(noise_std=2.0)


def run_encoder(
    profile: SpeedProfile, duration_s: float, **config: object
) -> list[SpeedMeasurement]:
    estimator = EncoderSpeedEstimator(EncoderConfig(roller_radius_m=RADIUS_M, **config))  # type: ignore[arg-type]
    stamps_s, angles_rad = encoder_samples(profile, duration_s, roller_radius_m=RADIUS_M)
    results = []
    for stamp_s, angle_rad in zip(stamps_s, angles_rad, strict=True):
        estimator.add_sample(float(stamp_s), float(angle_rad))
        results.append(estimator.estimate(float(stamp_s)))
    return results


@pytest.mark.parametrize("speed_mps", [0.05, 0.15, -0.3, 1.2])
def test_encoder_speed_within_one_percent(speed_mps: float) -> None:
    # At 1.2 m/s the roller turns 0.48 rad per 10 ms sample: many wraps through +-pi.
    results = run_encoder(SpeedProfile(speed_mps), 2.0)
    steady = [m for m in results[20:] if m.valid]
    assert len(steady) == len(results) - 20
    errors = np.array([m.speed_mps for m in steady]) / speed_mps - 1.0
    # Steady-state error (RMS over 1.8 s of 10 ms estimates) within 1%, no bias.
    assert float(np.sqrt(np.mean(errors**2))) < 0.01
    assert abs(float(np.mean(errors))) < 0.002
    assert np.max(np.abs(errors)) < 0.03
    assert all(0.0 < m.variance_mps2 < 1e-4 for m in steady)


def test_encoder_handles_angles_in_zero_to_two_pi() -> None:
    estimator = EncoderSpeedEstimator(EncoderConfig(roller_radius_m=RADIUS_M))
    rate_rad_s = 0.2 / RADIUS_M
    for index in range(30):
        stamp_s = index * 0.01
        estimator.add_sample(stamp_s, (rate_rad_s * stamp_s + 6.0) % (2 * math.pi))
    assert estimator.estimate(0.29).speed_mps == pytest.approx(0.2, rel=1e-9)


def test_encoder_rejects_bad_samples_and_goes_stale() -> None:
    estimator = EncoderSpeedEstimator(EncoderConfig(roller_radius_m=RADIUS_M, timeout_s=0.2))
    for index in range(10):
        estimator.add_sample(index * 0.01, index * 0.04)
    estimator.add_sample(0.05, 99.0)  # out of order
    estimator.add_sample(0.2, float("nan"))
    assert estimator.rejected_samples == 2
    assert estimator.estimate(0.1).speed_mps == pytest.approx(4.0 * RADIUS_M)
    stale = estimator.estimate(0.5)
    assert not stale.valid and "no reading" in stale.reason
    inverted = EncoderSpeedEstimator(EncoderConfig(roller_radius_m=RADIUS_M, invert=True))
    for index in range(10):
        inverted.add_sample(index * 0.01, index * 0.04)
    assert inverted.estimate(0.09).speed_mps == pytest.approx(-4.0 * RADIUS_M)


def run_vision(
    camera: SyntheticBeltCamera, profile: SpeedProfile, frames: int, rate_hz: float = 30.0
) -> list[SpeedMeasurement]:
    estimator = VisionSpeedEstimator(camera.vision_config())
    results = []
    for index in range(frames):
        stamp_s = index / rate_hz
        measurement = estimator.update(camera.render(profile.offset_m(stamp_s), index), stamp_s)
        if measurement is not None:
            results.append(measurement)
    return results


@pytest.mark.parametrize("speed_mps", [0.05, 0.2, -0.4])
def test_vision_speed_within_three_percent(camera: SyntheticBeltCamera, speed_mps: float) -> None:
    results = run_vision(camera, SpeedProfile(speed_mps), frames=8)
    assert len(results) == 7
    assert all(m.valid and m.feature_count >= 15 for m in results)
    for measurement in results:
        assert measurement.speed_mps == pytest.approx(speed_mps, rel=0.03)
    assert results[0].stamp_s == pytest.approx(0.5 / 30.0)


def test_vision_homography_is_what_makes_it_metric(camera: SyntheticBeltCamera) -> None:
    # The same pixels with a homography for a belt twice as far give twice the speed.
    doubled = np.diag([2.0, 2.0, 1.0]) @ camera.image_to_belt_homography()
    estimator = VisionSpeedEstimator(
        camera.vision_config(image_to_belt_homography=[float(v) for v in doubled.ravel()])
    )
    estimator.update(camera.render(0.0, 0), 0.0)
    measurement = estimator.update(camera.render(0.1 / 30, 1), 1 / 30)
    assert measurement is not None
    assert measurement.speed_mps == pytest.approx(0.2, rel=0.03)


def test_vision_too_few_features_is_flagged_not_wild(camera: SyntheticBeltCamera) -> None:
    estimator = VisionSpeedEstimator(camera.vision_config())
    flat = np.full((camera.height_px, camera.width_px), 128, np.uint8)
    assert estimator.update(flat, 0.0) is None
    measurement = estimator.update(flat, 1 / 30)
    assert measurement is not None
    assert not measurement.valid
    assert "too few features" in measurement.reason
    assert measurement.speed_mps == 0.0 and math.isinf(measurement.variance_mps2)
    # Unrelated frames (belt jumped): tracks disagree -> flagged, no estimate.
    estimator.reset()
    estimator.update(camera.render(0.0, 0), 0.0)
    jumped = estimator.update(camera.render(0.37, 1), 1 / 30)
    assert jumped is not None and not jumped.valid


def test_vision_rejects_image_of_wrong_size(camera: SyntheticBeltCamera) -> None:
    estimator = VisionSpeedEstimator(camera.vision_config())
    with pytest.raises(ValueError, match="homography is for 640x480"):
        estimator.update(np.zeros((240, 320), np.uint8), 0.0)


def test_filter_settles_after_a_speed_step() -> None:
    step_time_s, duration_s = 1.0, 2.0
    profile = SpeedProfile(0.1, 0.2, step_time_s)
    encoder = EncoderSpeedEstimator(EncoderConfig(roller_radius_m=RADIUS_M))
    fusion = BeltSpeedFilter(FilterConfig())
    stamps_s, angles_rad = encoder_samples(profile, duration_s, roller_radius_m=RADIUS_M)
    outputs = []
    for stamp_s, angle_rad in zip(stamps_s, angles_rad, strict=True):
        encoder.add_sample(float(stamp_s), float(angle_rad))
        fusion.update(encoder.estimate(float(stamp_s)))
        outputs.append(fusion.estimate(float(stamp_s)))
    band_mps = 0.02 * 0.2
    outside = [
        o.stamp_s for o in outputs if abs(o.speed_mps - profile.speed_mps(o.stamp_s)) > band_mps
    ]
    settling_s = max(outside) - step_time_s
    assert 0.0 < settling_s <= 0.5
    before = [o for o in outputs if 0.5 < o.stamp_s < step_time_s]
    assert all(abs(o.speed_mps - 0.1) < 0.001 and o.valid for o in before)
    assert outputs[-1].sources == ("encoder",)


def test_filter_fuses_and_falls_back_to_one_source() -> None:
    fusion = BeltSpeedFilter(FilterConfig(source_timeout_s=0.3))
    for index in range(20):
        stamp_s = index * 0.02
        fusion.update(SpeedMeasurement("encoder", stamp_s, 0.2, 1e-6))
        fusion.update(SpeedMeasurement("vision", stamp_s, 0.2, 4e-6))
    both = fusion.estimate(0.4)
    assert both.sources == ("encoder", "vision") and both.valid
    assert both.speed_mps == pytest.approx(0.2)
    # Encoder fails: vision alone keeps the estimate going (and tracks a change).
    for index in range(40):
        stamp_s = 0.4 + index * 0.033
        fusion.update(SpeedMeasurement("vision", stamp_s, 0.25, 4e-6))
        fusion.update(SpeedMeasurement("encoder", stamp_s, 0.0, math.inf, False, "stale"))
    alone = fusion.estimate(1.7)
    assert alone.sources == ("vision",)
    assert alone.valid and alone.speed_mps == pytest.approx(0.25, abs=1e-3)
    # Both gone: still an output, no source, variance grows until it is flagged.
    lost = fusion.estimate(10.0)
    assert lost.sources == () and not lost.valid
    assert lost.speed_mps == pytest.approx(alone.speed_mps)
    assert lost.variance_mps2 > alone.variance_mps2


def test_fused_encoder_and_vision_on_synthetic_sequence(camera: SyntheticBeltCamera) -> None:
    profile = SpeedProfile(0.15)
    vision = run_vision(camera, profile, frames=10)
    encoder = run_encoder(profile, 10 / 30)
    fusion = BeltSpeedFilter(FilterConfig())
    for measurement in sorted(vision + encoder, key=lambda m: m.stamp_s):
        fusion.update(measurement)
    fused = fusion.estimate(10 / 30)
    assert fused.sources == ("encoder", "vision")
    assert fused.speed_mps == pytest.approx(0.15, rel=0.01)
    assert fusion.updates["vision"] == 9


def test_shipped_parameter_file_matches_the_schema() -> None:
    from pathlib import Path

    from r2s2r_belt.config import BeltSpeedConfig
    from r2s2r_common.config import load_config

    root = Path(__file__).resolve().parents[3]
    config = load_config(BeltSpeedConfig, root / "config/nodes/belt_speed.yaml", "belt_speed")
    assert config.encoder.roller_radius_m == pytest.approx(0.03)
    # Vision geometry comes from camera_info + /tf_static, not from a fixed homography.
    assert config.vision.enabled and config.vision.geometry_from_tf
    assert not config.vision.image_to_belt_homography
