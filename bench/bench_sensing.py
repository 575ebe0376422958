"""Sensing benchmark: belt-speed accuracy, settling, CPU per estimate; camera replay throughput.

Run: ``python bench/bench_sensing.py`` (add ``--quick`` for a shorter run).

The belt data come from a :class:`SensingSource`; :class:`SyntheticSource` renders a textured belt
and a quantised encoder with known truth. A twin-backed source (the real twin publishing
``/belt/encoder`` and ``/head_camera/image_raw`` with its hidden belt speed as truth) can
implement the same two methods and be selected here without touching the measurements.

Last line: ``{"benchmark": "sensing", "figures": [...]}``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import benchlib
import cv2
import numpy as np
from r2s2r_belt.config import EncoderConfig, FilterConfig, VisionConfig
from r2s2r_belt.encoder_speed import EncoderSpeedEstimator
from r2s2r_belt.speed_filter import BeltSpeedFilter
from r2s2r_belt.synthetic import SpeedProfile, SyntheticBeltCamera, encoder_samples
from r2s2r_belt.vision_speed import VisionSpeedEstimator

ROLLER_RADIUS_M = 0.03


@dataclass(frozen=True)
class Reading:
    """One sensor event in time order: an encoder angle or a grey image."""

    stamp_s: float
    angle_rad: float | None = None
    image: np.ndarray | None = None


class SensingSource(Protocol):
    """Where the belt data come from (synthetic now, the real twin later)."""

    def vision_config(self) -> VisionConfig:
        """Homography, ROI and image size for the vision estimator."""
        ...

    def readings(self, profile: SpeedProfile, duration_s: float) -> Iterator[Reading]:
        """Encoder and camera events in time order for a belt speed profile."""
        ...


class SyntheticSource:
    """Rendered belt (640x480 at 30 Hz) and a 4096-count encoder at 100 Hz."""

    def __init__(self, camera_rate_hz: float = 30.0) -> None:
        self.camera = SyntheticBeltCamera(noise_std=2.0)
        self.camera_rate_hz = camera_rate_hz

    def vision_config(self) -> VisionConfig:
        return self.camera.vision_config()

    def readings(self, profile: SpeedProfile, duration_s: float) -> Iterator[Reading]:
        stamps_s, angles_rad = encoder_samples(profile, duration_s, roller_radius_m=ROLLER_RADIUS_M)
        events = [
            (float(t), "encoder", float(a)) for t, a in zip(stamps_s, angles_rad, strict=True)
        ]
        frames = np.arange(0.0, duration_s, 1.0 / self.camera_rate_hz)
        events += [(float(t), "camera", float(i)) for i, t in enumerate(frames)]
        for stamp_s, kind, value in sorted(events, key=lambda e: (e[0], e[1])):
            if kind == "encoder":
                yield Reading(stamp_s, angle_rad=value)
            else:
                image = self.camera.render(profile.offset_m(stamp_s), int(value))
                yield Reading(stamp_s, image=image)


@dataclass
class RunResult:
    truth: list[float]
    encoder: list[tuple[float, float]]
    vision: list[tuple[float, float]]
    fused: list[tuple[float, float]]
    encoder_cpu_s: list[float]
    vision_cpu_s: list[float]
    filter_cpu_s: list[float]


def run(source: SensingSource, profile: SpeedProfile, duration_s: float) -> RunResult:
    encoder = EncoderSpeedEstimator(EncoderConfig(roller_radius_m=ROLLER_RADIUS_M))
    vision = VisionSpeedEstimator(source.vision_config())
    fusion = BeltSpeedFilter(FilterConfig())
    result = RunResult([], [], [], [], [], [], [])
    for reading in source.readings(profile, duration_s):
        start = time.process_time()
        if reading.angle_rad is not None:
            encoder.add_sample(reading.stamp_s, reading.angle_rad)
            measurement = encoder.estimate(reading.stamp_s)
            result.encoder_cpu_s.append(time.process_time() - start)
            if measurement.valid:
                result.encoder.append((measurement.stamp_s, measurement.speed_mps))
        else:
            assert reading.image is not None
            measurement_or_none = vision.update(reading.image, reading.stamp_s)
            result.vision_cpu_s.append(time.process_time() - start)
            if measurement_or_none is None:
                continue
            measurement = measurement_or_none
            if measurement.valid:
                result.vision.append((measurement.stamp_s, measurement.speed_mps))
        start = time.process_time()
        fusion.update(measurement)
        fused = fusion.estimate(reading.stamp_s)
        result.filter_cpu_s.append(time.process_time() - start)
        result.fused.append((reading.stamp_s, fused.speed_mps))
    return result


def steady_error(series: list[tuple[float, float]], speed_mps: float, after_s: float) -> float:
    """RMS relative error of estimates stamped after ``after_s``."""
    values = np.array([v for t, v in series if t >= after_s])
    return float(np.sqrt(np.mean((values / speed_mps - 1.0) ** 2)))


def settling_time(
    series: list[tuple[float, float]], profile: SpeedProfile, band_fraction: float = 0.02
) -> float:
    """Time after the step until the estimate stays within the band of the new speed."""
    assert profile.final_speed_mps is not None
    band = band_fraction * abs(profile.final_speed_mps)
    outside = [
        t for t, v in series if abs(v - profile.speed_mps(t)) > band and t >= profile.step_time_s
    ]
    return (max(outside) - profile.step_time_s) if outside else 0.0


def replay_throughput(duration_s: float) -> tuple[float, int, int]:
    """Publish a 640x480 30 Hz replay through camera_driver; returns (rate_hz, received, drops)."""
    import rclpy
    from r2s2r_cameras.nodes.camera_driver import CameraDriverNode
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    with tempfile.TemporaryDirectory() as folder:
        video = Path(folder) / "replay.avi"
        camera = SyntheticBeltCamera(noise_std=2.0)
        writer = cv2.VideoWriter(str(video), cv2.VideoWriter.fourcc(*"MJPG"), 30.0, (640, 480))
        for index in range(60):
            writer.write(cv2.cvtColor(camera.render(0.004 * index, index), cv2.COLOR_GRAY2BGR))
        writer.release()
        context = Context()
        rclpy.init(context=context)
        try:
            driver = CameraDriverNode(
                context=context,
                parameter_overrides=[
                    Parameter("camera_name", value="head_camera"),
                    Parameter("backend", value="replay"),
                    Parameter("replay.path", value=str(video)),
                    Parameter("replay.rate_hz", value=30.0),
                ],
            )
            listener = rclpy.create_node("bench_listener", context=context)
            stamps: list[float] = []
            listener.create_subscription(
                Image,
                "head_camera/image_raw",
                lambda m: stamps.append(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9),
                qos_profile_sensor_data,
            )
            executor = MultiThreadedExecutor(num_threads=2, context=context)
            executor.add_node(driver)
            executor.add_node(listener)
            driver.trigger_configure()
            time.sleep(0.5)  # discovery
            driver.trigger_activate()
            end = time.monotonic() + duration_s
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.05)
            driver.trigger_deactivate()
            published = driver.stats.frames
            driver_drops = driver.stats.dropped
            executor.shutdown()
            listener.destroy_node()
            driver.destroy_node()
        finally:
            rclpy.shutdown(context=context)
    received = len(stamps)
    rate_hz = (received - 1) / (stamps[-1] - stamps[0]) if received > 1 else 0.0
    return rate_hz, received, driver_drops + max(published - received, 0)


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter sequences")
    args = parser.parse_args()
    duration_s = 1.0 if args.quick else 2.0
    source: SensingSource = SyntheticSource()
    figures: list[benchlib.Figure] = []
    cpu_encoder: list[float] = []
    cpu_vision: list[float] = []
    cpu_filter: list[float] = []

    def add(name: str, value: float, unit: str, goal: str) -> None:
        figures.append(benchlib.Figure(name, round(value, 6), unit, goal))

    for speed_mps in (0.07, 0.10, 0.15):
        result = run(source, SpeedProfile(speed_mps), duration_s)
        add(
            f"encoder_error_{speed_mps:.2f}mps",
            100 * steady_error(result.encoder, speed_mps, 0.2),
            "%",
            "<= 1",
        )
        add(
            f"vision_error_{speed_mps:.2f}mps",
            100 * steady_error(result.vision, speed_mps, 0.0),
            "%",
            "<= 3",
        )
        add(
            f"fused_error_{speed_mps:.2f}mps",
            100 * steady_error(result.fused, speed_mps, 0.3),
            "%",
            "<= 1",
        )
        cpu_encoder += result.encoder_cpu_s
        cpu_vision += result.vision_cpu_s
        cpu_filter += result.filter_cpu_s

    step = SpeedProfile(0.10, 0.15, step_time_s=duration_s / 2)
    result = run(source, step, duration_s)
    add("fused_settling_after_step", settling_time(result.fused, step), "s", "<= 0.5")
    add("vision_settling_after_step", settling_time(result.vision, step, 0.03), "s", "<= 0.5")

    add("cpu_per_encoder_estimate", 1e3 * float(np.mean(cpu_encoder)), "ms", "< 1")
    add("cpu_per_vision_estimate_640x480", 1e3 * float(np.mean(cpu_vision)), "ms", "< 33 (30 Hz)")
    add("cpu_per_filter_update", 1e3 * float(np.mean(cpu_filter)), "ms", "< 1")

    rate_hz, received, drops = replay_throughput(2.0 if args.quick else 4.0)
    add("replay_rate_640x480", rate_hz, "Hz", ">= 29.5 (30 Hz replay)")
    add("replay_frames_received", float(received), "frames", "")
    add("replay_drops", float(drops), "frames", "0")

    benchlib.report("sensing", figures)


if __name__ == "__main__":
    main()
