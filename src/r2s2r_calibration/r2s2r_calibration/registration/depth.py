"""Depth image (32FC1, metres) to 3-D points in the camera optical frame."""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from r2s2r_calibration.errors import DepthImageError
from r2s2r_calibration.geometry import FloatArray


def depth_to_points(
    depth_m: npt.NDArray[np.float32],
    camera_matrix: npt.ArrayLike,
    distortion: npt.ArrayLike | None = None,
    min_depth_m: float = 0.05,
    max_depth_m: float = 5.0,
    stride: int = 1,
) -> FloatArray:
    """Back-project a depth image (32FC1, metres along the optical axis) to 3-D points.

    Args:
        depth_m: (H, W) float32 depth in metres; NaN, inf and 0 mean "no return".
        camera_matrix: 3x3 K of the depth image (px).
        distortion: Optional (k1, k2, p1, p2, k3) of the depth image.
        min_depth_m: Nearer values are dropped.
        max_depth_m: Farther values are dropped.
        stride: Use every ``stride``-th pixel in both directions.

    Returns:
        (N, 3) points in the camera optical frame (m).

    Raises:
        DepthImageError: On a wrong dtype/shape (e.g. 16UC1 millimetres) or no valid depth.

    """
    if not isinstance(depth_m, np.ndarray):
        raise DepthImageError(f"depth is a {type(depth_m).__name__}; expected a numpy array")
    if depth_m.dtype != np.float32:
        hint = (
            " (looks like 16UC1 millimetres: convert with depth.astype(np.float32) / 1000)"
            if depth_m.dtype == np.uint16
            else ""
        )
        raise DepthImageError(
            f"depth has dtype {depth_m.dtype}; expected float32 metres (32FC1){hint}"
        )
    if depth_m.ndim != 2:
        raise DepthImageError(
            f"depth has shape {depth_m.shape}; expected a single-channel (H, W) image"
        )
    K = np.asarray(camera_matrix, dtype=float)
    height, width = depth_m.shape
    if not (0 <= K[0, 2] < width and 0 <= K[1, 2] < height):
        raise DepthImageError(
            f"principal point ({K[0, 2]:.1f}, {K[1, 2]:.1f}) px lies outside the {width}x"
            f"{height} depth image; the intrinsics belong to another image size"
        )
    v, u = np.mgrid[0:height:stride, 0:width:stride]
    z = depth_m[::stride, ::stride].astype(np.float64)
    valid = np.isfinite(z) & (z > min_depth_m) & (z < max_depth_m)
    if not np.any(valid):
        raise DepthImageError(
            f"depth image has no valid values in ({min_depth_m}, {max_depth_m}) m (all NaN, "
            "inf, zero or out of range); check that the depth stream is the head camera's"
        )
    pixels = np.column_stack([u[valid], v[valid]]).astype(np.float64)
    if distortion is not None and np.any(np.asarray(distortion, dtype=float) != 0):
        normalized = cv2.undistortPoints(
            pixels.reshape(-1, 1, 2), K, np.asarray(distortion, dtype=float)
        ).reshape(-1, 2)
    else:
        normalized = np.column_stack(
            [(pixels[:, 0] - K[0, 2]) / K[0, 0], (pixels[:, 1] - K[1, 2]) / K[1, 1]]
        )
    depth = z[valid]
    return np.column_stack([normalized * depth[:, None], depth])
