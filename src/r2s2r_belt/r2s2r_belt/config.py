"""Typed configuration of belt-speed estimation (one schema for the core and the node)."""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_description.cameras import HEAD
from r2s2r_world.grounding import grounded_roller_radius_m, load_world_overrides


class EncoderConfig(ConfigModel):
    """Roller-angle encoder (sensor_msgs/JointState position, rad) to belt surface speed."""

    joint_name: str = Field(
        default="", description="JointState entry of the roller; empty uses the first entry."
    )
    roller_radius_m: float = Field(
        default=0.025, gt=0.0, le=1.0, description="Calibrated effective roller radius, m."
    )
    invert: bool = Field(
        default=False, description="True if a positive roller angle moves the belt along -x."
    )
    window_s: float = Field(
        default=0.1, gt=0.0, le=5.0, description="Regression window over roller angles, s."
    )
    angle_noise_rad: float = Field(
        default=0.002, gt=0.0, le=1.0, description="Standard deviation of one angle reading, rad."
    )
    max_speed_mps: float = Field(
        default=2.0, gt=0.0, le=20.0, description="Speeds beyond this are rejected, m/s."
    )
    timeout_s: float = Field(
        default=0.5, gt=0.0, le=10.0, description="No reading for this long: source failed, s."
    )


class VisionConfig(ConfigModel):
    """Belt speed from optical flow on the belt region of the head camera image."""

    image_to_belt_homography: list[float] = Field(
        default_factory=list,
        description="Row-major 3x3 homography image px -> belt plane (x along belt, m), from "
        "calibration; empty disables vision.",
    )
    image_width_px: int = Field(
        default=0, ge=0, le=8192, description="Image width the homography is for; 0 = any."
    )
    image_height_px: int = Field(
        default=0, ge=0, le=8192, description="Image height the homography is for; 0 = any."
    )
    roi_px: list[int] = Field(
        default_factory=list,
        description="Belt region [x_min, y_min, x_max, y_max] in px; empty = whole image.",
    )
    max_features: int = Field(default=150, ge=4, le=5000, description="Features tracked per frame.")
    min_features: int = Field(
        default=15, ge=3, le=5000, description="Fewer agreeing tracks: no estimate (quality flag)."
    )
    feature_quality: float = Field(
        default=0.01, gt=0.0, le=1.0, description="Shi-Tomasi quality level (relative)."
    )
    min_feature_distance_px: float = Field(
        default=8.0, gt=0.0, le=200.0, description="Minimum spacing between features, px."
    )
    flow_window_px: int = Field(
        default=21, ge=5, le=101, description="Lucas-Kanade window size, px."
    )
    pyramid_levels: int = Field(default=3, ge=0, le=8, description="Lucas-Kanade pyramid levels.")
    max_forward_backward_error_px: float = Field(
        default=0.3, gt=0.0, le=10.0, description="Tracks failing the round trip are dropped, px."
    )
    max_cross_track_m: float = Field(
        default=0.002,
        gt=0.0,
        le=1.0,
        description="Tracks moving across the belt (y) more than this per measurement (relative "
        "to the median) are dropped, m.",
    )
    min_baseline_px: float = Field(
        default=4.0,
        gt=0.0,
        le=100.0,
        description="Flow is measured against an older frame so that the expected displacement "
        "is at least this (slow belts move ~1 px per frame: poorly conditioned), px.",
    )
    max_baseline_s: float = Field(
        default=0.5,
        gt=0.0,
        le=5.0,
        description="Longest time between the two frames of a measurement (frame history), s.",
    )
    camera_matrix: list[float] = Field(
        default_factory=list,
        description="Row-major 3x3 K of the camera (camera_info K) the homography was computed "
        "with; needed for distortion and tracked_height_m. Empty: pixels used as they are.",
    )
    distortion: list[float] = Field(
        default_factory=list,
        description="plumb_bob (k1, k2, p1, p2[, k3]) of the camera (camera_info D): tracked "
        "points are undistorted before the homography. Empty: no distortion.",
    )
    tracked_height_m: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Typical height above the belt surface of the tracked texture: 0 for a "
        "textured belt; about half the item height when the flow comes from items (parallax "
        "correction; needs camera_matrix), m.",
    )
    geometry_from_tf: bool = Field(
        default=False,
        description="Compute the homography, ROI, K and D from camera_info and the belt pose in "
        "the camera frame on /tf_static (the grounded mounts when the cell publishes them); "
        "the configured image_to_belt_homography/roi_px/camera_matrix/distortion are ignored.",
    )
    camera_frame: str = Field(
        default=HEAD.optical_frame,
        description="Optical frame of the head camera (used when the image has no frame_id).",
    )
    belt_frame: str = Field(
        default="belt_link", description="Frame of the belt surface (z = 0, x = travel)."
    )
    belt_length_m: float = Field(
        default=1.6, gt=0.0, le=100.0, description="Belt length along x (ROI from tf), m."
    )
    belt_width_m: float = Field(
        default=0.30, gt=0.0, le=10.0, description="Belt width along y (ROI from tf), m."
    )
    max_speed_mps: float = Field(
        default=2.0, gt=0.0, le=20.0, description="Estimates beyond this are rejected, m/s."
    )
    max_frame_gap_s: float = Field(
        default=0.5, gt=0.0, le=10.0, description="Frames further apart restart tracking, s."
    )
    min_variance_mps2: float = Field(
        default=1e-6, gt=0.0, le=1.0, description="Variance floor of a vision estimate, (m/s)^2."
    )
    timeout_s: float = Field(
        default=0.5, gt=0.0, le=10.0, description="No valid estimate for this long: failed, s."
    )

    @field_validator("image_to_belt_homography")
    @classmethod
    def _check_homography(cls, value: list[float]) -> list[float]:
        if value and len(value) != 9:
            raise ValueError(f"needs 9 values (row-major 3x3) or none, got {len(value)}")
        if value and abs(float(np.linalg.det(np.reshape(value, (3, 3))))) < 1e-15:
            raise ValueError("homography is singular")
        return value

    @field_validator("roi_px")
    @classmethod
    def _check_roi(cls, value: list[int]) -> list[int]:
        if value and (len(value) != 4 or value[0] >= value[2] or value[1] >= value[3]):
            raise ValueError(f"needs [x_min, y_min, x_max, y_max] with min < max, got {value}")
        return value

    @field_validator("camera_matrix")
    @classmethod
    def _check_camera_matrix(cls, value: list[float]) -> list[float]:
        if value and (len(value) != 9 or value[0] <= 0.0 or value[4] <= 0.0 or value[8] != 1.0):
            raise ValueError(
                "needs 9 values (row-major 3x3 K with fx, fy > 0 and K[2][2] = 1) or none, "
                f"got {value}"
            )
        return value

    @field_validator("distortion")
    @classmethod
    def _check_distortion(cls, value: list[float]) -> list[float]:
        if value and len(value) not in (4, 5, 8):
            raise ValueError(f"needs 4, 5 or 8 plumb_bob/rational coefficients, got {len(value)}")
        return value

    @model_validator(mode="after")
    def _check_intrinsics_given(self) -> VisionConfig:
        needs_k = self.distortion or self.tracked_height_m > 0.0
        if needs_k and not self.camera_matrix and not self.geometry_from_tf:
            raise ValueError(
                "vision.distortion and vision.tracked_height_m need vision.camera_matrix (the K "
                "the homography was computed with); set it or leave them out"
            )
        return self

    @property
    def enabled(self) -> bool:
        """True when a homography is configured or comes from camera_info and /tf_static."""
        return bool(self.image_to_belt_homography) or self.geometry_from_tf

    def homography(self) -> np.ndarray:
        """Return the 3x3 image -> belt homography.

        Raises:
            ValueError: If none is configured.

        """
        if not self.image_to_belt_homography:
            raise ValueError("vision.image_to_belt_homography: not set (vision disabled)")
        return np.asarray(self.image_to_belt_homography, dtype=float).reshape(3, 3)

    def intrinsics(self) -> np.ndarray | None:
        """Return the 3x3 K, or None when no camera_matrix is configured."""
        if not self.camera_matrix:
            return None
        return np.asarray(self.camera_matrix, dtype=float).reshape(3, 3)


class FilterConfig(ConfigModel):
    """Kalman filter over belt speed with a random-walk speed-change model."""

    speed_random_walk_mps_per_sqrt_s: float = Field(
        default=0.02,
        gt=0.0,
        le=10.0,
        description="Process noise: expected speed change grows with sqrt(time), m/s/sqrt(s).",
    )
    initial_variance_mps2: float = Field(
        default=1.0, gt=0.0, le=100.0, description="Variance before the first reading, (m/s)^2."
    )
    source_timeout_s: float = Field(
        default=0.5, gt=0.0, le=10.0, description="A source counts as used this long, s."
    )
    max_valid_variance_mps2: float = Field(
        default=0.01,
        gt=0.0,
        le=100.0,
        description="Above this variance the estimate is flagged as not valid, (m/s)^2.",
    )


class BeltSpeedConfig(ConfigModel):
    """Parameters of the ``belt_speed`` node."""

    publish_rate_hz: float = Field(
        default=50.0, ge=20.0, le=1000.0, description="Rate of /belt/speed, Hz."
    )
    frame_id: str = Field(default="belt_link", description="Frame of the published twist.")
    diagnostics_period_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="Period of /diagnostics messages, s."
    )
    grounding_artifact: str = Field(
        default="",
        description="Grounding artifact YAML: its belt roller radius (world_overrides.belt."
        "roller_radius_m) replaces encoder.roller_radius_m. Empty: the configured radius.",
    )
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    vision: VisionConfig = Field(default_factory=VisionConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)


def with_grounded_roller_radius(config: BeltSpeedConfig) -> tuple[BeltSpeedConfig, str]:
    """Return the configuration with the roller radius of ``config.grounding_artifact``.

    Returns:
        The (possibly) updated configuration and a sentence saying which radius is used and
        where it comes from (for the node's log and diagnostics).

    Raises:
        ConfigError: The artifact is missing or invalid, or its roller radius is out of range.

    """
    configured = config.encoder.roller_radius_m
    if not config.grounding_artifact:
        return config, f"roller radius {configured:g} m (configured; ungrounded)"
    path = config.grounding_artifact
    try:
        radius = grounded_roller_radius_m(load_world_overrides(path), path)
    except ConfigError as error:
        raise ConfigError(f"belt_speed grounding_artifact: {error}") from None
    if radius is None:
        return config, (
            f"roller radius {configured:g} m (configured: {path} has no belt roller radius)"
        )
    grounded = config.model_copy(
        update={"encoder": config.encoder.model_copy(update={"roller_radius_m": radius})}
    )
    return grounded, f"roller radius {radius:.6g} m (grounded: {path})"
