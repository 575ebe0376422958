"""Camera model and rigid-transform helpers of the tracker (NumPy/OpenCV, no ROS).

Conventions: 4x4 homogeneous transforms ``T_a_b`` map points of frame ``b`` into frame ``a``;
quaternions are ``(x, y, z, w)`` as in geometry_msgs; the optical frame is REP 103 (z forward,
x right, y down); pixel centres at integer coordinates (OpenCV).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


class CameraModelError(ValueError):
    """Camera intrinsics that cannot be used (non-positive focal length, wrong sizes)."""


@dataclass(frozen=True)
class CameraModel:
    """Pinhole camera with plumb-bob (Brown-Conrady) distortion, as camera_info gives it.

    Attributes:
        width_px: Image width.
        height_px: Image height.
        camera_matrix: 3x3 K.
        distortion: ``(k1, k2, p1, p2[, k3, ...])`` OpenCV order (may be empty).

    """

    width_px: int
    height_px: int
    camera_matrix: FloatArray
    distortion: FloatArray = field(default_factory=lambda: np.zeros(5))

    def __post_init__(self) -> None:
        k = np.asarray(self.camera_matrix, dtype=float)
        if k.shape != (3, 3):
            raise CameraModelError(f"camera_matrix shape {k.shape}: expected (3, 3)")
        if k[0, 0] <= 0.0 or k[1, 1] <= 0.0:
            raise CameraModelError(f"focal lengths fx={k[0, 0]}, fy={k[1, 1]}: expected > 0")
        if self.width_px <= 0 or self.height_px <= 0:
            raise CameraModelError(
                f"image size {self.width_px}x{self.height_px}: expected positive width and height"
            )
        object.__setattr__(self, "camera_matrix", k)
        object.__setattr__(self, "distortion", np.asarray(self.distortion, dtype=float).ravel())

    @staticmethod
    def from_intrinsics(
        width_px: int,
        height_px: int,
        fx_px: float,
        fy_px: float,
        cx_px: float,
        cy_px: float,
        distortion: Sequence[float] = (),
    ) -> CameraModel:
        """Build a model from focal lengths, principal point and distortion coefficients."""
        k = np.array([[fx_px, 0.0, cx_px], [0.0, fy_px, cy_px], [0.0, 0.0, 1.0]])
        return CameraModel(width_px, height_px, k, np.asarray(distortion, dtype=float))

    def key(self) -> tuple[float, ...]:
        """Hashable identity (size, K, distortion) for caches."""
        return (
            float(self.width_px),
            float(self.height_px),
            *self.camera_matrix.ravel().tolist(),
            *self.distortion.tolist(),
        )

    def pixel_rays(self) -> FloatArray:
        """Undistorted normalised rays ``(x, y)`` of every pixel centre, shape (H, W, 2).

        A pixel at depth ``z`` (along the optical axis) is at ``(x z, y z, z)``.
        """
        u, v = np.meshgrid(
            np.arange(self.width_px, dtype=np.float64), np.arange(self.height_px, dtype=np.float64)
        )
        pixels = np.stack([u.ravel(), v.ravel()], axis=1).reshape(-1, 1, 2)
        if self.distortion.size and np.any(self.distortion != 0.0):
            rays = cv2.undistortPoints(
                pixels,
                self.camera_matrix,
                self.distortion,
                criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 50, 1e-10),
            ).reshape(-1, 2)
        else:
            k = self.camera_matrix
            y = (pixels[:, 0, 1] - k[1, 2]) / k[1, 1]
            x = (pixels[:, 0, 0] - k[0, 2] - k[0, 1] * y) / k[0, 0]
            rays = np.stack([x, y], axis=1)
        return np.asarray(rays, dtype=np.float64).reshape(self.height_px, self.width_px, 2)


def quat_to_matrix(quat_xyzw: Sequence[float]) -> FloatArray:
    """Convert a quaternion ``(x, y, z, w)`` (normalised here) to a 3x3 rotation matrix.

    Raises:
        ValueError: For a zero quaternion.

    """
    q = np.asarray(quat_xyzw, dtype=float)
    norm = float(np.linalg.norm(q))
    if norm < 1e-12:
        raise ValueError(f"quaternion {list(q)}: zero norm, expected a unit quaternion")
    x, y, z, w = q / norm
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quat(rotation: FloatArray) -> FloatArray:
    """3x3 rotation matrix to a unit quaternion ``(x, y, z, w)`` with ``w >= 0``."""
    m = np.asarray(rotation, dtype=float)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0.0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = [(m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s]
    quat = np.asarray(q) / np.linalg.norm(q)
    return quat if quat[3] >= 0.0 else -quat


def make_transform(translation_m: Sequence[float], rotation: FloatArray) -> FloatArray:
    """Homogeneous 4x4 transform from a translation and a 3x3 rotation."""
    transform = np.eye(4)
    transform[:3, :3] = rotation
    transform[:3, 3] = np.asarray(translation_m, dtype=float)
    return transform


def invert_transform(transform: FloatArray) -> FloatArray:
    """Inverse of a rigid 4x4 transform."""
    inverse = np.eye(4)
    rotation = transform[:3, :3]
    inverse[:3, :3] = rotation.T
    inverse[:3, 3] = -rotation.T @ transform[:3, 3]
    return inverse


def rot_z(angle_rad: float) -> FloatArray:
    """Rotation about z by ``angle_rad``."""
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def wrap_angle(angle_rad: float, period_rad: float = 2.0 * np.pi) -> float:
    """Wrap an angle into ``[-period/2, period/2)`` (``period`` = symmetry of the shape)."""
    return float((angle_rad + period_rad / 2.0) % period_rad - period_rad / 2.0)
