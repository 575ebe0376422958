"""Belt-speed estimator on the real twin: steady-state error at three speeds, step settling, CPU.

The twin (``config/twin/default.yaml``, the stand-in for the hardware) is stepped directly through
:class:`r2s2r_sim.mujoco_backend.MujocoBackend` (no ROS). It produces what the hardware would:
roller angles at 100 Hz from the belt travel and the twin's TRUE roller radius, and head-camera
images at the camera's rate. The estimators of ``r2s2r_belt`` are configured as the pipeline is
before grounding: the NOMINAL roller radius (``config/world/nominal.yaml``) and an image -> belt
homography from the NOMINAL head intrinsics and camera/belt poses. The printed errors therefore
include the twin's hidden differences (roller radius +2 %, focal length, distortion, camera and
belt pose offsets).

The belt surface of the simulator does not scroll visually (MuJoCo moves contacts through
``surfacevel``), so, as on a belt with items, the optical flow comes from objects carried by the
belt: a row of them is put on the upstream part of the belt for each measurement segment.
The vision estimator is also given the head K and distortion of the same knowledge (to undistort
tracks) and a tracked height of half the catalogue's mean item height (parallax correction:
item features lie above the belt surface); only the nominal/grounded world is used for that.

Settling time: after a step of the twin's belt speed, the time until the fused estimate stays
within 5 % of the step size of its own final value (its steady-state bias is reported separately).

Grounded knowledge: ``--artifact PATH`` runs the same measurements a second time with the
pipeline's knowledge grounded by a grounding artifact (nominal world + its ``world_overrides``:
roller radius, head intrinsics, camera and belt poses), and prints both side by side.
``--oracle`` does the same with an "oracle artifact" built here from the twin's truth (the upper
bound of grounding; only a benchmark may read the truth).

Run: source scripts/env.sh && MUJOCO_GL=egl python bench/bench_belt_twin.py \
    [--artifact A] [--oracle]
The last line is one JSON object: {"benchmark": "belt_twin", "figures": [...]} (nominal figures
keep their names; grounded ones end in ``_grounded``/``_oracle``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import benchlib
import numpy as np
from r2s2r_belt.config import EncoderConfig, FilterConfig, VisionConfig
from r2s2r_belt.encoder_speed import EncoderSpeedEstimator
from r2s2r_belt.estimates import SpeedMeasurement
from r2s2r_belt.speed_filter import BeltSpeedFilter
from r2s2r_belt.vision_speed import VisionSpeedEstimator, apply_homography, to_gray
from r2s2r_calibration.belt_model import image_to_belt_homography
from r2s2r_description.robot import OPTICAL_FROM_LINK
from r2s2r_sim.backend import ObjectInstance, belt_encoder_angle_rad
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.grounding import load_world_overrides
from r2s2r_world.world import WorldParams, apply_grounding, load_world

REPO = Path(__file__).resolve().parents[1]
TWIN_PATH = REPO / "config" / "twin" / "default.yaml"
NOMINAL_PATH = REPO / "config" / "world" / "nominal.yaml"

ENCODER_RATE_HZ = 100.0
SPEEDS_MPS = (0.05, 0.10, 0.15)
STEP_FROM_MPS, STEP_TO_MPS = 0.08, 0.14
SETTLE_S = 1.5  # after a speed change, before steady-state averaging starts
MEASURE_S = 2.0
STEP_HOLD_S = 1.5  # before and after the step
SETTLING_BAND = 0.05  # fraction of the step size
OBJECT_TYPES = ("cube", "block", "cylinder", "sphere")
N_OBJECTS = 18
LANES_M = (-0.09, 0.0, 0.09)
MIN_FEATURE_DISTANCE_PX = 3.0  # objects are ~4 px blobs in the 128 px head image
# A row of items in the 128 px image gives only ~20 corners: fewer agreeing tracks than this
# flag the reading (the default 15 is for a textured belt in a larger image).
MIN_FEATURES = 10
BELT_HALF_LENGTH_M = 0.8
BELT_HALF_WIDTH_M = 0.15

GOALS = {"encoder": 1.0, "vision": 3.0, "fused": 1.0}


def oracle_overrides(twin: WorldParams) -> dict[str, Any]:
    """``world_overrides`` of an ORACLE artifact: what perfect grounding would recover (truth).

    Only for the benchmark's upper bound; the pipeline never sees the twin's world.
    """
    head = twin.cameras.head
    return {
        "cameras": {
            "head": {
                **{k: getattr(head, k) for k in ("width_px", "height_px", "fx_px", "fy_px")},
                "cx_px": head.cx_px,
                "cy_px": head.cy_px,
                "distortion": head.distortion.model_dump(),
                "pose": head.pose.model_dump(),
            }
        },
        "belt": {"pose": twin.belt.pose.model_dump(), "roller_radius_m": twin.belt.roller_radius_m},
    }


def nominal_vision_config(nominal: WorldParams) -> VisionConfig:
    """Vision settings from the pipeline's head camera and belt pose (nominal or grounded).

    The ROI is the nominal image of the belt's top surface, clipped to the image.
    """
    head = nominal.cameras.head
    k = np.array([[head.fx_px, 0.0, head.cx_px], [0.0, head.fy_px, head.cy_px], [0.0, 0.0, 1.0]])
    world_from_optical = head.pose.to_pose().matrix() @ OPTICAL_FROM_LINK.matrix()
    world_from_belt = nominal.belt.pose.to_pose().matrix()
    camera_from_belt = np.linalg.inv(world_from_optical) @ world_from_belt
    homography = image_to_belt_homography(k, camera_from_belt)
    corners_m = np.array(
        [[sx * BELT_HALF_LENGTH_M, sy * BELT_HALF_WIDTH_M] for sx in (-1, 1) for sy in (-1, 1)]
    )
    corners_px = apply_homography(np.linalg.inv(homography), corners_m)
    x_min, y_min = np.clip(np.floor(corners_px.min(axis=0)), 0, None).astype(int)
    x_max = int(min(np.ceil(corners_px[:, 0].max()), head.width_px))
    y_max = int(min(np.ceil(corners_px[:, 1].max()), head.height_px))
    # The flow comes from the items on the belt: their features lie, on average, at about half
    # the items' height (the catalogue the pipeline knows), not on the belt surface.
    heights_m = [nominal.objects[name].size_m[-1] for name in OBJECT_TYPES]
    return VisionConfig(
        image_to_belt_homography=[float(v) for v in homography.ravel()],
        image_width_px=head.width_px,
        image_height_px=head.height_px,
        roi_px=[int(x_min), int(y_min), x_max, y_max],
        min_feature_distance_px=MIN_FEATURE_DISTANCE_PX,
        min_features=MIN_FEATURES,
        camera_matrix=[float(v) for v in k.ravel()],
        distortion=[float(v) for v in head.distortion.as_array()],
        tracked_height_m=0.5 * float(np.mean(heights_m)),
    )


@dataclass
class Cpu:
    """Process CPU seconds and call counts per estimator stage."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, stage: str, seconds: float) -> None:
        """Account ``seconds`` to one call of ``stage``."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        self.calls[stage] = self.calls.get(stage, 0) + 1

    def ms_per_call(self, stage: str) -> float:
        """Mean CPU milliseconds per call of ``stage``."""
        return 1000.0 * self.seconds[stage] / max(self.calls[stage], 1)


@dataclass
class Sample:
    """Latest readings at one encoder instant."""

    time_s: float
    true_mps: float
    encoder_mps: float
    vision_mps: float  # latest valid vision reading (nan if none yet)
    fused_mps: float


class BeltBench:
    """The twin plus the estimators, stepped in encoder periods."""

    def __init__(self, twin: WorldParams, nominal: WorldParams) -> None:
        self.twin = twin
        self.backend = MujocoBackend()
        self.objects = [
            ObjectInstance(f"object_{i}", OBJECT_TYPES[i % len(OBJECT_TYPES)])
            for i in range(N_OBJECTS)
        ]
        self.backend.reset(twin, seed=0, objects=self.objects)
        self.encoder = EncoderSpeedEstimator(
            EncoderConfig(roller_radius_m=nominal.belt.roller_radius_m)
        )
        self.vision = VisionSpeedEstimator(nominal_vision_config(nominal))
        self.filter = BeltSpeedFilter(FilterConfig())
        self.cpu = Cpu()
        self.steps_per_encoder = round(1.0 / ENCODER_RATE_HZ / twin.physics.timestep_s)
        self.frame_period_s = 1.0 / twin.cameras.head.rate_hz
        self._next_frame_s = 0.0
        self._last_vision = float("nan")
        self.vision_invalid: dict[str, int] = {}

    def place_objects(self) -> None:
        """Put the objects in staggered rows on the upstream half of the (true) belt."""
        world_from_belt = self.twin.belt.pose.to_pose().matrix()
        for i, instance in enumerate(self.objects):
            size_m = self.twin.objects[instance.type_name].size_m
            x_m = -0.7 + 0.1 * (i // len(LANES_M)) + 0.03 * (i % len(LANES_M))
            y_m = LANES_M[i % len(LANES_M)]
            height_m = size_m[2] / 2.0 if len(size_m) > 2 else size_m[0] / 2.0
            position = world_from_belt @ np.array([x_m, y_m, height_m + 0.002, 1.0])
            self.backend.spawn_object(instance.name, tuple(position[:3]))
        self.vision.reset()  # the scene jumped; do not track across it

    def _feed(self, measurement: SpeedMeasurement) -> None:
        started = time.process_time()
        self.filter.update(measurement)
        self.cpu.add("filter", time.process_time() - started)

    def run(self, duration_s: float) -> list[Sample]:
        """Step the twin for ``duration_s``; return one sample per encoder reading."""
        samples = []
        for _ in range(round(duration_s * ENCODER_RATE_HZ)):
            self.backend.step(self.steps_per_encoder)
            now = self.backend.time_s
            angle = belt_encoder_angle_rad(
                self.backend.belt_travel_m, self.twin.belt.roller_radius_m
            )
            started = time.process_time()
            self.encoder.add_sample(now, angle)
            reading = self.encoder.estimate(now)
            self.cpu.add("encoder", time.process_time() - started)
            self._feed(reading)
            if now + 1e-9 >= self._next_frame_s:
                self._next_frame_s += self.frame_period_s
                rgb = self.backend.render("head_camera")
                started = time.process_time()
                frame_reading = self.vision.update(to_gray(rgb, "rgb8"), now)
                self.cpu.add("vision", time.process_time() - started)
                if frame_reading is not None:
                    if frame_reading.valid:
                        self._last_vision = frame_reading.speed_mps
                    else:
                        reason = frame_reading.reason.split(":")[0]
                        self.vision_invalid[reason] = self.vision_invalid.get(reason, 0) + 1
                    self._feed(frame_reading)
            fused = self.filter.estimate(now)
            samples.append(
                Sample(
                    now,
                    self.backend.belt_speed_mps,
                    reading.speed_mps if reading.valid else float("nan"),
                    self._last_vision,
                    fused.speed_mps,
                )
            )
        return samples

    def set_speed(self, speed_mps: float) -> None:
        """Change the twin's belt speed (the truth)."""
        self.backend.set_belt_speed(speed_mps)


def vision_mean(bench: BeltBench, samples: list[Sample]) -> float:
    """Mean of the distinct valid vision readings within ``samples``."""
    values = np.array([s.vision_mps for s in samples])
    changed = np.concatenate([[True], np.diff(values) != 0.0]) & np.isfinite(values)
    return float(np.mean(values[changed])) if changed.any() else float("nan")


def settling_time_s(samples: list[Sample], step_time_s: float, step_size_mps: float) -> float:
    """Time after the step until the fused speed stays within the band of its final value."""
    times = np.array([s.time_s for s in samples])
    fused = np.array([s.fused_mps for s in samples])
    final = float(np.mean(fused[times >= times[-1] - 0.5]))
    outside = np.abs(fused - final) > SETTLING_BAND * abs(step_size_mps)
    after = times >= step_time_s
    last_outside = times[after & outside]
    return float(last_outside[-1] - step_time_s) if last_outside.size else 0.0


def percent(value: float, truth: float) -> float:
    """Relative error in percent."""
    return 100.0 * (value - truth) / truth


def measure(twin: WorldParams, knowledge: WorldParams, label: str) -> dict[str, Any]:
    """Steady-state rows, step settling and CPU of the estimators configured from ``knowledge``."""
    bench = BeltBench(twin, knowledge)
    print(
        f"[{label}] twin: roller radius {twin.belt.roller_radius_m} m; pipeline "
        f"{knowledge.belt.roller_radius_m:.6g} m; vision ROI {bench.vision.config.roi_px} px"
    )
    rows = []
    for speed in SPEEDS_MPS:
        bench.set_speed(speed)
        bench.place_objects()
        bench.run(SETTLE_S)
        samples = bench.run(MEASURE_S)
        encoder = float(np.nanmean([s.encoder_mps for s in samples]))
        vision = vision_mean(bench, samples)
        fused = float(np.mean([s.fused_mps for s in samples]))
        rows.append((speed, encoder, vision, fused))

    bench.set_speed(STEP_FROM_MPS)
    bench.place_objects()
    bench.run(STEP_HOLD_S)
    step_time_s = bench.backend.time_s
    bench.set_speed(STEP_TO_MPS)
    step_samples = bench.run(STEP_HOLD_S)
    settling = settling_time_s(step_samples, step_time_s, STEP_TO_MPS - STEP_FROM_MPS)
    bench.backend.close()
    return {"rows": rows, "settling": settling, "cpu": bench.cpu, "invalid": bench.vision_invalid}


def report(result: dict[str, Any], label: str, suffix: str) -> list[dict[str, Any]]:
    """Print one knowledge condition's table; return its figures (names + ``suffix``)."""
    rows, settling, cpu = result["rows"], result["settling"], result["cpu"]
    print(f"== {label}")
    header = (
        f"{'true m/s':>9} {'encoder':>9} {'vision':>9} {'fused':>9} "
        f"{'enc err%':>9} {'vis err%':>9} {'fus err%':>9}"
    )
    print(header)
    print("-" * len(header))
    worst = {"encoder": 0.0, "vision": 0.0, "fused": 0.0}
    for speed, encoder, vision, fused in rows:
        errors = {
            "encoder": percent(encoder, speed),
            "vision": percent(vision, speed),
            "fused": percent(fused, speed),
        }
        for name, error in errors.items():
            worst[name] = max(worst[name], abs(error)) if np.isfinite(error) else float("nan")
        print(
            f"{speed:9.4f} {encoder:9.4f} {vision:9.4f} {fused:9.4f} "
            f"{errors['encoder']:+9.2f} {errors['vision']:+9.2f} {errors['fused']:+9.2f}"
        )
    print(
        f"step {STEP_FROM_MPS} -> {STEP_TO_MPS} m/s: fused settling time {settling:.2f} s "
        f"(band ±{SETTLING_BAND:.0%} of the step around its final value; goal ≤ 0.5 s)"
    )
    print(
        f"CPU per estimate: encoder {cpu.ms_per_call('encoder'):.3f} ms "
        f"({cpu.calls['encoder']} calls), vision {cpu.ms_per_call('vision'):.3f} ms "
        f"({cpu.calls['vision']} frames), filter {cpu.ms_per_call('filter'):.4f} ms"
    )
    if result["invalid"]:
        print(f"vision invalid readings: {result['invalid']}")
    figures: list[dict[str, Any]] = [
        {
            "name": "encoder_steady_error_max",
            "value": round(worst["encoder"], 3),
            "unit": "%",
            "goal": 1.0,
        },
        {
            "name": "vision_steady_error_max",
            "value": round(worst["vision"], 3),
            "unit": "%",
            "goal": 3.0,
        },
        {"name": "fused_steady_error_max", "value": round(worst["fused"], 3), "unit": "%"},
        {"name": "step_settling_time", "value": round(settling, 3), "unit": "s", "goal": 0.5},
        {"name": "encoder_cpu_per_estimate", "value": cpu.ms_per_call("encoder"), "unit": "ms"},
        {"name": "vision_cpu_per_estimate", "value": cpu.ms_per_call("vision"), "unit": "ms"},
        {"name": "filter_cpu_per_update", "value": cpu.ms_per_call("filter"), "unit": "ms"},
    ]
    for figure in figures:
        figure["name"] += suffix
        figure.setdefault("goal", None)
        if not np.isfinite(figure["value"]):
            figure["value"] = None  # e.g. no valid vision reading: JSON has no NaN
    return figures


def main() -> None:
    """Run the benchmark (nominal, then grounded if asked), print tables and the JSON line."""
    parser = benchlib.parser(__doc__)
    benchlib.add_artifact(parser)
    parser.add_argument(
        "--oracle", action="store_true", help="Also run with an oracle artifact (twin truth)."
    )
    args = parser.parse_args()
    wall = time.perf_counter()
    twin, nominal = load_world(TWIN_PATH), load_world(NOMINAL_PATH)
    conditions: list[tuple[str, str, WorldParams]] = [("nominal (ungrounded)", "", nominal)]
    if args.artifact is not None:
        grounded = apply_grounding(nominal, load_world_overrides(args.artifact))
        conditions.append((f"grounded by {args.artifact}", "_grounded", grounded))
    if args.oracle:
        oracle = apply_grounding(nominal, oracle_overrides(twin))
        conditions.append(("oracle artifact (twin truth, upper bound)", "_oracle", oracle))
    figures: list[dict[str, Any]] = []
    for label, suffix, knowledge in conditions:
        figures += report(measure(twin, knowledge, label), label, suffix)
    print(f"goals: |error| encoder ≤ 1 %, vision ≤ 3 %; wall {time.perf_counter() - wall:.1f} s")
    benchlib.print_json_line("belt_twin", figures)


if __name__ == "__main__":
    main()
