"""Small rigid-transform helpers shared by the solvers (4x4 homogeneous matrices, metres, rad).

Naming: ``T_a_b`` is the pose of frame ``b`` expressed in frame ``a`` (maps points from ``b``
to ``a``). Roll-pitch-yaw follow REP 103: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``. The inverse
of a pose is the workspace's one :func:`r2s2r_description.transforms.invert_transform`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.spatial.transform import Rotation

FloatArray = npt.NDArray[np.float64]


def make_pose(rotation: npt.ArrayLike, translation_m: npt.ArrayLike) -> FloatArray:
    """Build a 4x4 pose from a 3x3 rotation matrix and a translation (m)."""
    pose = np.eye(4)
    pose[:3, :3] = np.asarray(rotation, dtype=float).reshape(3, 3)
    pose[:3, 3] = np.asarray(translation_m, dtype=float).reshape(3)
    return pose


def pose_from_xyz_rpy(xyz_m: npt.ArrayLike, rpy_rad: npt.ArrayLike) -> FloatArray:
    """Build a 4x4 pose from a translation (m) and REP-103 roll, pitch, yaw (rad)."""
    rotation = Rotation.from_euler("xyz", np.asarray(rpy_rad, dtype=float)).as_matrix()
    return make_pose(rotation, xyz_m)


def xyz_rpy_from_pose(pose: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Split a 4x4 pose into translation (m) and REP-103 roll, pitch, yaw (rad)."""
    matrix = np.asarray(pose, dtype=float)
    rpy = Rotation.from_matrix(matrix[:3, :3]).as_euler("xyz")
    return matrix[:3, 3].copy(), np.asarray(rpy, dtype=float)


def pose_from_rvec_tvec(rvec: npt.ArrayLike, tvec: npt.ArrayLike) -> FloatArray:
    """Build a 4x4 pose from an OpenCV Rodrigues vector and translation."""
    rotation = Rotation.from_rotvec(np.asarray(rvec, dtype=float).reshape(3)).as_matrix()
    return make_pose(rotation, np.asarray(tvec, dtype=float).reshape(3))


def rvec_tvec_from_pose(pose: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Split a 4x4 pose into an OpenCV Rodrigues vector and a translation."""
    matrix = np.asarray(pose, dtype=float)
    return Rotation.from_matrix(matrix[:3, :3]).as_rotvec(), matrix[:3, 3].copy()


def rotation_angle_rad(rotation: npt.ArrayLike) -> float:
    """Angle (rad, in [0, pi]) of a 3x3 rotation matrix."""
    matrix = np.asarray(rotation, dtype=float)
    cos_angle = np.clip((np.trace(matrix) - 1.0) / 2.0, -1.0, 1.0)
    return float(np.arccos(cos_angle))


def pose_error(estimate: npt.ArrayLike, truth: npt.ArrayLike) -> tuple[float, float]:
    """Return the translation error (m) and rotation error (rad) between two 4x4 poses."""
    est = np.asarray(estimate, dtype=float)
    ref = np.asarray(truth, dtype=float)
    translation_error_m = float(np.linalg.norm(est[:3, 3] - ref[:3, 3]))
    rotation_error_rad = rotation_angle_rad(est[:3, :3].T @ ref[:3, :3])
    return translation_error_m, rotation_error_rad


def look_at_pose(eye_m: npt.ArrayLike, target_m: npt.ArrayLike, up: npt.ArrayLike) -> FloatArray:
    """Pose of an optical frame (z forward, x right, y down) at ``eye_m`` looking at ``target_m``.

    Args:
        eye_m: Camera position in the parent frame (m).
        target_m: Point the optical axis passes through (m).
        up: Approximate "up" direction in the parent frame; image y points against it.

    Returns:
        ``T_parent_optical``.

    """
    eye = np.asarray(eye_m, dtype=float)
    z_axis = np.asarray(target_m, dtype=float) - eye
    z_axis /= np.linalg.norm(z_axis)
    x_axis = np.cross(z_axis, -np.asarray(up, dtype=float))
    x_axis /= np.linalg.norm(x_axis)
    y_axis = np.cross(z_axis, x_axis)
    return make_pose(np.column_stack([x_axis, y_axis, z_axis]), eye)
