"""Vision geometry of the belt from the camera model and the belt pose (no ROS).

The belt surface is the plane z = 0 of ``belt_link`` (x along travel). With the camera's K and
``T_camera_belt`` (the belt pose in the camera's optical frame, e.g. from ``/tf_static``), the
map from undistorted image pixels to belt-plane metres is the homography
``inv(K [r1 r2 t])``; the region of interest is the image of the belt's top surface.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from r2s2r_belt.config import VisionConfig
from r2s2r_belt.vision_speed import apply_homography

FloatArray = npt.NDArray[np.float64]


def image_to_belt_homography(camera_matrix: FloatArray, T_camera_belt: FloatArray) -> FloatArray:
    """Homography from undistorted pixels to belt-plane coordinates (m, belt x/y).

    Raises:
        ValueError: The belt plane passes through the camera centre (seen edge-on).

    """
    K = np.asarray(camera_matrix, dtype=float).reshape(3, 3)
    T = np.asarray(T_camera_belt, dtype=float)
    belt_to_image = K @ np.column_stack([T[:3, 0], T[:3, 1], T[:3, 3]])
    if abs(float(np.linalg.det(belt_to_image))) < 1e-12:
        raise ValueError("the belt plane is seen edge-on from the camera: no homography")
    homography = np.linalg.inv(belt_to_image)
    return np.asarray(homography / homography[2, 2])


def vision_config_from_camera(
    base: VisionConfig,
    camera_matrix: FloatArray,
    distortion: Sequence[float],
    image_size_px: tuple[int, int],
    T_camera_belt: FloatArray,
) -> VisionConfig:
    """Return ``base`` with homography, ROI, K and D from a camera model and the belt pose.

    Args:
        base: Vision settings (belt size, flow parameters, tracked height).
        camera_matrix: 3x3 K (camera_info K).
        distortion: plumb_bob coefficients (camera_info D; empty: none).
        image_size_px: (width, height).
        T_camera_belt: ``belt_link`` in the camera optical frame.

    Raises:
        ValueError: The belt is behind the camera or outside the image.

    """
    K = np.asarray(camera_matrix, dtype=float).reshape(3, 3)
    T = np.asarray(T_camera_belt, dtype=float)
    width, height = image_size_px
    homography = image_to_belt_homography(K, T)
    half_length, half_width = 0.5 * base.belt_length_m, 0.5 * base.belt_width_m
    corners_belt = np.array(
        [[sx * half_length, sy * half_width, 0.0] for sx in (-1, 1) for sy in (-1, 1)]
    )
    in_camera = corners_belt @ T[:3, :3].T + T[:3, 3]
    if np.any(in_camera[:, 2] <= 0.0):
        # Part of the belt is behind the camera: clip the ROI to the visible image instead.
        roi = [0, 0, width, height]
    else:
        corners_px = apply_homography(np.linalg.inv(homography), corners_belt[:, :2])
        x_min, y_min = np.clip(np.floor(corners_px.min(axis=0)), 0, None).astype(int)
        x_max = int(min(np.ceil(corners_px[:, 0].max()), width))
        y_max = int(min(np.ceil(corners_px[:, 1].max()), height))
        if x_min >= x_max or y_min >= y_max:
            raise ValueError(
                f"the belt ({base.belt_length_m} x {base.belt_width_m} m at {base.belt_frame}) "
                f"is outside the {width}x{height} image; check the camera and belt mounts"
            )
        roi = [int(x_min), int(y_min), x_max, y_max]
    return base.model_copy(
        update={
            "image_to_belt_homography": [float(v) for v in homography.ravel()],
            "image_width_px": int(width),
            "image_height_px": int(height),
            "roi_px": roi,
            "camera_matrix": [float(v) for v in K.ravel()],
            "distortion": [float(v) for v in distortion],
        }
    )
