"""World parameters: one typed schema for everything grounding recovers and evaluation shifts.

The nominal world (``config/world/nominal.yaml``) is the uncalibrated cell: CAD poses,
datasheet intrinsics, default gains. World grounding produces an artifact whose values mirror
this schema (read by :mod:`r2s2r_world.grounding`); :func:`apply_grounding` gives
``nominal + artifact``. The simulator builds its scene from a world; sensing, planning,
calibration and generation read worlds from here, not from the simulator. The real twin
reads its own hidden file (``config/twin/*.yaml``) through the same schema; nothing else may
read that file.

Units are in the names: ``_m``, ``_rad``, ``_px``, ``_s``, ``_hz``, ``_mps``, ``_kg``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigError, ConfigModel, load_config, parse_config
from r2s2r_description.cameras import camera
from r2s2r_description.cell import CellLayout
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.transforms import Pose

SHIFT_NAMES: tuple[str, ...] = ("lighting", "belt_speed", "unseen_object")
"""The evaluation's named shift conditions; every world file must define all of them."""

Vec3 = tuple[float, float, float]


class PoseParams(ConfigModel):
    """A pose: translation (m) and URDF roll-pitch-yaw (rad) of a frame in its parent."""

    xyz_m: Vec3 = Field(description="Translation x, y, z in metres.")
    rpy_rad: Vec3 = Field(default=(0.0, 0.0, 0.0), description="Roll, pitch, yaw in radians.")

    @field_validator("xyz_m")
    @classmethod
    def _check_xyz(cls, value: Vec3) -> Vec3:
        if any(not math.isfinite(v) or abs(v) > 10.0 for v in value):
            raise ValueError(f"expected finite values within ±10 m, got {value}")
        return value

    @field_validator("rpy_rad")
    @classmethod
    def _check_rpy(cls, value: Vec3) -> Vec3:
        if any(not math.isfinite(v) or abs(v) > 2.0 * math.pi for v in value):
            raise ValueError(f"expected angles within ±2π rad, got {value}")
        return value

    def to_pose(self) -> Pose:
        """Return the description's :class:`~r2s2r_description.transforms.Pose`."""
        return Pose(tuple(self.xyz_m), tuple(self.rpy_rad))  # type: ignore[arg-type]


class DistortionParams(ConfigModel):
    """Brown-Conrady lens distortion (OpenCV order k1, k2, p1, p2, k3)."""

    k1: float = Field(default=0.0, ge=-1.0, le=1.0, description="Radial r^2 coefficient.")
    k2: float = Field(default=0.0, ge=-1.0, le=1.0, description="Radial r^4 coefficient.")
    p1: float = Field(default=0.0, ge=-0.05, le=0.05, description="Tangential coefficient 1.")
    p2: float = Field(default=0.0, ge=-0.05, le=0.05, description="Tangential coefficient 2.")
    k3: float = Field(default=0.0, ge=-1.0, le=1.0, description="Radial r^6 coefficient.")

    def as_array(self) -> tuple[float, float, float, float, float]:
        """Coefficients in OpenCV order ``(k1, k2, p1, p2, k3)``."""
        return (self.k1, self.k2, self.p1, self.p2, self.k3)


def check_white_balance(value: Vec3) -> Vec3:
    """Refuse white-balance gains not finite or outside [0.25, 4] (camera and override alike)."""
    if any(not math.isfinite(v) or not 0.25 <= v <= 4.0 for v in value):
        raise ValueError(f"expected gains within [0.25, 4], got {value}")
    return value


class CameraAppearance(ConfigModel):
    """What a real camera does to light after the lens: exposure, colour, noise, tone, codec.

    The defaults are the identity (the look every shipped twin and simulated world had before
    these fields existed: MuJoCo's render, warped and blurred), so a file that names none of
    them renders as before, bit for bit. Applied by :mod:`r2s2r_sim.camera_appearance` in the
    order a camera's pipeline applies them, on linear light (the render decoded with gamma 2.2):
    motion blur, vignetting, exposure (and auto-exposure), white balance and colour crosstalk,
    shot + read noise, the tone curve with its black level, then JPEG (MJPEG transport).
    """

    exposure_ev: float = Field(
        default=0.0,
        ge=-3.0,
        le=3.0,
        description="Exposure offset in stops (2**ev on linear light).",
    )
    auto_exposure: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Auto-exposure strength: 0 fixed exposure; 1 meters every frame to "
        "auto_exposure_target (gain (target / mean luma) ** strength).",
    )
    auto_exposure_target: float = Field(
        default=0.18, gt=0.0, le=1.0, description="Mean linear luma auto-exposure aims at."
    )
    white_balance_rgb: Vec3 = Field(
        default=(1.0, 1.0, 1.0), description="Per-channel gains on linear light (each 0.25..4)."
    )
    crosstalk: float = Field(
        default=0.0,
        ge=0.0,
        le=0.5,
        description="Colour crosstalk c: each channel keeps 1 - c and takes c / 2 from each "
        "other channel (greys stay grey; colours desaturate).",
    )
    gamma: float = Field(
        default=2.2, ge=1.0, le=3.5, description="Encoding gamma of the tone curve (2.2: none)."
    )
    black_level: float = Field(
        default=0.0, ge=0.0, le=0.2, description="Black-level offset / veiling glare (0..1)."
    )
    vignetting: float = Field(
        default=0.0, ge=0.0, le=0.9, description="Relative light loss at the image corners."
    )
    shot_noise: float = Field(
        default=0.0, ge=0.0, le=0.2, description="Shot-noise std at full scale (linear light)."
    )
    read_noise: float = Field(
        default=0.0, ge=0.0, le=0.1, description="Read-noise std (linear light, per channel)."
    )
    motion_blur_px: float = Field(
        default=0.0, ge=0.0, le=10.0, description="Horizontal smear during the exposure (px)."
    )
    jpeg_quality: int = Field(
        default=0, ge=0, le=100, description="MJPEG quality 1..100 of the transport; 0: none."
    )

    _gains = field_validator("white_balance_rgb")(check_white_balance)

    def is_identity(self) -> bool:
        """Return True when the camera adds nothing to the render (the defaults)."""
        return self == IDENTITY_APPEARANCE


IDENTITY_APPEARANCE = CameraAppearance()
"""The look of a camera that adds nothing (built once: checked at every rendered frame)."""


class CameraParams(ConfigModel):
    """One camera: pinhole intrinsics, distortion, blur, mount pose and rate.

    Pixel convention (OpenCV): pixel ``(u, v)`` has its centre at integer coordinates, so a
    centred principal point of a 128-px image is ``63.5``.
    """

    width_px: int = Field(ge=16, le=4096, description="Image width.")
    height_px: int = Field(ge=16, le=4096, description="Image height.")
    fx_px: float = Field(gt=1.0, le=100000.0, description="Focal length along x in pixels.")
    fy_px: float = Field(gt=1.0, le=100000.0, description="Focal length along y in pixels.")
    cx_px: float = Field(description="Principal point x in pixels (inside the image).")
    cy_px: float = Field(description="Principal point y in pixels (inside the image).")
    distortion: DistortionParams = Field(default_factory=DistortionParams)
    blur_sigma_px: float = Field(default=0.0, ge=0.0, le=10.0, description="Gaussian blur σ.")
    pose: PoseParams = Field(
        description="Pose of <camera>_link (REP 103, x forward): head camera in world, "
        "hand camera in palm_link. The optical frame is fixed relative to it."
    )
    rate_hz: float = Field(default=10.0, gt=0.0, le=120.0, description="Frame rate.")
    depth_far_m: float = Field(default=4.0, gt=0.1, le=50.0, description="Depth clip distance.")
    appearance: CameraAppearance = Field(
        default_factory=CameraAppearance,
        description="Exposure, colour, noise, tone and codec of the camera (default: none).",
    )

    @model_validator(mode="after")
    def _principal_point_inside(self) -> CameraParams:
        if not 0.0 <= self.cx_px <= self.width_px - 1:
            raise ValueError(f"cx_px = {self.cx_px}: expected within [0, {self.width_px - 1}]")
        if not 0.0 <= self.cy_px <= self.height_px - 1:
            raise ValueError(f"cy_px = {self.cy_px}: expected within [0, {self.height_px - 1}]")
        return self


class CamerasParams(ConfigModel):
    """The two cameras of the cell."""

    head: CameraParams = Field(description="Head camera (RGB + depth), pose in world.")
    hand: CameraParams = Field(description="Hand camera on the palm, pose in palm_link.")


class RobotParams(ConfigModel):
    """Robot mounting."""

    base_pose: PoseParams = Field(description="base_link in world.")


class JointGains(ConfigModel):
    """PD gains of one joint's position servo (ros2_control-style controller + drive)."""

    kp: float = Field(gt=0.0, le=100000.0, description="Stiffness in N·m/rad.")
    kd: float = Field(ge=0.0, le=10000.0, description="Damping in N·m·s/rad.")


class ControllerParams(ConfigModel):
    """Joint trajectory controllers on arm and hand."""

    gains: dict[str, JointGains] = Field(description="Gains per joint; every joint required.")
    latency_s: float = Field(
        default=0.0, ge=0.0, le=0.5, description="Delay from command to execution."
    )

    @field_validator("gains")
    @classmethod
    def _all_joints(cls, value: dict[str, JointGains]) -> dict[str, JointGains]:
        unknown = sorted(set(value) - set(ALL_JOINT_NAMES))
        missing = [name for name in ALL_JOINT_NAMES if name not in value]
        if unknown:
            raise ValueError(f"unknown joints {unknown}; expected names from {ALL_JOINT_NAMES}")
        if missing:
            raise ValueError(f"missing joints {missing}")
        return value


class BeltParams(ConfigModel):
    """The conveyor belt."""

    pose: PoseParams = Field(description="belt_link (top surface centre, x = travel) in world.")
    speed_mps: float = Field(ge=0.0, le=1.0, description="Belt surface speed along belt x.")
    roller_radius_m: float = Field(
        gt=0.005, le=0.5, description="Encoder roller radius: angle = travel / radius."
    )


class BinParams(ConfigModel):
    """A sorting bin."""

    pose: PoseParams = Field(description="<bin>_link (outer bottom centre) in world.")


class ObjectType(ConfigModel):
    """A kind of object that arrives on the belt.

    ``size_m`` is the full bounding box (x, y, z): a cylinder's x and y are its diameter and z
    its height; a sphere's three values are its diameter.
    """

    shape: Literal["box", "cylinder", "sphere"] = Field(description="Primitive shape.")
    size_m: Vec3 = Field(description="Full extents x, y, z in metres.")
    mass_kg: float = Field(gt=0.0, le=5.0, description="Mass.")
    friction: float = Field(gt=0.0, le=3.0, description="Sliding friction coefficient.")
    rgba: tuple[float, float, float, float] = Field(description="Colour, each in [0, 1].")
    target_bin: str = Field(description="Name of the bin this type belongs in.")

    @field_validator("size_m")
    @classmethod
    def _check_size(cls, value: Vec3) -> Vec3:
        if any(not 0.005 <= v <= 0.3 for v in value):
            raise ValueError(f"expected each extent within [0.005, 0.3] m, got {value}")
        return value

    @field_validator("rgba")
    @classmethod
    def _check_rgba(
        cls, value: tuple[float, float, float, float]
    ) -> tuple[float, float, float, float]:
        if any(not 0.0 <= v <= 1.0 for v in value):
            raise ValueError(f"expected each channel within [0, 1], got {value}")
        return value

    @model_validator(mode="after")
    def _shape_consistent(self) -> ObjectType:
        x, y, z = self.size_m
        if self.shape == "cylinder" and abs(x - y) > 1e-9:
            raise ValueError(f"cylinder size_m x and y are its diameter and must match: {x} != {y}")
        if self.shape == "sphere" and not (abs(x - y) < 1e-9 and abs(x - z) < 1e-9):
            raise ValueError(f"sphere size_m must be three equal diameters, got {self.size_m}")
        return self


class LightingParams(ConfigModel):
    """One directional light plus ambient."""

    diffuse: float = Field(ge=0.0, le=2.0, description="Directional light intensity.")
    ambient: float = Field(ge=0.0, le=1.0, description="Ambient intensity.")
    specular: float = Field(default=0.1, ge=0.0, le=1.0, description="Specular intensity.")
    direction: Vec3 = Field(description="Light direction in world (need not be unit).")

    @field_validator("direction")
    @classmethod
    def _non_zero(cls, value: Vec3) -> Vec3:
        if math.hypot(*value) < 1e-6:
            raise ValueError(f"expected a non-zero direction, got {value}")
        return value


class PhysicsParams(ConfigModel):
    """Integration and control timing."""

    timestep_s: float = Field(default=0.002, ge=0.0002, le=0.01, description="Physics step.")
    control_rate_hz: float = Field(
        default=500.0, gt=0.0, le=5000.0, description="Controller update rate."
    )

    @model_validator(mode="after")
    def _divides(self) -> PhysicsParams:
        ratio = 1.0 / (self.control_rate_hz * self.timestep_s)
        if ratio < 1.0 - 1e-9 or abs(ratio - round(ratio)) > 1e-6:
            raise ValueError(
                f"control_rate_hz = {self.control_rate_hz}: expected 1 / (k · timestep_s) "
                f"for an integer k ≥ 1 (timestep_s = {self.timestep_s})"
            )
        return self

    @property
    def steps_per_control(self) -> int:
        """Physics steps per controller update."""
        return round(1.0 / (self.control_rate_hz * self.timestep_s))


class TaskParams(ConfigModel):
    """The sorting task and its success predicate."""

    objects_per_trial: int = Field(default=1, ge=1, le=10, description="Objects per trial.")
    trial_timeout_s: float = Field(default=25.0, gt=0.0, le=600.0, description="Trial limit.")
    spawn_x_m: float = Field(
        default=-0.7, ge=-5.0, le=5.0, description="Where objects appear, along belt x."
    )
    lift_height_m: float = Field(
        default=0.03, gt=0.0, le=0.5, description="Height above the belt that counts as lifted."
    )
    rest_speed_mps: float = Field(
        default=0.02, gt=0.0, le=1.0, description="Below this speed an object is at rest."
    )
    settle_time_s: float = Field(
        default=0.3, ge=0.0, le=10.0, description="Time at rest before an outcome is final."
    )


FloatRange = tuple[float, float]


class RandomizationRanges(ConfigModel):
    """Per-trial randomization for generation (uniform ranges, lo ≤ hi)."""

    lateral_offset_m: FloatRange = Field(description="Object offset across the belt (belt y).")
    arrival_time_s: FloatRange = Field(description="First object's arrival after trial start.")
    arrival_gap_s: FloatRange = Field(
        default=(3.0, 5.0), description="Gap between consecutive objects' arrivals."
    )
    yaw_rad: FloatRange = Field(default=(-math.pi, math.pi), description="Object yaw on belt.")
    belt_speed_mps: FloatRange = Field(description="Belt speed range when randomized.")
    object_mix: dict[str, float] = Field(description="Sampling weight per object type (≥ 0).")

    @field_validator("lateral_offset_m", "arrival_time_s", "arrival_gap_s", "yaw_rad")
    @classmethod
    def _ordered(cls, value: FloatRange) -> FloatRange:
        if value[0] > value[1]:
            raise ValueError(f"expected lo ≤ hi, got {value}")
        return value

    @field_validator("belt_speed_mps")
    @classmethod
    def _speed_range(cls, value: FloatRange) -> FloatRange:
        if value[0] > value[1] or value[0] < 0.0 or value[1] > 1.0:
            raise ValueError(f"expected 0 ≤ lo ≤ hi ≤ 1 m/s, got {value}")
        return value

    @field_validator("object_mix")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        if any(w < 0.0 for w in value.values()) or sum(value.values()) <= 0.0:
            raise ValueError(f"expected non-negative weights with a positive sum, got {value}")
        return value


class WorldParams(ConfigModel):
    """Everything about the cell that grounding recovers and the evaluation shifts."""

    schema_version: Literal[1] = Field(default=1, description="Schema version of this file.")
    physics: PhysicsParams = Field(default_factory=PhysicsParams)
    cameras: CamerasParams
    robot: RobotParams
    controller: ControllerParams
    belt: BeltParams
    bins: dict[str, BinParams] = Field(description="Sorting bins by name.")
    objects: dict[str, ObjectType] = Field(description="Object types by name.")
    lighting: LightingParams
    task: TaskParams = Field(default_factory=TaskParams)
    randomization: RandomizationRanges
    shifts: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Named evaluation shift conditions, each an override of this world.",
    )

    @model_validator(mode="after")
    def _cross_references(self) -> WorldParams:
        if not 2 <= len(self.bins) <= 6:
            raise ValueError(f"bins: expected 2 to 6 bins, got {len(self.bins)}")
        for name, obj in self.objects.items():
            if obj.target_bin not in self.bins:
                raise ValueError(
                    f"objects.{name}.target_bin = {obj.target_bin!r}: expected one of "
                    f"{sorted(self.bins)}"
                )
        unknown = sorted(set(self.randomization.object_mix) - set(self.objects))
        if unknown:
            raise ValueError(
                f"randomization.object_mix: unknown object types {unknown}; "
                f"expected names from {sorted(self.objects)}"
            )
        return self

    def layout(self) -> CellLayout:
        """Return the cell placements of this world, for :mod:`r2s2r_description`."""
        return CellLayout(
            base_pose=self.robot.base_pose.to_pose(),
            belt_pose=self.belt.pose.to_pose(),
            bin_poses={name: b.pose.to_pose() for name, b in self.bins.items()},
            head_camera_pose=self.cameras.head.pose.to_pose(),
            hand_camera_pose=self.cameras.hand.pose.to_pose(),
        )

    def joint_gains(self) -> dict[str, tuple[float, float]]:
        """``(kp, kd)`` per joint."""
        return {name: (g.kp, g.kd) for name, g in self.controller.gains.items()}


def camera_params(world: WorldParams, camera_name: str) -> CameraParams:
    """Return the parameters of the cell camera ``camera_name`` (``head_camera``, ...) in ``world``.

    Raises:
        r2s2r_description.cameras.UnknownCameraError: For a name that is none of the cell's
            cameras (a ``ValueError``; the message names them).

    """
    params = getattr(world.cameras, camera(camera_name).world_key)
    if not isinstance(params, CameraParams):  # a world key that CamerasParams does not hold
        raise TypeError(f"WorldParams.cameras has no camera {camera_name!r}")
    return params


def deep_override(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively override ``base`` with ``override``: mappings merge, anything else replaces.

    Neither input is modified.
    """
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_override(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _validate_world(data: Any, source: str) -> WorldParams:
    world = parse_config(WorldParams, data, source)
    missing = [name for name in SHIFT_NAMES if name not in world.shifts]
    if missing:
        raise ConfigError(f"{source}: shifts: missing shift conditions {missing}")
    for name, override in world.shifts.items():
        try:
            parse_config(
                WorldParams,
                deep_override(world.model_dump(mode="python", exclude={"shifts"}), override),
                f"{source}: shifts.{name}",
            )
        except ConfigError as error:
            raise ConfigError(str(error)) from None
    return world


def load_world(path: str | Path) -> WorldParams:
    """Load and validate a world file.

    Args:
        path: YAML file in the :class:`WorldParams` schema.

    Returns:
        The validated world, including its shift definitions (each checked as a full world).

    Raises:
        ConfigError: Missing file, bad YAML, unknown key, value out of range, bad cross
            reference or missing shift; the message names file, key, value and expectation.

    """
    world = load_config(WorldParams, path)
    return _validate_world(world.model_dump(mode="python"), str(path))


def apply_shift(world: WorldParams, name: str) -> WorldParams:
    """Return the world under the named evaluation shift condition.

    Args:
        world: The base world.
        name: One of the world's ``shifts`` (at least :data:`SHIFT_NAMES`).

    Raises:
        ConfigError: Unknown shift name or an override that makes the world invalid.

    """
    if name not in world.shifts:
        raise ConfigError(f"shift {name!r}: unknown; expected one of {sorted(world.shifts)}")
    merged = deep_override(world.model_dump(mode="python"), world.shifts[name])
    return parse_config(WorldParams, merged, f"shift {name!r}")


def apply_grounding(nominal: WorldParams, artifact: Mapping[str, Any]) -> WorldParams:
    """``nominal + artifact``: the grounded world.

    Args:
        nominal: The uncalibrated world.
        artifact: Overrides mirroring :class:`WorldParams` (nested mappings; e.g.
            ``{"cameras": {"head": {"fx_px": 123.4}}, "belt": {"speed_mps": 0.104}}``).
            Mappings merge key by key, so an artifact may carry only what it recovered.

    Raises:
        ConfigError: Unknown keys or invalid values, named with their dotted key.

    """
    merged = deep_override(nominal.model_dump(mode="python"), artifact)
    return parse_config(WorldParams, merged, "grounding artifact")
