"""Object tracker benchmark on the real twin: position error vs simulator truth, type accuracy,
processing time per frame against the camera rate.

The twin's hidden world (``--twin``, default config/twin/default.yaml) is rendered as reality:
one object per run, type cycling over cube/cylinder/block/sphere, lateral offset and yaw from
``r2s2r_sim.task.sample_trial(seed)``, start position along the belt from the seed, riding the
belt at the twin's speed for ``--frames`` frames at the camera rate. The same frames go through
the tracker with three kinds of camera knowledge:

* ``nominal``: the NOMINAL camera_info and /tf_static the pipeline has before world grounding,
  belt-plane anchoring on (the shipped configuration);
* ``nominal, no anchor``: the same without belt-plane anchoring;
* ``grounded``: the twin's TRUE intrinsics, distortion and mounts (an ORACLE artifact: what
  perfect world grounding gives, the upper bound), anchoring off;
* with ``--artifact PATH``: the knowledge a grounding artifact gives the cell (nominal world +
  its ``world_overrides``: the exported camera_info of the head camera and the grounded
  /tf_static of cell_state_publisher), anchoring off and on.

A further row repeats ``grounded`` under the ``lighting`` shift. Simulator truth (object poses in
the twin's true base_link) is used only to score. Errors are of confirmed tracks (published
output) per frame; type accuracy is per published track per frame.

Usage: MUJOCO_GL=egl python bench/bench_tracker.py [--seeds 40] [--frames 20] [--artifact A]
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import benchlib
import numpy as np
from r2s2r_belt.perception import catalogue_from_world, scene_geometry_from_world
from r2s2r_belt.tracking.config import ObjectTrackerConfig
from r2s2r_belt.tracking.detection import SceneGeometry
from r2s2r_belt.tracking.evaluation import (
    Placement,
    TwinScene,
    yaw_error_rad,
)
from r2s2r_belt.tracking.pipeline import ObjectTrackerCore
from r2s2r_sim.task import sample_trial
from r2s2r_world.grounding import load_world_overrides
from r2s2r_world.world import WorldParams, apply_grounding, apply_shift, load_world

REPO = Path(__file__).resolve().parents[1]
TYPES = ("cube", "cylinder", "block", "sphere")
ARTIFACT_ROW = "grounded by --artifact"


@dataclass
class Scores:
    """Accumulated per-frame scores of one condition."""

    errors_m: list[float] = field(default_factory=list)
    horizontal_errors_m: list[float] = field(default_factory=list)
    yaw_errors_rad: list[float] = field(default_factory=list)
    type_correct: int = 0
    type_total: int = 0
    frames_with_object: int = 0
    frames_tracked: int = 0
    id_switches: int = 0
    processing_s: list[float] = field(default_factory=list)

    def row(self, name: str) -> dict[str, float | str]:
        errors = np.array(self.errors_m) * 1000.0
        horizontal = np.array(self.horizontal_errors_m) * 1000.0
        yaw = np.degrees(self.yaw_errors_rad) if self.yaw_errors_rad else np.array([math.nan])
        processing = np.array(self.processing_s) * 1000.0
        return {
            "condition": name,
            "median_mm": float(np.median(errors)),
            "p90_mm": float(np.percentile(errors, 90)),
            "median_xy_mm": float(np.median(horizontal)),
            "box_yaw_median_deg": float(np.median(yaw)),
            "type_accuracy": self.type_correct / max(self.type_total, 1),
            "tracked_fraction": self.frames_tracked / max(self.frames_with_object, 1),
            "id_switches": float(self.id_switches),
            "ms_per_frame_median": float(np.median(processing)),
            "ms_per_frame_p99": float(np.percentile(processing, 99)),
        }


def make_core(catalogue_world: WorldParams, anchor: bool) -> ObjectTrackerCore:
    config = ObjectTrackerConfig(catalogue=catalogue_from_world(catalogue_world).to_config())
    config.detection.anchor_to_belt_plane = anchor
    return ObjectTrackerCore(config)


def run(
    world: WorldParams,
    nominal: WorldParams,
    conditions: dict[str, tuple[SceneGeometry, bool]],
    seeds: range,
    frames: int,
) -> dict[str, Scores]:
    """Render ``frames`` frames per seed and score every condition on the same frames."""
    scene = TwinScene(world)
    scores = {name: Scores() for name in conditions}
    period_s = 1.0 / world.cameras.head.rate_hz
    speed = world.belt.speed_mps
    for seed in seeds:
        plan = sample_trial(world, seed)
        arrival = plan.arrivals[0]
        type_name = TYPES[seed % len(TYPES)]
        start_x = float(
            np.random.default_rng(seed).uniform(-0.55, 0.55 - frames * period_s * speed)
        )
        scene.start(
            [Placement(type_name, start_x, arrival.lateral_offset_m, arrival.yaw_rad)], speed
        )
        cores = {name: make_core(nominal, anchor) for name, (_, anchor) in conditions.items()}
        last_ids: dict[str, int | None] = {name: None for name in conditions}
        model = cores[next(iter(cores))].catalogue[type_name]
        for _ in range(frames):
            scene.step_s(period_s)
            frame = scene.frame()
            truth = frame.truth[0]
            true_yaw = math.atan2(truth.rotation[1, 0], truth.rotation[0, 0])
            for name, (geometry, _) in conditions.items():
                output = cores[name].process(
                    frame.rgb, frame.depth_m, frame.stamp_s, geometry, speed
                )
                score = scores[name]
                score.processing_s.append(output.processing_time_s)
                score.frames_with_object += 1
                if not output.tracks:
                    continue
                track = min(
                    output.tracks, key=lambda t: np.linalg.norm(t.position_m - truth.position_m)
                )
                score.frames_tracked += 1
                error = track.position_m - truth.position_m
                score.errors_m.append(float(np.linalg.norm(error)))
                score.horizontal_errors_m.append(float(np.linalg.norm(error[:2])))
                score.type_total += len(output.tracks)
                score.type_correct += sum(t.type_name == type_name for t in output.tracks)
                if last_ids[name] is not None and track.track_id != last_ids[name]:
                    score.id_switches += 1
                last_ids[name] = track.track_id
                if model.shape == "box":
                    track_yaw = math.atan2(track.rotation[1, 0], track.rotation[0, 0])
                    score.yaw_errors_rad.append(
                        yaw_error_rad(track_yaw, true_yaw, model.yaw_period_rad)
                    )
    scene.backend.close()
    return scores


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--seeds", type=int, default=40, help="Runs (one object each).")
    parser.add_argument("--frames", type=int, default=20, help="Frames per run.")
    benchlib.add_artifact(parser)
    benchlib.add_twin(parser)  # rendered as reality (any world file, e.g. a family twin)
    args = parser.parse_args()
    nominal = load_world(REPO / "config" / "world" / "nominal.yaml")
    twin = load_world(args.twin)
    nominal_geometry = scene_geometry_from_world(nominal)
    true_geometry = scene_geometry_from_world(twin)
    conditions = {
        "nominal (tf_static + camera_info)": (nominal_geometry, True),
        "nominal, no plane anchoring": (nominal_geometry, False),
        "oracle: twin's true camera": (true_geometry, False),
    }
    if args.artifact is not None:
        artifact_geometry = scene_geometry_from_world(
            apply_grounding(nominal, load_world_overrides(args.artifact))
        )
        conditions[ARTIFACT_ROW] = (artifact_geometry, False)
        conditions[ARTIFACT_ROW + ", anchored"] = (artifact_geometry, True)
    start = time.perf_counter()
    rows = []
    scores = run(
        twin,
        nominal,
        conditions,
        range(args.seeds),
        args.frames,
    )
    rows += [score.row(name) for name, score in scores.items()]
    lighting = run(
        apply_shift(twin, "lighting"),
        nominal,
        {"oracle, lighting shift": (true_geometry, False)},
        range(1000, 1000 + max(args.seeds // 2, 4)),
        args.frames,
    )
    rows += [score.row(name) for name, score in lighting.items()]
    camera_rate_hz = twin.cameras.head.rate_hz
    header = (
        f"{'condition':36s} {'median':>7s} {'p90':>7s} {'xy med':>7s} {'yaw°':>6s} "
        f"{'type acc':>8s} {'tracked':>8s} {'id sw':>5s} {'ms/frm':>7s} {'ms p99':>7s}"
    )
    print(
        f"object tracker on the twin: {args.seeds} runs x {args.frames} frames at "
        f"{camera_rate_hz:g} Hz, 128x128 head camera ({time.perf_counter() - start:.0f} s)"
    )
    print("errors in mm vs simulator truth in the twin's base_link (scoring only)")
    print(header)
    for row in rows:
        print(
            f"{row['condition']:36s} {row['median_mm']:7.1f} {row['p90_mm']:7.1f} "
            f"{row['median_xy_mm']:7.1f} {row['box_yaw_median_deg']:6.1f} "
            f"{100 * float(row['type_accuracy']):7.1f}% "
            f"{100 * float(row['tracked_fraction']):7.1f}% "
            f"{int(row['id_switches']):5d} {row['ms_per_frame_median']:7.2f} "
            f"{row['ms_per_frame_p99']:7.2f}"
        )
    by_name = {str(r["condition"]): r for r in rows}
    nominal_row = by_name["nominal (tf_static + camera_info)"]
    grounded_row = by_name["oracle: twin's true camera"]
    lighting_row = by_name["oracle, lighting shift"]
    all_processing = [r["ms_per_frame_p99"] for r in rows]
    achievable_hz = 1000.0 / max(float(v) for v in all_processing)
    print(
        f"achievable rate (p99 processing) {achievable_hz:.0f} Hz vs camera {camera_rate_hz:g} Hz"
    )
    figures = [
        {
            "name": "position_error_median_grounded",
            "value": round(float(grounded_row["median_mm"]), 2),
            "unit": "mm",
            "goal": "<= 5",
        },
        {
            "name": "position_error_p90_grounded",
            "value": round(float(grounded_row["p90_mm"]), 2),
            "unit": "mm",
            "goal": "report",
        },
        {
            "name": "position_error_median_nominal",
            "value": round(float(nominal_row["median_mm"]), 2),
            "unit": "mm",
            "goal": "<= 5 (needs grounding)",
        },
        {
            "name": "position_error_p90_nominal",
            "value": round(float(nominal_row["p90_mm"]), 2),
            "unit": "mm",
            "goal": "report",
        },
        {
            "name": "type_accuracy_nominal",
            "value": round(100 * float(nominal_row["type_accuracy"]), 2),
            "unit": "%",
            "goal": ">= 98",
        },
        {
            "name": "type_accuracy_grounded",
            "value": round(100 * float(grounded_row["type_accuracy"]), 2),
            "unit": "%",
            "goal": ">= 98",
        },
        {
            "name": "type_accuracy_lighting_shift",
            "value": round(100 * float(lighting_row["type_accuracy"]), 2),
            "unit": "%",
            "goal": ">= 98",
        },
        {
            "name": "box_yaw_error_median_grounded",
            "value": round(float(grounded_row["box_yaw_median_deg"]), 1),
            "unit": "deg",
            "goal": "report",
        },
        {
            "name": "processing_per_frame_median",
            "value": round(max(float(r["ms_per_frame_median"]) for r in rows), 2),
            "unit": "ms",
            "goal": "report",
        },
        {
            "name": "processing_per_frame_p99",
            "value": round(max(float(v) for v in all_processing), 2),
            "unit": "ms",
            "goal": f"< {1000 / camera_rate_hz:g} (camera period)",
        },
        {
            "name": "achievable_rate",
            "value": round(achievable_hz, 1),
            "unit": "Hz",
            "goal": f">= {camera_rate_hz:g}",
        },
    ]
    if args.artifact is not None:
        artifact_row = by_name[ARTIFACT_ROW]
        anchored_row = by_name[ARTIFACT_ROW + ", anchored"]
        print(f"artifact: {args.artifact}")
        figures += [
            {
                "name": "position_error_median_artifact",
                "value": round(float(artifact_row["median_mm"]), 2),
                "unit": "mm",
                "goal": "<= 5",
            },
            {
                "name": "position_error_p90_artifact",
                "value": round(float(artifact_row["p90_mm"]), 2),
                "unit": "mm",
                "goal": "report",
            },
            {
                "name": "position_error_median_artifact_anchored",
                "value": round(float(anchored_row["median_mm"]), 2),
                "unit": "mm",
                "goal": "report",
            },
            {
                "name": "type_accuracy_artifact",
                "value": round(100 * float(artifact_row["type_accuracy"]), 2),
                "unit": "%",
                "goal": ">= 98",
            },
        ]
    benchlib.print_json_line("tracker", figures)


if __name__ == "__main__":
    main()
