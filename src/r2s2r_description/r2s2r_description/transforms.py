"""Rigid transforms in NumPy: URDF roll-pitch-yaw, quaternions (w, x, y, z) and 4x4 matrices.

URDF ``rpy`` is the fixed-axis X-Y-Z convention: ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``.

Quaternion arrays are ``(w, x, y, z)`` everywhere in the workspace (MuJoCo's order). ROS
messages name their fields, so a node converts at the message (``(q.w, q.x, q.y, q.z)``); the
one place with the other order is the dataset's ``obs/object_pose`` row
``(x, y, z, qx, qy, qz, qw)``, an on-disk layout shared with SciPy's ``Rotation.as_quat``.

The workspace's one home for rigid-transform algebra (:func:`invert_transform`) and angle
wrapping (:func:`wrap_angle`, with its two conventions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
Vector = Sequence[float] | NDArray[np.float64]
"""A 1-D vector given as a sequence or an array."""


@dataclass(frozen=True)
class Pose:
    """A rigid pose: translation in metres and URDF roll-pitch-yaw in radians.

    Attributes:
        xyz_m: Translation ``(x, y, z)`` of the child frame in the parent frame.
        rpy_rad: Orientation of the child frame as URDF fixed-axis roll, pitch, yaw.

    """

    xyz_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy_rad: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def matrix(self) -> FloatArray:
        """Return the homogeneous 4x4 transform parent <- child."""
        return make_transform(self.xyz_m, rpy_to_matrix(self.rpy_rad))

    @staticmethod
    def from_matrix(transform: FloatArray) -> Pose:
        """Build a pose from a homogeneous 4x4 transform."""
        xyz = transform[:3, 3]
        rpy = matrix_to_rpy(transform[:3, :3])
        return Pose(
            (float(xyz[0]), float(xyz[1]), float(xyz[2])),
            (float(rpy[0]), float(rpy[1]), float(rpy[2])),
        )


def rot_x(angle_rad: float) -> FloatArray:
    """Rotation matrix about x by ``angle_rad``."""
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(angle_rad: float) -> FloatArray:
    """Rotation matrix about y by ``angle_rad``."""
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(angle_rad: float) -> FloatArray:
    """Rotation matrix about z by ``angle_rad``."""
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rpy_to_matrix(rpy_rad: Vector) -> FloatArray:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to a rotation matrix."""
    roll, pitch, yaw = (float(v) for v in rpy_rad)
    return rot_z(yaw) @ rot_y(pitch) @ rot_x(roll)


def matrix_to_rpy(rotation: FloatArray) -> FloatArray:
    """Rotation matrix to URDF roll-pitch-yaw (inverse of :func:`rpy_to_matrix`)."""
    pitch = float(np.arcsin(np.clip(-rotation[2, 0], -1.0, 1.0)))
    if abs(rotation[2, 0]) < 1.0 - 1e-9:
        roll = float(np.arctan2(rotation[2, 1], rotation[2, 2]))
        yaw = float(np.arctan2(rotation[1, 0], rotation[0, 0]))
    else:  # gimbal lock: put everything into yaw
        roll = 0.0
        yaw = float(np.arctan2(-rotation[0, 1], rotation[1, 1]))
    return np.array([roll, pitch, yaw])


def axis_angle_matrix(axis: Vector, angle_rad: float) -> FloatArray:
    """Rodrigues rotation about a (normalised here) axis."""
    unit = np.asarray(axis, dtype=float)
    unit = unit / np.linalg.norm(unit)
    x, y, z = unit
    skew = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle_rad) * skew + (1.0 - np.cos(angle_rad)) * (skew @ skew)


def make_transform(xyz: Vector, rotation: FloatArray) -> FloatArray:
    """Homogeneous 4x4 transform from a translation and a rotation matrix."""
    transform = np.eye(4)
    transform[:3, :3] = rotation
    transform[:3, 3] = np.asarray(xyz, dtype=float)
    return transform


def invert_transform(transform: ArrayLike) -> FloatArray:
    """Inverse of a rigid 4x4 transform (``T_a_b`` -> ``T_b_a``), without a general inverse.

    Args:
        transform: Homogeneous 4x4 rigid transform (a rotation and a translation, m).

    Returns:
        The inverse, as float64.

    """
    matrix = np.asarray(transform, dtype=float)
    rotation = matrix[:3, :3]
    inverse = np.eye(4)
    inverse[:3, :3] = rotation.T
    inverse[:3, 3] = -rotation.T @ matrix[:3, 3]
    return inverse


def wrap_angle(
    angle_rad: float, period_rad: float = 2.0 * math.pi, *, upper_closed: bool = False
) -> float:
    """Wrap an angle into one period about zero.

    Two conventions, each kept bit for bit for the results made with it:

    - default: ``[-period/2, period/2)`` by floor modulo, ``(a + p/2) % p - p/2``: ``+pi``
      wraps to ``-pi``. Any ``period_rad`` (e.g. a shape's yaw symmetry); the belt encoder,
      the object tracker and the twin family use it.
    - ``upper_closed=True``: ``atan2(sin a, cos a)``, in ``(-pi, pi]`` for every angle but
      ``-pi`` itself, which stays ``-pi`` (``+pi`` stays ``+pi``); the period must be
      ``2 pi``. The demonstrator and MimicGen use it. Away from odd multiples of ``pi`` it
      differs from the default only in the last bits.

    Args:
        angle_rad: The angle (rad).
        period_rad: The period (rad, > 0).
        upper_closed: Use the ``atan2`` convention.

    Raises:
        ValueError: ``upper_closed`` with a period other than ``2 pi``.

    """
    if upper_closed:
        if period_rad != 2.0 * math.pi:
            raise ValueError(f"period_rad = {period_rad}: upper_closed needs 2 pi")
        return math.atan2(math.sin(angle_rad), math.cos(angle_rad))
    return float((angle_rad + period_rad / 2.0) % period_rad - period_rad / 2.0)


def matrix_to_quat(rotation: FloatArray) -> FloatArray:
    """Rotation matrix to a unit quaternion ``(w, x, y, z)`` with ``w >= 0``."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0.0:
        s = 2.0 * np.sqrt(trace + 1.0)
        quat = np.array(
            [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
        )
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        quat = np.array(
            [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
        )
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        quat = np.array(
            [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
        )
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        quat = np.array(
            [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
        )
    quat = quat / np.linalg.norm(quat)
    return quat if quat[0] >= 0.0 else -quat


def quat_to_matrix(quat_wxyz: Vector) -> FloatArray:
    """Convert a quaternion ``(w, x, y, z)`` (normalised here) to a rotation matrix.

    Raises:
        ValueError: For a zero quaternion (an unset message field, say).

    """
    quat = np.asarray(quat_wxyz, dtype=float)
    norm = float(np.linalg.norm(quat))
    if not norm > 1e-12:
        raise ValueError(f"quaternion (w, x, y, z) = {quat.tolist()}: expected a unit quaternion")
    w, x, y, z = quat / norm
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def z_axis_to(direction: Sequence[float]) -> FloatArray:
    """Return a rotation matrix whose z axis points along ``direction`` (capsule axes)."""
    target = np.asarray(direction, dtype=float)
    target = target / np.linalg.norm(target)
    z = np.array([0.0, 0.0, 1.0])
    cross = np.cross(z, target)
    sin_angle = float(np.linalg.norm(cross))
    cos_angle = float(np.dot(z, target))
    if sin_angle < 1e-12:
        return np.eye(3) if cos_angle > 0 else rot_x(np.pi)
    return axis_angle_matrix(cross / sin_angle, float(np.arctan2(sin_angle, cos_angle)))


def quat_multiply(a: FloatArray, b: FloatArray) -> FloatArray:
    """Hamilton product ``a ⊗ b`` of quaternions ``(w, x, y, z)`` (rotation b, then a)."""
    aw, ax, ay, az = (float(v) for v in a)
    bw, bx, by, bz = (float(v) for v in b)
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )
