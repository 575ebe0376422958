"""The camera model: a pinhole camera with plumb-bob distortion, as camera_info gives it.

One class, :class:`CameraModel`, for every package that projects or back-projects pixels (the
belt's tracker, the calibration's steps); it is built from a ``sensor_msgs/CameraInfo``'s K, D
and size, from focal lengths and a principal point (:meth:`CameraModel.from_intrinsics`), or
from a camera_calibration file (:meth:`CameraModel.from_calibration`). NumPy/OpenCV, no ROS.

Pixel centres are at integer coordinates (OpenCV); the optical frame is REP 103 (z forward,
x right, y down). The fields are keyword-only, so no construction can swap them silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
from numpy.typing import NDArray

from r2s2r_common.camera_info import CameraCalibration

FloatArray = NDArray[np.float64]


class CameraModelError(ValueError):
    """Camera intrinsics that cannot be used (non-positive focal length, wrong sizes)."""


@dataclass(frozen=True, kw_only=True)
class CameraModel:
    """Pinhole camera with plumb-bob (Brown-Conrady) distortion, as camera_info gives it.

    Attributes:
        width_px: Image width.
        height_px: Image height.
        camera_matrix: 3x3 K (px).
        distortion: ``(k1, k2, p1, p2[, k3, ...])`` OpenCV order (may be empty).

    Raises:
        CameraModelError: K not 3x3, a focal length not positive, or an empty image size.

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
        return CameraModel(
            width_px=width_px,
            height_px=height_px,
            camera_matrix=k,
            distortion=np.asarray(distortion, dtype=float),
        )

    @classmethod
    def from_calibration(cls, calibration: CameraCalibration) -> CameraModel:
        """Return the model of a published calibration (the first five distortion terms).

        Raises:
            CameraModelError: An uncalibrated camera_info (K all zero, what a driver without a
                calibration file publishes, as ROS defines it), named with what to do; or a
                calibration the model's checks refuse.

        """
        if not np.any(calibration.camera_matrix.to_array()):
            raise CameraModelError(
                f"camera_info of {calibration.camera_name or 'the camera'} is uncalibrated "
                "(K all zero: its driver has no calibration file); give the driver one "
                "(calibration_file, e.g. the datasheet intrinsics) before grounding"
            )
        return cls(
            width_px=calibration.image_width,
            height_px=calibration.image_height,
            camera_matrix=calibration.camera_matrix.to_array(),
            distortion=calibration.distortion_coefficients.to_array().reshape(-1)[:5],
        )

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
