"""The grounding artifact: one versioned YAML with every recovered quantity.

Each record holds the value, its residual and/or uncertainty, and its provenance (data source:
a bag path or ``'live'``, time span, number of views/points/samples, solver). The
``world_overrides`` section is derived from the records and mirrors
:class:`r2s2r_world.world.WorldParams` field names, so that a grounded world is
``apply_grounding(nominal, artifact.world_overrides)``:

- ``cameras.<head|hand>.{width_px, height_px, fx_px, fy_px, cx_px, cy_px,
  distortion.{k1..k3}, blur_sigma_px, pose.{xyz_m, rpy_rad}}``: the pose is that of
  ``<camera>_camera_link`` in ``world`` (head) or ``palm_link`` (hand), as WorldParams defines
  it; :func:`camera_link_pose` converts an
  optical-frame pose from the extrinsics solvers.
- ``belt.{pose, speed_mps, roller_radius_m}``, ``bins.<name>.pose`` (poses in ``world``).
- ``controller.{gains.<joint>.{kp, kd}, latency_s}`` (filled by system identification).

Scene elements that WorldParams has no field for (e.g. ``table``) stay in ``scene`` only. On
load, ``world_overrides`` must equal what the records derive (a hand edit of one without the
other is refused).

This module is the writer's side. The records' schema, the schema version and the one full
check every reader runs are the world package's (:mod:`r2s2r_world.grounding_records`,
:data:`r2s2r_world.grounding.ARTIFACT_SCHEMA_VERSION`,
:func:`r2s2r_world.grounding.check_artifact`),
so that the nodes and generation, which may not import this package, refuse exactly what
:func:`load_artifact` refuses; the record names are re-exported here for the writer's users.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from r2s2r_common.config import ConfigError, dump_yaml
from r2s2r_description.frames import WORLD_FRAME
from r2s2r_description.transforms import invert_transform
from r2s2r_world.grounding import CHECK_OVERRIDES as CHECK_OVERRIDES
from r2s2r_world.grounding import GroundingArtifact as GroundingArtifact
from r2s2r_world.grounding import derive_world_overrides as derive_world_overrides
from r2s2r_world.grounding import read_artifact, validate_artifact
from r2s2r_world.grounding_records import CAMERA_POSE_PARENTS as CAMERA_POSE_PARENTS
from r2s2r_world.grounding_records import BeltRecord as BeltRecord
from r2s2r_world.grounding_records import BlurRecord as BlurRecord
from r2s2r_world.grounding_records import CameraPoseRecord as CameraPoseRecord
from r2s2r_world.grounding_records import CameraRecord as CameraRecord
from r2s2r_world.grounding_records import ControllerRecord as ControllerRecord
from r2s2r_world.grounding_records import DistortionValue as DistortionValue
from r2s2r_world.grounding_records import IntrinsicsRecord as IntrinsicsRecord
from r2s2r_world.grounding_records import JointControllerRecord as JointControllerRecord
from r2s2r_world.grounding_records import LookRecord as LookRecord
from r2s2r_world.grounding_records import PoseValue as PoseValue
from r2s2r_world.grounding_records import Provenance as Provenance
from r2s2r_world.grounding_records import ScenePoseRecord as ScenePoseRecord

from r2s2r_calibration.belt_model import BeltModelResult
from r2s2r_calibration.blur import BlurResult
from r2s2r_calibration.errors import ArtifactError
from r2s2r_calibration.geometry import (
    FloatArray,
    pose_from_xyz_rpy,
    xyz_rpy_from_pose,
)
from r2s2r_calibration.intrinsics import IntrinsicsResult
from r2s2r_calibration.registration.register import ElementRegistration

Vec3 = tuple[float, float, float]

OPTICAL_FROM_LINK_RPY_RAD: Vec3 = (-math.pi / 2.0, 0.0, -math.pi / 2.0)
"""``<camera>_optical_frame`` in ``<camera>_link`` (same as r2s2r_description's)."""


def camera_link_pose(T_parent_optical: FloatArray) -> FloatArray:
    """``T_parent_<camera>_link`` from ``T_parent_<camera>_optical_frame``."""
    T_link_optical = pose_from_xyz_rpy((0.0, 0.0, 0.0), OPTICAL_FROM_LINK_RPY_RAD)
    return np.asarray(T_parent_optical, dtype=float) @ invert_transform(T_link_optical)


def pose_value(T_parent_child: FloatArray, parent_frame: str, child_frame: str) -> PoseValue:
    """Build a :class:`PoseValue` from a 4x4 pose."""
    xyz, rpy = xyz_rpy_from_pose(T_parent_child)
    return PoseValue(
        parent_frame=parent_frame,
        child_frame=child_frame,
        xyz_m=(float(xyz[0]), float(xyz[1]), float(xyz[2])),
        rpy_rad=(float(rpy[0]), float(rpy[1]), float(rpy[2])),
    )


def save_artifact(artifact: GroundingArtifact, path: str | Path) -> None:
    """Write the artifact as YAML (atomically)."""
    dump_yaml(artifact.model_dump(mode="json"), path)


def load_artifact(path: str | Path) -> GroundingArtifact:
    """Read and validate an artifact (the one check every reader runs, then the model).

    Raises:
        ArtifactError: Missing file, bad YAML, unknown schema version, invalid or inconsistent
            content; the message names the file and the full dotted key.

    """
    try:
        # read_artifact runs the full check (r2s2r_world.grounding.check_artifact).
        return validate_artifact(read_artifact(path), str(path))
    except ConfigError as error:
        raise ArtifactError(str(error)) from None


def _provenance_text(provenance: Provenance) -> str:
    return f"{provenance.n_samples} {provenance.sample_kind} from {provenance.source}"


def _interval_text(position_m: float | None, rotation_rad: float | None) -> str:
    if position_m is None or rotation_rad is None:
        return ""
    return f", 95 % within {1000 * position_m:.2f} mm / {np.degrees(rotation_rad):.3f} deg"


def residual_rows(artifact: GroundingArtifact) -> list[tuple[str, str, str, str]]:
    """Rows (quantity, value, residual / uncertainty, data) of the residual table."""
    rows: list[tuple[str, str, str, str]] = []
    for name, camera in sorted(artifact.cameras.items()):
        if camera.intrinsics is not None:
            intr = camera.intrinsics
            data = _provenance_text(intr.provenance)
            rows.append(
                (
                    f"cameras.{name}.fx_px/fy_px",
                    f"{intr.fx_px:.2f} / {intr.fy_px:.2f}",
                    f"+-{intr.std_px[0]:.2f} / {intr.std_px[1]:.2f} px, "
                    f"rms {intr.reprojection_rms_px:.3f} px"
                    + (
                        ""
                        if intr.interval_95_px is None
                        else f", 95 % +-{intr.interval_95_px[0]:.2f} / "
                        f"{intr.interval_95_px[1]:.2f} px"
                    ),
                    data,
                )
            )
            rows.append(
                (
                    f"cameras.{name}.cx_px/cy_px",
                    f"{intr.cx_px:.2f} / {intr.cy_px:.2f}",
                    f"+-{intr.std_px[2]:.2f} / {intr.std_px[3]:.2f} px"
                    + (
                        ""
                        if intr.interval_95_px is None
                        else f", 95 % +-{intr.interval_95_px[2]:.2f} / "
                        f"{intr.interval_95_px[3]:.2f} px"
                    ),
                    data,
                )
            )
            dist = intr.distortion
            rows.append(
                (
                    f"cameras.{name}.distortion",
                    f"{dist.k1:.4f} {dist.k2:.4f} {dist.p1:.5f} {dist.p2:.5f} {dist.k3:.4f}",
                    "(in the rms above)",
                    data,
                )
            )
        if camera.blur is not None:
            rows.append(
                (
                    f"cameras.{name}.blur_sigma_px",
                    f"{camera.blur.sigma_px:.3f}",
                    f"+-{camera.blur.sigma_std_px:.3f} px, spread "
                    f"{camera.blur.relative_spread:.1%}"
                    + (
                        ""
                        if camera.blur.interval_95_px is None
                        else f", 95 % +-{camera.blur.interval_95_px:.3f} px"
                    ),
                    _provenance_text(camera.blur.provenance),
                )
            )
        if camera.pose is not None:
            pose = camera.pose
            rows.append(
                (
                    f"cameras.{name}.pose ({pose.pose.parent_frame})",
                    f"xyz {np.round(pose.pose.xyz_m, 4).tolist()} "
                    f"rpy {np.round(pose.pose.rpy_rad, 4).tolist()}",
                    f"+-{1000 * max(pose.translation_std_m):.2f} mm, "
                    f"{np.degrees(max(pose.rotation_std_rad)):.3f} deg, rms "
                    f"{pose.reprojection_rms_px:.3f} px"
                    + _interval_text(pose.position_interval_95_m, pose.rotation_interval_95_rad),
                    _provenance_text(pose.provenance),
                )
            )
    for name, record in sorted(artifact.scene.items()):
        rows.append(
            (
                f"scene.{name}.pose ({record.pose.parent_frame})",
                f"xyz {np.round(record.pose.xyz_m, 4).tolist()} "
                f"rpy {np.round(record.pose.rpy_rad, 4).tolist()}",
                f"fitness {record.fitness:.3f}, rmse {1000 * record.inlier_rmse_m:.2f} mm"
                + _interval_text(record.position_interval_95_m, record.rotation_interval_95_rad),
                _provenance_text(record.provenance),
            )
        )
    if artifact.belt is not None:
        belt = artifact.belt
        rows.append(
            (
                "belt.roller_radius_m",
                f"{belt.roller_radius_m:.5f}",
                f"+-{1000 * belt.roller_radius_std_m:.3f} mm, residual "
                f"{belt.relative_residual:.2%}"
                + (
                    ""
                    if belt.roller_radius_interval_95_m is None
                    else f", 95 % +-{1000 * belt.roller_radius_interval_95_m:.3f} mm"
                ),
                _provenance_text(belt.provenance),
            )
        )
    if artifact.controller is not None:
        for joint, gains in sorted(artifact.controller.gains.items()):
            rows.append(
                (
                    f"controller.gains.{joint}",
                    f"kp {gains.kp:.1f} kd {gains.kd:.2f}",
                    f"held-out rms {gains.residual_rms_rad:.4f} rad"
                    + (
                        ""
                        if gains.kp_interval_95 is None or gains.kd_interval_95 is None
                        else f", 95 % +-{gains.kp_interval_95:.2g} / {gains.kd_interval_95:.2g}"
                    ),
                    _provenance_text(gains.provenance),
                )
            )
        if artifact.controller.latency_s is not None:
            std = artifact.controller.latency_std_s
            rows.append(
                (
                    "controller.latency_s",
                    f"{artifact.controller.latency_s:.4f}",
                    ("" if std is None else f"+-{std:.5f} s")
                    + (
                        ""
                        if artifact.controller.latency_interval_95_s is None
                        else f", 95 % +-{artifact.controller.latency_interval_95_s:.5f} s"
                    ),
                    "",
                )
            )
    return rows


def format_residual_table(artifact: GroundingArtifact) -> str:
    """Format the per-quantity residual table as aligned plain text."""
    header = ("quantity", "value", "residual / uncertainty", "data")
    rows = [header, *residual_rows(artifact)]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def intrinsics_record(result: IntrinsicsResult, provenance: Provenance) -> IntrinsicsRecord:
    """Artifact record of an intrinsics calibration."""
    k1, k2, p1, p2, k3 = (float(value) for value in result.distortion[:5])
    std = result.intrinsics_std
    return IntrinsicsRecord(
        width_px=result.image_size_px[0],
        height_px=result.image_size_px[1],
        fx_px=result.fx_px,
        fy_px=result.fy_px,
        cx_px=result.cx_px,
        cy_px=result.cy_px,
        distortion=DistortionValue(k1=k1, k2=k2, p1=p1, p2=p2, k3=k3),
        std_px=(float(std[0]), float(std[1]), float(std[2]), float(std[3])),
        reprojection_rms_px=result.rms_px,
        provenance=provenance,
    )


def blur_record(result: BlurResult, provenance: Provenance) -> BlurRecord:
    """Artifact record of a blur estimate."""
    return BlurRecord(
        sigma_px=result.sigma_px,
        sigma_std_px=result.sigma_std_px,
        relative_spread=result.relative_spread,
        provenance=provenance,
    )


def scene_record(
    registration: ElementRegistration,
    T_world_base: FloatArray,
    provenance: Provenance,
    child_frame: str | None = None,
) -> ScenePoseRecord:
    """Artifact record of a registered element, expressed in ``world``."""
    T_world_element = np.asarray(T_world_base, dtype=float) @ registration.T_base_element
    return ScenePoseRecord(
        pose=pose_value(T_world_element, WORLD_FRAME, child_frame or f"{registration.name}_link"),
        fitness=registration.fitness,
        inlier_rmse_m=registration.inlier_rmse_m,
        observability=registration.observability,
        provenance=provenance,
        held_at_nominal=list(registration.held_at_nominal),
    )


def belt_record(
    result: BeltModelResult, provenance: Provenance, speed_mps: float | None = None
) -> BeltRecord:
    """Artifact record of a belt speed model (``speed_mps``: measured operating speed)."""
    return BeltRecord(
        roller_radius_m=result.roller_radius_m,
        roller_radius_std_m=result.roller_radius_std_m,
        speed_mps=speed_mps,
        residual_rms_mps=result.residual_rms_mps,
        relative_residual=result.relative_residual,
        provenance=provenance,
    )
