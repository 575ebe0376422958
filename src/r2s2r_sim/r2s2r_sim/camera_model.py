"""Pinhole + Brown-Conrady camera model in NumPy/OpenCV: projection, image distortion, blur.

The simulator renders an ideal pinhole image with square pixels and a centred principal point
(all a MuJoCo camera supports through ``fovy``), then :class:`ImageWarp` resamples it once into
the configured camera: focal lengths ``fx``/``fy``, principal point ``cx``/``cy`` and lens
distortion ``(k1, k2, p1, p2, k3)``, so the output obeys :func:`project_points` exactly (up to
interpolation). Pixel convention (OpenCV): pixel centres at integer coordinates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
Distortion = tuple[float, float, float, float, float]
NO_DISTORTION: Distortion = (0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics (OpenCV convention).

    Attributes:
        width_px: Image width.
        height_px: Image height.
        fx_px: Focal length along x.
        fy_px: Focal length along y.
        cx_px: Principal point x.
        cy_px: Principal point y.

    """

    width_px: int
    height_px: int
    fx_px: float
    fy_px: float
    cx_px: float
    cy_px: float

    def matrix(self) -> FloatArray:
        """Return the 3x3 camera matrix K."""
        return np.array(
            [[self.fx_px, 0.0, self.cx_px], [0.0, self.fy_px, self.cy_px], [0.0, 0.0, 1.0]]
        )


def distort_normalized(points_xy: FloatArray, distortion: Sequence[float]) -> FloatArray:
    """Apply Brown-Conrady distortion to normalized image coordinates (N, 2)."""
    k1, k2, p1, p2, k3 = (float(c) for c in distortion)
    x, y = points_xy[:, 0], points_xy[:, 1]
    r2 = x * x + y * y
    radial = 1.0 + k1 * r2 + k2 * r2 * r2 + k3 * r2 * r2 * r2
    x_d = x * radial + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x)
    y_d = y * radial + p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y
    return np.stack([x_d, y_d], axis=1)


def undistort_normalized(
    points_xy: FloatArray, distortion: Sequence[float], iterations: int = 20
) -> FloatArray:
    """Invert :func:`distort_normalized` by fixed-point iteration (as OpenCV does)."""
    k1, k2, p1, p2, k3 = (float(c) for c in distortion)
    x_d, y_d = points_xy[:, 0], points_xy[:, 1]
    x, y = x_d.copy(), y_d.copy()
    for _ in range(iterations):
        r2 = x * x + y * y
        radial = 1.0 + k1 * r2 + k2 * r2 * r2 + k3 * r2 * r2 * r2
        dx = 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x)
        dy = p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y
        x = (x_d - dx) / radial
        y = (y_d - dy) / radial
    return np.stack([x, y], axis=1)


def project_points(
    points_cam: FloatArray, intrinsics: Intrinsics, distortion: Sequence[float] = NO_DISTORTION
) -> FloatArray:
    """Project 3-D points in the optical frame (z forward, x right, y down) to pixels.

    Args:
        points_cam: (N, 3) points in metres, ``z > 0``.
        intrinsics: Camera intrinsics.
        distortion: ``(k1, k2, p1, p2, k3)``.

    Returns:
        (N, 2) pixel coordinates ``(u, v)``.

    Raises:
        ValueError: If a point is not in front of the camera.

    """
    points = np.asarray(points_cam, dtype=float).reshape(-1, 3)
    if np.any(points[:, 2] <= 0.0):
        raise ValueError("project_points: every point needs z > 0 (in front of the camera)")
    normalized = points[:, :2] / points[:, 2:3]
    distorted = distort_normalized(normalized, distortion)
    return np.stack(
        [
            intrinsics.fx_px * distorted[:, 0] + intrinsics.cx_px,
            intrinsics.fy_px * distorted[:, 1] + intrinsics.cy_px,
        ],
        axis=1,
    )


def blur(image: NDArray[np.uint8], sigma_px: float) -> NDArray[np.uint8]:
    """Gaussian blur with standard deviation ``sigma_px`` (identity for 0)."""
    if sigma_px <= 0.0:
        return image
    blurred = cv2.GaussianBlur(image, (0, 0), sigmaX=sigma_px, sigmaY=sigma_px)
    return np.asarray(blurred, dtype=np.uint8)


class ImageWarp:
    """Resample an ideal centred square-pixel render into the configured camera.

    The render camera has focal length :attr:`render_focal_px` (square pixels) and principal
    point at the image centre; choose its vertical field of view with :attr:`render_fovy_deg`.
    The render focal length is chosen so the render covers every ray the target camera sees.

    Args:
        intrinsics: The target camera.
        distortion: Target lens distortion ``(k1, k2, p1, p2, k3)``.

    """

    def __init__(self, intrinsics: Intrinsics, distortion: Sequence[float] = NO_DISTORTION):
        self.intrinsics = intrinsics
        self.distortion: Distortion = tuple(float(c) for c in distortion)  # type: ignore[assignment]
        width, height = intrinsics.width_px, intrinsics.height_px
        u, v = np.meshgrid(np.arange(width, dtype=float), np.arange(height, dtype=float))
        distorted = np.stack(
            [
                (u.ravel() - intrinsics.cx_px) / intrinsics.fx_px,
                (v.ravel() - intrinsics.cy_px) / intrinsics.fy_px,
            ],
            axis=1,
        )
        rays = undistort_normalized(distorted, self.distortion)
        half_w, half_h = (width - 1) / 2.0, (height - 1) / 2.0
        # Cover all rays (plus half a pixel) with a centred square-pixel render of the same size.
        needed_x = float(np.max(np.abs(rays[:, 0])))
        needed_y = float(np.max(np.abs(rays[:, 1])))
        self.render_focal_px = min(
            (half_w - 0.5) / max(needed_x, 1e-9), (half_h - 0.5) / max(needed_y, 1e-9)
        )
        self.identity = bool(
            np.allclose(self.distortion, 0.0)
            and abs(intrinsics.fx_px - intrinsics.fy_px) < 1e-9
            and abs(intrinsics.cx_px - half_w) < 1e-9
            and abs(intrinsics.cy_px - half_h) < 1e-9
        )
        if self.identity:
            self.render_focal_px = intrinsics.fy_px
        self.map_x = (self.render_focal_px * rays[:, 0] + half_w).reshape(height, width)
        self.map_y = (self.render_focal_px * rays[:, 1] + half_h).reshape(height, width)
        self._map_x32 = self.map_x.astype(np.float32)
        self._map_y32 = self.map_y.astype(np.float32)

    @property
    def render_fovy_deg(self) -> float:
        """Vertical field of view of the ideal render (MuJoCo ``fovy``)."""
        half_h = self.intrinsics.height_px / 2.0
        return math.degrees(2.0 * math.atan(half_h / self.render_focal_px))

    def apply(self, image: NDArray[Any], nearest: bool = False) -> NDArray[Any]:
        """Warp a render (H x W or H x W x C) into the target camera's image.

        Args:
            image: The ideal render.
            nearest: Nearest-neighbour sampling (for depth, so edges do not mix depths).

        Returns:
            The warped image, same dtype and channel count (the input itself when the target
            camera is the ideal one).

        """
        if self.identity:
            return image
        interpolation = cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR
        warped = cv2.remap(
            image, self._map_x32, self._map_y32, interpolation, borderMode=cv2.BORDER_REPLICATE
        )
        return np.asarray(warped, dtype=image.dtype)
