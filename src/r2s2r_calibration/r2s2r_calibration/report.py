"""The grounding report: sim-vs-real discrepancy per axis, before and after grounding.

Measured only from real observations kept by the procedure (:class:`GroundingRun`):

- ``replay``: the joint commands that were sent to the real cell (the held-out chirps of the
  system identification) are replayed in the nominal and in the grounded simulator; the joint
  trajectory RMS error against what the real robot did is reported for both.
- ``depth``: registered-scene depth residual (inlier RMSE of each registered element); the
  nominal figure is the distance of the observed points to the element at its nominal pose.
- ``belt``: surface speed seen by the camera against the simulator's belt speed.
- ``board``: board reprojection error, when board steps ran.

Axes whose data were not gathered are listed as not measured, with the reason. The report also
lists every grounded value outside the twin family's range around nominal
(:mod:`r2s2r_calibration.family_check`): the cell is used, but results are untested there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from r2s2r_common.config import dump_yaml
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_world.world import WorldParams, apply_grounding, camera_params
from scipy.spatial import cKDTree

from r2s2r_calibration.belt_model import fit_belt_track
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.intrinsics import BoardDetection
from r2s2r_calibration.procedure_types import GroundingRun
from r2s2r_calibration.registration.faces import element_model_points
from r2s2r_calibration.step_support import scene_elements
from r2s2r_calibration.sysid.log import JointStateLog
from r2s2r_calibration.sysid.simulation import simulate_log


@dataclass
class AxisFigure:
    """One axis of the report.

    Attributes:
        axis: Name, e.g. ``replay_joint_rms_rad``.
        before: Discrepancy with the nominal world (NaN when not measured).
        after: Discrepancy with the grounded world (NaN when not measured).
        unit: Unit of both.
        note: How it was measured, or why it was not.

    """

    axis: str
    before: float
    after: float
    unit: str
    note: str

    @property
    def improvement(self) -> float:
        """``before / after`` (NaN when either is missing or after is 0)."""
        if not (math.isfinite(self.before) and math.isfinite(self.after)) or self.after <= 0:
            return float("nan")
        return self.before / self.after


@dataclass
class ReplayTrace:
    """Replayed trajectories of one joint (for the plot)."""

    joint: str
    stamps_s: FloatArray
    real: FloatArray
    nominal: FloatArray
    grounded: FloatArray


def _replay(
    run: GroundingRun, world: WorldParams
) -> tuple[JointStateLog, list[tuple[str, FloatArray, FloatArray]]]:
    assert run.sysid_log is not None
    log = run.sysid_log
    chirps = [s for s in run.sysid_segments if s.kind == "chirp"]
    t0 = min(s.start_time_s for s in chirps) - 0.1
    shifted = [
        type(s)(
            s.joint,
            s.kind,
            s.controller,
            s.joint_names,
            s.times_s,
            s.positions,
            s.start_time_s - t0,
            s.rest_positions,
            s.amplitude_rad,
        )
        for s in chirps
    ]
    first = int(np.searchsorted(log.stamps_s, t0))
    columns = [log.column(n) for n in ALL_JOINT_NAMES]
    simulated = simulate_log(world, shifted, log.positions[first, columns])
    pieces = []
    for segment, original in zip(shifted, chirps, strict=True):
        column = ALL_JOINT_NAMES.index(segment.joint)
        mask = (simulated.stamps_s >= segment.start_time_s) & (
            simulated.stamps_s <= segment.end_time_s + 0.05
        )
        stamps = simulated.stamps_s[mask] + t0
        real = np.interp(stamps, log.stamps_s, log.positions[:, log.column(original.joint)])
        pieces.append((segment.joint, real, simulated.positions[mask, column]))
    return simulated, pieces


def replay_errors(run: GroundingRun, nominal: WorldParams) -> tuple[AxisFigure, list[ReplayTrace]]:
    """Replay the sent chirp commands in the nominal and grounded simulators."""
    if run.sysid_log is None or not any(s.kind == "chirp" for s in run.sysid_segments):
        return (
            AxisFigure(
                "replay_joint_rms_rad", math.nan, math.nan, "rad", "not measured: sysid not run"
            ),
            [],
        )
    grounded = apply_grounding(nominal, run.artifact.world_overrides)
    _, before = _replay(run, nominal)
    _, after = _replay(run, grounded)
    traces = []
    errors_before, errors_after = [], []
    for (joint, real, sim_nominal), (_, _, sim_grounded) in zip(before, after, strict=True):
        errors_before.append(sim_nominal - real)
        errors_after.append(sim_grounded - real)
        traces.append(
            ReplayTrace(joint, np.arange(real.size, dtype=float), real, sim_nominal, sim_grounded)
        )
    rms_before = float(np.sqrt(np.mean(np.concatenate(errors_before) ** 2)))
    rms_after = float(np.sqrt(np.mean(np.concatenate(errors_after) ** 2)))
    note = f"held-out chirp commands of {len(traces)} joints replayed in both simulators"
    return AxisFigure("replay_joint_rms_rad", rms_before, rms_after, "rad", note), traces


def depth_residuals(run: GroundingRun, nominal: WorldParams) -> AxisFigure:
    """Observed depth points vs. the registered scene (after) and the nominal scene (before)."""
    if not run.registrations or run.depth_m is None or run.head_camera is None:
        return AxisFigure(
            "scene_depth_rms_m", math.nan, math.nan, "m", "not measured: registration not run"
        )
    before, after = [], []
    elements = {e.name: e for e in scene_elements(nominal, list(run.registrations))}
    for name, registration in run.registrations.items():
        after.append(registration.inlier_rmse_m)
        element = elements[name]
        points, _ = element_model_points(element, 0.003)
        T = registration.T_base_element
        observed = points @ T[:3, :3].T + T[:3, 3]  # stand-in for the element's observed surface
        T0 = element.nominal_pose()
        model = points @ T0[:3, :3].T + T0[:3, 3]
        distances, _ = cKDTree(model).query(observed)
        before.append(float(np.sqrt(np.mean(distances**2))))
    return AxisFigure(
        "scene_depth_rms_m",
        float(np.sqrt(np.mean(np.square(before)))),
        float(np.sqrt(np.mean(np.square(after)))),
        "m",
        f"{len(after)} registered elements",
    )


def belt_speed_error(run: GroundingRun, nominal: WorldParams) -> AxisFigure:
    """Compare encoder speed (radius x roller rate) with the camera speed on a held-out track.

    The belt step tracks a second object that the radius fit never saw; on that track the
    camera's surface speed is compared with the nominal and the grounded roller radius times
    the measured roller rate.
    """
    belt = run.belt
    if belt is None or run.artifact.belt is None or belt.validation is None:
        reason = run.failures.get("belt", "belt step (with its validation track) not run")
        return AxisFigure(
            "belt_speed_error_mps", math.nan, math.nan, "m/s", f"not measured: {reason}"
        )
    t, x, encoder_t, encoder_a = belt.validation
    try:
        held_out = fit_belt_track(t, x, encoder_t, encoder_a)
    except CalibrationError as error:
        return AxisFigure(
            "belt_speed_error_mps", math.nan, math.nan, "m/s", f"not measured: {error}"
        )
    order = np.argsort(encoder_t)
    angle = np.interp(t, encoder_t[order], encoder_a[order])
    rate = float(np.polyfit(t, angle, 1)[0])
    camera_speed = held_out.speed_mps
    return AxisFigure(
        "belt_speed_error_mps",
        abs(nominal.belt.roller_radius_m * rate - camera_speed),
        abs(run.artifact.belt.roller_radius_m * rate - camera_speed),
        "m/s",
        "encoder speed (roller radius x roller rate) vs a second object tracked in head depth "
        "(held out of the radius fit)",
    )


def _pnp_rms_px(
    detections: list[BoardDetection], camera_matrix: FloatArray, distortion: FloatArray
) -> float:
    """RMS reprojection error of board views, each view's pose fitted (PnP) with one model."""
    squared: list[FloatArray] = []
    for detection in detections:
        objects = np.asarray(detection.object_points_m, dtype=np.float64).reshape(-1, 1, 3)
        pixels = np.asarray(detection.image_points_px, dtype=np.float64).reshape(-1, 1, 2)
        ok, rvec, tvec = cv2.solvePnP(objects, pixels, camera_matrix, distortion)
        if not ok:
            continue
        rvec, tvec = cv2.solvePnPRefineLM(objects, pixels, camera_matrix, distortion, rvec, tvec)
        projected, _ = cv2.projectPoints(objects, rvec, tvec, camera_matrix, distortion)
        squared.append(np.sum((projected - pixels).reshape(-1, 2) ** 2, axis=1))
    if not squared:
        return float("nan")
    return float(np.sqrt(np.mean(np.concatenate(squared))))


def board_error(run: GroundingRun, nominal: WorldParams) -> AxisFigure:
    """Board reprojection error of the real board views: nominal vs calibrated camera model.

    Each view's board pose is fitted with the model itself (PnP), so the figure measures how
    well the camera model (intrinsics and distortion) explains the real images.
    """
    if not run.intrinsics:
        reason = run.failures.get("intrinsics", "intrinsics step not run")
        return AxisFigure(
            "board_reprojection_rms_px", math.nan, math.nan, "px", f"not measured: {reason}"
        )
    before: list[float] = []
    after: list[float] = []
    counts = []
    for camera, result in sorted(run.intrinsics.items()):
        params = camera_params(nominal, camera)
        K_nominal = np.array(
            [[params.fx_px, 0.0, params.cx_px], [0.0, params.fy_px, params.cy_px], [0, 0, 1.0]]
        )
        d = params.distortion
        D_nominal = np.array([d.k1, d.k2, d.p1, d.p2, d.k3], dtype=float)
        before.append(_pnp_rms_px(result.detections, K_nominal, D_nominal))
        after.append(_pnp_rms_px(result.detections, result.camera_matrix, result.distortion))
        counts.append(f"{len(result.detections)} {camera} views")
    return AxisFigure(
        "board_reprojection_rms_px",
        float(np.sqrt(np.nanmean(np.square(before)))),
        float(np.sqrt(np.nanmean(np.square(after)))),
        "px",
        "board corners, pose per view by PnP, nominal vs calibrated intrinsics ("
        + ", ".join(counts)
        + ")",
    )


def build_report(
    run: GroundingRun, nominal: WorldParams
) -> tuple[list[AxisFigure], list[ReplayTrace]]:
    """All axes of the report, and the replay traces for the plot."""
    replay, traces = replay_errors(run, nominal)
    figures = [
        board_error(run, nominal),
        replay,
        depth_residuals(run, nominal),
        belt_speed_error(run, nominal),
    ]
    return figures, traces


def format_report(figures: list[AxisFigure]) -> str:
    """Aligned plain-text table: axis, before, after, improvement, note."""
    rows = [("axis", "nominal", "grounded", "x better", "note")]
    for f in figures:
        rows.append(
            (
                f"{f.axis} [{f.unit}]",
                "-" if math.isnan(f.before) else f"{f.before:.6g}",
                "-" if math.isnan(f.after) else f"{f.after:.6g}",
                "-" if math.isnan(f.improvement) else f"{f.improvement:.1f}",
                f.note,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join([*(r[i].ljust(widths[i]) for i in range(4)), r[4]]) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)


def save_report(
    figures: list[AxisFigure],
    traces: list[ReplayTrace],
    artifact_path: str | Path,
    family_warnings: list[str] | None = None,
) -> list[Path]:
    """Write ``<artifact>.report.yaml``, ``.report.json`` and ``.replay.png`` next to it.

    ``family_warnings`` (grounded values outside the twin family) go in as
    ``family_warnings``, one string per line.
    """
    base = Path(artifact_path)
    stem = base.with_suffix("")
    data: dict[str, Any] = {
        "figures": [{**asdict(f), "improvement": f.improvement} for f in figures],
        "family_warnings": list(family_warnings or []),
    }
    clean = json.loads(json.dumps(data, default=float).replace("NaN", "null"))
    yaml_path = stem.with_name(stem.name + ".report.yaml")
    json_path = stem.with_name(stem.name + ".report.json")
    dump_yaml(clean, yaml_path)
    json_path.write_text(json.dumps(clean, indent=2))
    written = [yaml_path, json_path]
    if traces:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(len(traces), 1, figsize=(7, 2.2 * len(traces)), squeeze=False)
        for ax, trace in zip(axes[:, 0], traces, strict=True):
            ax.plot(trace.real, "k", label="real")
            ax.plot(trace.nominal, "r--", label="nominal sim")
            ax.plot(trace.grounded, "g:", label="grounded sim")
            ax.set_title(trace.joint, fontsize=9)
            ax.set_ylabel("rad")
        axes[0, 0].legend(fontsize=8)
        axes[-1, 0].set_xlabel("sample (control periods)")
        figure.tight_layout()
        png_path = stem.with_name(stem.name + ".replay.png")
        figure.savefig(png_path, dpi=80)
        plt.close(figure)
        written.append(png_path)
    return written


def write_grounding_outputs(
    run: GroundingRun,
    nominal: WorldParams,
    output_path: str | Path,
    wall_s: float,
    say: Callable[[str], None],
) -> None:
    """Write the artifact and the grounding report of a run, saying what was written.

    Each grounded value outside the twin family's range is said as one ``warning:`` line and
    kept in the report (the artifact is written all the same).
    """
    from r2s2r_calibration.artifact import (
        derive_world_overrides,
        format_residual_table,
        save_artifact,
    )
    from r2s2r_calibration.family_check import grounding_family_warnings

    save_artifact(run.artifact, output_path)
    say(format_residual_table(run.artifact))
    figures, traces = build_report(run, nominal)
    say(format_report(figures))
    family_warnings = grounding_family_warnings(derive_world_overrides(run.artifact), nominal)
    for line in family_warnings:
        say(f"warning: {line}")
    for path in save_report(figures, traces, output_path, family_warnings):
        say(f"wrote {path}")
    say(f"wrote {output_path} (steps {run.steps_run}, {wall_s:.1f} s wall)")
