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

This module is the writer's side and the records' schema; the schema version and the checks
every reader shares are the world package's (:data:`r2s2r_world.grounding.ARTIFACT_SCHEMA_VERSION`,
:func:`r2s2r_world.grounding.read_artifact`), which :func:`load_artifact` runs first.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from r2s2r_common.config import ConfigError, ConfigModel, dump_yaml, format_validation_error
from r2s2r_description.transforms import invert_transform
from r2s2r_world.grounding import ARTIFACT_SCHEMA_VERSION, read_artifact

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

CAMERA_POSE_PARENTS: dict[str, str] = {"head": "world", "hand": "palm_link"}
"""Parent frame of each camera's pose in WorldParams."""


class Provenance(ConfigModel):
    """Where a recovered quantity came from."""

    source: str = Field(description="Bag path, or 'live' for a running cell.")
    start_stamp_s: float | None = Field(None, description="First sample time (s), if known.")
    end_stamp_s: float | None = Field(None, description="Last sample time (s), if known.")
    n_samples: int = Field(ge=0, description="Number of samples used.")
    sample_kind: str = Field(description="What a sample is: views, points, poses, pairs.")
    solver: str = Field(description="Solver that produced the value.")


class PoseValue(ConfigModel):
    """A frame's pose in its parent (m, REP-103 roll-pitch-yaw rad)."""

    parent_frame: str = Field(description="Parent frame, e.g. 'world'.")
    child_frame: str = Field(description="Child frame, e.g. 'head_camera_link'.")
    xyz_m: Vec3 = Field(description="Translation (m).")
    rpy_rad: Vec3 = Field(description="Roll, pitch, yaw (rad).")

    def matrix(self) -> FloatArray:
        """Return the 4x4 pose."""
        return pose_from_xyz_rpy(self.xyz_m, self.rpy_rad)

    def world_value(self) -> dict[str, list[float]]:
        """Return the WorldParams ``PoseParams`` form."""
        return {"xyz_m": list(self.xyz_m), "rpy_rad": list(self.rpy_rad)}


class DistortionValue(ConfigModel):
    """Brown-Conrady distortion, OpenCV order."""

    k1: float = Field(description="Radial r^2.")
    k2: float = Field(description="Radial r^4.")
    p1: float = Field(description="Tangential 1.")
    p2: float = Field(description="Tangential 2.")
    k3: float = Field(description="Radial r^6.")


class IntrinsicsRecord(ConfigModel):
    """Calibrated intrinsics of one camera."""

    width_px: int = Field(ge=1, description="Image width.")
    height_px: int = Field(ge=1, description="Image height.")
    fx_px: float = Field(gt=0.0, description="Focal length x.")
    fy_px: float = Field(gt=0.0, description="Focal length y.")
    cx_px: float = Field(description="Principal point x.")
    cy_px: float = Field(description="Principal point y.")
    distortion: DistortionValue
    std_px: tuple[float, float, float, float] = Field(
        description="1-sigma of (fx, fy, cx, cy) (px)."
    )
    reprojection_rms_px: float = Field(ge=0.0, description="Board reprojection RMS (px).")
    provenance: Provenance
    interval_95_px: tuple[float, float, float, float] | None = Field(
        None,
        description="Half-widths of the 95 % intervals of (fx, fy, cx, cy) (px): the fit's "
        "standard errors, the spread over view subsets and the model-error floors.",
    )


class BlurRecord(ConfigModel):
    """Gaussian blur of one camera."""

    sigma_px: float = Field(ge=0.0, description="Blur sigma (px).")
    sigma_std_px: float = Field(ge=0.0, description="1-sigma uncertainty (px).")
    relative_spread: float = Field(ge=0.0, description="Per-edge robust spread / median.")
    provenance: Provenance
    interval_95_px: float | None = Field(
        None, ge=0.0, description="Half-width of the 95 % interval of sigma_px (px)."
    )


class CameraPoseRecord(ConfigModel):
    """Extrinsic pose of one camera link."""

    pose: PoseValue
    reprojection_rms_px: float = Field(ge=0.0, description="Board reprojection RMS (px).")
    translation_std_m: Vec3 = Field(description="1-sigma translation per axis (m).")
    rotation_std_rad: Vec3 = Field(description="1-sigma rotation per axis (rad).")
    provenance: Provenance
    position_interval_95_m: float | None = Field(
        None,
        ge=0.0,
        description="95 % bound on the position error (m): the fit's, and what the camera's "
        "intrinsics uncertainty propagates into it.",
    )
    rotation_interval_95_rad: float | None = Field(
        None, ge=0.0, description="95 % bound on the rotation error angle (rad)."
    )


class CameraRecord(ConfigModel):
    """Everything recovered for one camera (each part optional)."""

    intrinsics: IntrinsicsRecord | None = None
    blur: BlurRecord | None = None
    pose: CameraPoseRecord | None = None


class ScenePoseRecord(ConfigModel):
    """Registered pose of a scene element."""

    pose: PoseValue
    fitness: float = Field(ge=0.0, le=1.0, description="Inlier fraction.")
    inlier_rmse_m: float = Field(ge=0.0, description="Inlier RMS distance (m).")
    observability: float = Field(ge=0.0, description="Weakest/strongest information ratio.")
    provenance: Provenance
    held_at_nominal: list[str] = Field(
        default_factory=list,
        description="Pose directions the depth view does not constrain, held at the nominal "
        "pose (e.g. 'translation along belt x': the belt's ends are out of view).",
    )
    position_interval_95_m: float | None = Field(
        None,
        ge=0.0,
        description="95 % bound on the position error over the directions not held (m), with "
        "what the camera calibration's uncertainty propagates into it.",
    )
    rotation_interval_95_rad: float | None = Field(
        None, ge=0.0, description="95 % bound on the rotation error angle (rad)."
    )


class BeltRecord(ConfigModel):
    """Belt speed model."""

    roller_radius_m: float = Field(gt=0.0, description="Effective encoder roller radius (m).")
    roller_radius_std_m: float = Field(ge=0.0, description="1-sigma (m).")
    speed_mps: float | None = Field(
        None, ge=0.0, description="Measured surface speed at the operating point (m/s)."
    )
    residual_rms_mps: float = Field(ge=0.0, description="RMS speed residual (m/s).")
    relative_residual: float = Field(ge=0.0, description="Residual / mean speed.")
    provenance: Provenance
    roller_radius_interval_95_m: float | None = Field(
        None, ge=0.0, description="Half-width of the 95 % interval of roller_radius_m (m)."
    )
    speed_interval_95_mps: float | None = Field(
        None, ge=0.0, description="Half-width of the 95 % interval of speed_mps (m/s)."
    )


class JointControllerRecord(ConfigModel):
    """Identified servo gains of one joint."""

    kp: float = Field(gt=0.0, description="Stiffness (N m/rad).")
    kd: float = Field(ge=0.0, description="Damping (N m s/rad).")
    residual_rms_rad: float = Field(ge=0.0, description="Held-out tracking residual (rad).")
    provenance: Provenance
    kp_interval_95: float | None = Field(
        None, ge=0.0, description="Half-width of the 95 % interval of kp (N m/rad)."
    )
    kd_interval_95: float | None = Field(
        None, ge=0.0, description="Half-width of the 95 % interval of kd (N m s/rad)."
    )


class ControllerRecord(ConfigModel):
    """Identified controller model (system identification)."""

    gains: dict[str, JointControllerRecord] = Field(default_factory=dict)
    latency_s: float | None = Field(None, ge=0.0, description="Command latency (s).")
    latency_std_s: float | None = Field(None, ge=0.0, description="1-sigma latency (s).")
    latency_interval_95_s: float | None = Field(
        None, ge=0.0, description="Half-width of the 95 % interval of latency_s (s)."
    )


CHECK_OVERRIDES = "check_world_overrides"
"""Validation context key: refuse world_overrides that differ from the records (files)."""


class GroundingArtifact(ConfigModel):
    """The grounding artifact (see the module docstring)."""

    schema_version: int = Field(
        ARTIFACT_SCHEMA_VERSION,
        description="Artifact schema version (r2s2r_world.grounding.ARTIFACT_SCHEMA_VERSION).",
    )
    created_utc: str = Field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"),
        description="Creation time (ISO 8601, UTC).",
    )
    cameras: dict[str, CameraRecord] = Field(default_factory=dict)
    scene: dict[str, ScenePoseRecord] = Field(default_factory=dict)
    belt: BeltRecord | None = None
    controller: ControllerRecord | None = None
    world_overrides: dict[str, Any] = Field(
        default_factory=dict, description="Derived WorldParams overrides (do not hand-edit)."
    )

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != ARTIFACT_SCHEMA_VERSION:
            raise ValueError(
                f"expected schema_version {ARTIFACT_SCHEMA_VERSION} (this code's artifact schema)"
            )
        return value

    @model_validator(mode="after")
    def _overrides_consistent(self, info: ValidationInfo) -> GroundingArtifact:
        derived = derive_world_overrides(self)
        # A file's world_overrides must match its records (someone may have hand-edited it);
        # in memory, records change step by step and world_overrides follows them.
        checked = bool(info.context and info.context.get(CHECK_OVERRIDES))
        if checked and self.world_overrides and self.world_overrides != derived:
            raise ValueError(
                "world_overrides does not match the records it is derived from; edit the "
                "records, not world_overrides, or delete world_overrides to re-derive it"
            )
        # Assigning through __dict__ avoids re-running this validator (validate_assignment).
        self.__dict__["world_overrides"] = derived
        return self


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


def _require_parent(pose: PoseValue, expected: str, key: str) -> None:
    if pose.parent_frame != expected:
        raise ValueError(
            f"{key}: pose is in '{pose.parent_frame}', but WorldParams expects it in "
            f"'{expected}'; express it there before adding it to the artifact"
        )


def derive_world_overrides(artifact: GroundingArtifact) -> dict[str, Any]:
    """Derive the nested WorldParams overrides that the artifact's records define."""
    overrides: dict[str, Any] = {}
    for name, camera in artifact.cameras.items():
        entry: dict[str, Any] = {}
        if camera.intrinsics is not None:
            intr = camera.intrinsics
            # The image size goes with the intrinsics: they are only valid at that size.
            entry.update(
                width_px=intr.width_px,
                height_px=intr.height_px,
                fx_px=intr.fx_px,
                fy_px=intr.fy_px,
                cx_px=intr.cx_px,
                cy_px=intr.cy_px,
                distortion=intr.distortion.model_dump(),
            )
        if camera.blur is not None:
            entry["blur_sigma_px"] = camera.blur.sigma_px
        if camera.pose is not None:
            expected = CAMERA_POSE_PARENTS.get(name)
            if expected is not None:
                _require_parent(camera.pose.pose, expected, f"cameras.{name}.pose")
            entry["pose"] = camera.pose.pose.world_value()
        if entry:
            overrides.setdefault("cameras", {})[name] = entry
    for name, record in artifact.scene.items():
        if name == "belt":
            _require_parent(record.pose, "world", "scene.belt.pose")
            overrides.setdefault("belt", {})["pose"] = record.pose.world_value()
        elif name.startswith("bin"):
            _require_parent(record.pose, "world", f"scene.{name}.pose")
            overrides.setdefault("bins", {})[name] = {"pose": record.pose.world_value()}
    if artifact.belt is not None:
        belt = overrides.setdefault("belt", {})
        belt["roller_radius_m"] = artifact.belt.roller_radius_m
        if artifact.belt.speed_mps is not None:
            belt["speed_mps"] = artifact.belt.speed_mps
    if artifact.controller is not None:
        controller: dict[str, Any] = {}
        if artifact.controller.gains:
            controller["gains"] = {
                joint: {"kp": record.kp, "kd": record.kd}
                for joint, record in artifact.controller.gains.items()
            }
        if artifact.controller.latency_s is not None:
            controller["latency_s"] = artifact.controller.latency_s
        if controller:
            overrides["controller"] = controller
    return overrides


def save_artifact(artifact: GroundingArtifact, path: str | Path) -> None:
    """Write the artifact as YAML (atomically)."""
    dump_yaml(artifact.model_dump(mode="json"), path)


def load_artifact(path: str | Path) -> GroundingArtifact:
    """Read and validate an artifact.

    Raises:
        ArtifactError: Missing file, bad YAML, unknown schema version, invalid or inconsistent
            content; the message names the file and key.

    """
    try:
        # The checks every reader shares (version, sections, finite numbers), then the schema.
        data = read_artifact(path)
    except ConfigError as error:
        raise ArtifactError(str(error)) from None
    try:
        return GroundingArtifact.model_validate(data, context={CHECK_OVERRIDES: True})
    except ValidationError as error:
        raise ArtifactError(format_validation_error(error, str(path))) from None


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
        pose=pose_value(T_world_element, "world", child_frame or f"{registration.name}_link"),
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
