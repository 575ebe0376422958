"""Synthetic belt sensing data with known truth.

A textured belt seen by a pinhole camera and a quantised, noisy roller encoder. Used by tests
and by the sensing benchmark (a twin-based source can replace it there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

from r2s2r_belt.config import VisionConfig


def look_at_rotation(camera_position_m: np.ndarray, target_m: np.ndarray) -> np.ndarray:
    """Rotation (camera optical -> belt) of a camera at ``camera_position_m`` looking at target.

    Optical axes per REP 103: z forward, x right (kept along belt +x), y down.
    """
    z_axis = target_m - camera_position_m
    z_axis = z_axis / np.linalg.norm(z_axis)
    x_axis = np.array([1.0, 0.0, 0.0]) - z_axis * z_axis[0]
    x_axis = x_axis / np.linalg.norm(x_axis)
    y_axis = np.cross(z_axis, x_axis)
    return np.column_stack([x_axis, y_axis, z_axis])


@dataclass
class SyntheticBeltCamera:
    """A camera above a textured belt moving along belt x.

    Attributes:
        width_px: Image width.
        height_px: Image height.
        focal_px: Focal length.
        camera_position_m: Camera centre in the belt frame (x along belt, z up).
        belt_width_m: Belt width across y; outside is static background.
        texel_m: Texture resolution on the belt.
        texture_length_m: The texture repeats after this length.
        noise_std: Image noise (grey levels).
        seed: Texture and noise seed.

    """

    width_px: int = 640
    height_px: int = 480
    focal_px: float = 600.0
    camera_position_m: tuple[float, float, float] = (0.0, -0.25, 0.7)
    belt_width_m: float = 0.3
    texel_m: float = 0.0005
    texture_length_m: float = 2.0
    noise_std: float = 1.0
    seed: int = 7
    _texture: np.ndarray = field(init=False, repr=False)
    _belt_x_m: np.ndarray = field(init=False, repr=False)
    _belt_y_m: np.ndarray = field(init=False, repr=False)
    _on_belt: np.ndarray = field(init=False, repr=False)
    _background: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        rows = round(self.belt_width_m / self.texel_m)
        cols = round(self.texture_length_m / self.texel_m)
        # Blobs of a few millimetres: trackable at ~1.3 mm per image pixel, without aliasing.
        noise = rng.normal(0.0, 1.0, size=(rows, cols)).astype(np.float32)
        pad = 20  # periodic along the belt: blur a wrapped copy, keep the middle
        padded = np.pad(noise, ((0, 0), (pad, pad)), mode="wrap")
        blurred = cv2.GaussianBlur(padded, (0, 0), sigmaX=5.0)[:, pad:-pad]
        blurred = (blurred - blurred.mean()) / blurred.std()
        self._texture = np.clip(128.0 + 45.0 * blurred, 0, 255).astype(np.float32)
        u, v = np.meshgrid(np.arange(self.width_px), np.arange(self.height_px))
        pixels = np.stack([u.ravel(), v.ravel()], axis=1).astype(float)
        belt = pixels_to_plane(self.image_to_belt_homography(), pixels)
        self._belt_x_m = belt[:, 0].reshape(self.height_px, self.width_px)
        self._belt_y_m = belt[:, 1].reshape(self.height_px, self.width_px)
        self._on_belt = np.abs(self._belt_y_m) < 0.5 * self.belt_width_m
        self._background = rng.uniform(60, 90, size=(self.height_px, self.width_px)).astype(
            np.float32
        )

    @property
    def camera_matrix(self) -> np.ndarray:
        """3x3 intrinsic matrix K."""
        return np.array(
            [
                [self.focal_px, 0.0, (self.width_px - 1) / 2.0],
                [0.0, self.focal_px, (self.height_px - 1) / 2.0],
                [0.0, 0.0, 1.0],
            ]
        )

    def belt_to_image_homography(self) -> np.ndarray:
        """Homography belt plane (x, y in m, z = 0) -> image px."""
        position = np.asarray(self.camera_position_m, dtype=float)
        rotation_belt_from_camera = look_at_rotation(position, np.zeros(3))
        rotation = rotation_belt_from_camera.T
        translation = -rotation @ position
        return self.camera_matrix @ np.column_stack([rotation[:, 0], rotation[:, 1], translation])

    def camera_from_belt(self) -> np.ndarray:
        """``T_camera_belt``: the belt pose in the camera's optical frame (what tf provides)."""
        position = np.asarray(self.camera_position_m, dtype=float)
        belt_from_camera = np.eye(4)
        belt_from_camera[:3, :3] = look_at_rotation(position, np.zeros(3))
        belt_from_camera[:3, 3] = position
        return np.linalg.inv(belt_from_camera)

    def image_to_belt_homography(self) -> np.ndarray:
        """Homography image px -> belt plane (m); what calibration provides."""
        homography = np.linalg.inv(self.belt_to_image_homography())
        return homography / homography[2, 2]

    def belt_roi_px(self, margin_px: int = 20) -> list[int]:
        """[x_min, y_min, x_max, y_max] of image rows fully on the belt, shrunk by a margin."""
        rows = np.where(self._on_belt.all(axis=1))[0]
        return [
            margin_px,
            int(rows.min()) + margin_px,
            self.width_px - margin_px,
            int(rows.max()) - margin_px,
        ]

    def vision_config(self, **overrides: object) -> VisionConfig:
        """Vision estimator settings for this camera: its homography, image size and belt ROI.

        Args:
            overrides: Further :class:`VisionConfig` fields (they win over the camera's).

        Raises:
            pydantic.ValidationError: If an override is not a valid setting.

        """
        settings: dict[str, object] = {
            "image_to_belt_homography": [float(v) for v in self.image_to_belt_homography().ravel()],
            "image_width_px": self.width_px,
            "image_height_px": self.height_px,
            "roi_px": self.belt_roi_px(),
            **overrides,
        }
        return VisionConfig.model_validate(settings)

    def render(self, belt_offset_m: float, frame_index: int = 0) -> np.ndarray:
        """Grey image (uint8) with the belt texture moved by ``belt_offset_m`` along x."""
        offset_texels = (belt_offset_m % self.texture_length_m) / self.texel_m
        map_x = (self._belt_x_m / self.texel_m - offset_texels) % self._texture.shape[1]
        map_y = (self._belt_y_m + 0.5 * self.belt_width_m) / self.texel_m
        belt = cv2.remap(
            self._texture,
            map_x.astype(np.float32),
            map_y.astype(np.float32),
            interpolation=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_WRAP,
        )
        image = np.where(self._on_belt, belt, self._background)
        if self.noise_std > 0:
            rng = np.random.default_rng(self.seed * 100_003 + frame_index)
            image = image + rng.normal(0.0, self.noise_std, size=image.shape)
        return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def pixels_to_plane(homography: np.ndarray, points_px: np.ndarray) -> np.ndarray:
    """Map (N, 2) points through a homography."""
    mapped = np.hstack([points_px, np.ones((len(points_px), 1))]) @ homography.T
    return mapped[:, :2] / mapped[:, 2:3]


@dataclass(frozen=True)
class SpeedProfile:
    """Belt speed over time: ``initial_speed_mps`` until ``step_time_s``, then ``final``."""

    initial_speed_mps: float
    final_speed_mps: float | None = None
    step_time_s: float = math.inf

    def speed_mps(self, time_s: float) -> float:
        """Return the true speed at ``time_s``."""
        if self.final_speed_mps is not None and time_s >= self.step_time_s:
            return self.final_speed_mps
        return self.initial_speed_mps

    def offset_m(self, time_s: float) -> float:
        """Belt travel since t = 0."""
        if self.final_speed_mps is None or time_s < self.step_time_s:
            return self.initial_speed_mps * time_s
        return self.initial_speed_mps * self.step_time_s + self.final_speed_mps * (
            time_s - self.step_time_s
        )


def encoder_samples(
    profile: SpeedProfile,
    duration_s: float,
    rate_hz: float = 100.0,
    roller_radius_m: float = 0.025,
    counts_per_rev: int = 4096,
    noise_rad: float = 0.001,
    seed: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """Roller angle readings wrapped to [-pi, pi), quantised and noisy.

    Returns:
        (stamps_s, angles_rad).

    """
    rng = np.random.default_rng(seed)
    stamps_s = np.arange(0.0, duration_s, 1.0 / rate_hz)
    angles = np.array([profile.offset_m(t) for t in stamps_s]) / roller_radius_m
    step = 2.0 * math.pi / counts_per_rev
    angles = np.round(angles / step) * step + rng.normal(0.0, noise_rad, size=angles.shape)
    return stamps_s, (angles + math.pi) % (2.0 * math.pi) - math.pi
