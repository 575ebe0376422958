"""The grounding artifact's records: the schema every reader validates (no ROS, no solver).

World grounding (:mod:`r2s2r_calibration.artifact`) builds these records and writes them;
:func:`r2s2r_world.grounding.check_artifact` validates a file against them (and
``world_overrides`` against :class:`WorldOverrides`, a partial
:class:`~r2s2r_world.world.WorldParams`), so every consumer of an artifact runs the same full
check without depending on the calibration package. A pose's rotation is roll-pitch-yaw (3
numbers); a quaternion is not part of the schema.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BeforeValidator, Field, field_validator
from r2s2r_common.config import ConfigModel
from r2s2r_description.cameras import CAMERAS
from r2s2r_description.transforms import Pose

from r2s2r_world.world import check_white_balance

FloatArray = npt.NDArray[np.float64]

MAX_TRANSLATION_M = 10.0
"""Largest translation of a pose in the cell (m), as WorldParams bounds it."""

CAMERA_POSE_PARENTS: dict[str, str] = {camera.world_key: camera.mount_frame for camera in CAMERAS}
"""Parent frame of each camera's pose in WorldParams."""


def _numbers(count: int) -> BeforeValidator:
    """Accept a list of exactly ``count`` finite numbers (the message says how many it got)."""

    def check(value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
            raise ValueError(f"expected {count} numbers, got {value!r}")
        if len(value) != count:
            raise ValueError(f"expected {count} numbers, got {len(value)}")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int | float):
                raise ValueError(f"expected {count} numbers, got {item!r} among them")
            if not math.isfinite(item):
                raise ValueError(f"expected {count} finite numbers, got {item}")
        return value

    return BeforeValidator(check)


Vec3 = Annotated[tuple[float, float, float], _numbers(3)]
Vec4 = Annotated[tuple[float, float, float, float], _numbers(4)]


def _check_metres(value: tuple[float, float, float]) -> tuple[float, float, float]:
    if any(abs(v) > MAX_TRANSLATION_M for v in value):
        raise ValueError(
            f"expected metres within ±{MAX_TRANSLATION_M:g} m, got {list(value)} (millimetres?)"
        )
    return value


def _check_radians(value: tuple[float, float, float]) -> tuple[float, float, float]:
    if any(abs(v) > 2.0 * math.pi for v in value):
        raise ValueError(f"expected radians within ±2π, got {list(value)} (degrees?)")
    return value


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

    _metres = field_validator("xyz_m")(_check_metres)
    _radians = field_validator("rpy_rad")(_check_radians)

    def matrix(self) -> FloatArray:
        """Return the 4x4 pose."""
        return Pose(self.xyz_m, self.rpy_rad).matrix()

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
    std_px: Vec4 = Field(description="1-sigma of (fx, fy, cx, cy) (px).")
    reprojection_rms_px: float = Field(ge=0.0, description="Board reprojection RMS (px).")
    provenance: Provenance
    interval_95_px: Vec4 | None = Field(
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


class LookRecord(ConfigModel):
    """What grounding measured of a camera's look (``r2s2r_calibration.camera_look``)."""

    white_balance_rgb: tuple[float, float, float] = Field(
        description="Gains on linear RGB relative to green that make a neutral white look as "
        "the camera shows it (the board's white squares)."
    )
    white_balance_std: tuple[float, float, float] = Field(
        description="1-sigma uncertainty of each gain."
    )
    samples: int = Field(ge=0, description="White-square samples over the views.")
    applied: bool = Field(
        description="Whether the grounded world uses the gains (False: neutral within its "
        "tolerance, the simulator's identity is kept)."
    )
    not_measured: list[str] = Field(
        default_factory=list, description="What of the camera's look these views cannot give."
    )
    provenance: Provenance


class CameraRecord(ConfigModel):
    """Everything recovered for one camera (each part optional)."""

    intrinsics: IntrinsicsRecord | None = None
    blur: BlurRecord | None = None
    pose: CameraPoseRecord | None = None
    look: LookRecord | None = None


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
    refinement_refused: str | None = Field(
        None,
        description="Why the hand-camera refinement (grounding step 'bins') refused this "
        "element; its pose is then the registration's. None: refined, or not tried.",
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


# -- world_overrides: a partial WorldParams (what grounding recovers) -----------------------


class PoseOverride(ConfigModel):
    """``pose`` of WorldParams: translation (m) and roll-pitch-yaw (rad), both 3 numbers."""

    xyz_m: Vec3 = Field(description="Translation (m).")
    rpy_rad: Vec3 = Field(description="Roll, pitch, yaw (rad).")

    _metres = field_validator("xyz_m")(_check_metres)
    _radians = field_validator("rpy_rad")(_check_radians)


class DistortionOverride(ConfigModel):
    """Brown-Conrady distortion, OpenCV order."""

    k1: float = 0.0
    k2: float = 0.0
    p1: float = 0.0
    p2: float = 0.0
    k3: float = 0.0


class AppearanceOverride(ConfigModel):
    """``world_overrides.cameras.<c>.appearance``: what grounding measured of a camera's look."""

    white_balance_rgb: Vec3 = Field(
        description="Per-channel gains on linear light (each 0.25..4), from the board's white "
        "squares (r2s2r_calibration.camera_look)."
    )

    _gains = field_validator("white_balance_rgb")(check_white_balance)


class CameraOverride(ConfigModel):
    """``world_overrides.cameras.<head|hand>``: what grounding recovered of one camera."""

    width_px: int | None = Field(None, ge=1, description="Image width (px).")
    height_px: int | None = Field(None, ge=1, description="Image height (px).")
    fx_px: float | None = Field(None, gt=0.0, description="Focal length x (px).")
    fy_px: float | None = Field(None, gt=0.0, description="Focal length y (px).")
    cx_px: float | None = Field(None, description="Principal point x (px).")
    cy_px: float | None = Field(None, description="Principal point y (px).")
    distortion: DistortionOverride | None = None
    blur_sigma_px: float | None = Field(None, ge=0.0, description="Blur sigma (px).")
    appearance: AppearanceOverride | None = None
    pose: PoseOverride | None = None


class BeltOverride(ConfigModel):
    """``world_overrides.belt``."""

    pose: PoseOverride | None = None
    speed_mps: float | None = Field(None, ge=0.0, le=1.0, description="Surface speed (m/s).")
    roller_radius_m: float | None = Field(
        None, description="Encoder roller radius (m), in (0, 0.5] as WorldParams bounds it."
    )

    @field_validator("roller_radius_m")
    @classmethod
    def _radius(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 < value <= 0.5:
            raise ValueError("expected a radius in (0, 0.5] m (metres: millimetres?)")
        return value


class BinOverride(ConfigModel):
    """``world_overrides.bins.<name>``."""

    pose: PoseOverride


class GainsOverride(ConfigModel):
    """``world_overrides.controller.gains.<joint>``."""

    kp: float = Field(gt=0.0, description="Stiffness (N m/rad).")
    kd: float = Field(ge=0.0, description="Damping (N m s/rad).")


class ControllerOverride(ConfigModel):
    """``world_overrides.controller``."""

    gains: dict[str, GainsOverride] | None = None
    latency_s: float | None = Field(None, ge=0.0, le=0.5, description="Command latency (s).")


class WorldOverrides(ConfigModel):
    """``world_overrides``: the part of WorldParams grounding recovers (every key optional)."""

    cameras: dict[Literal["head", "hand"], CameraOverride] = Field(default_factory=dict)
    belt: BeltOverride | None = None
    bins: dict[str, BinOverride] = Field(default_factory=dict)
    controller: ControllerOverride | None = None
