"""Moving object frames, segment transforms and retiming (plain NumPy; frame ``base_link``).

MimicGen transforms a source segment of end-effector poses ``P_k`` into a new scene with the
object pose read once at the segment start: ``P'_k = O_new O_src⁻¹ P_k``. On a conveyor the
object keeps moving, so here the object frame is the *moving* frame

    ``M(τ) = [Rz(ψ) | p + v τ]``  (``τ`` = time since the segment start),

with ``p`` and ``ψ`` the object's position and yaw at the segment start and ``v`` the belt
velocity. A palm pose is stored relative to the source's moving frame,
``R(τ) = M_src(τ)⁻¹ P(t_src + τ)``, and replayed in the new one, ``P'(t_new + τ) = M_new(τ) R(τ)``.

Retiming (the choice, derived). The grasp depends on the palm's pose *and velocity relative to
the object* at closure. Keeping the segment's duration and expressing it in the moving frame
keeps both exactly, at any belt speed: ``R(τ)`` and ``dR/dτ`` are unchanged, and in the frame
moving with the object the belt under it is at rest, so contact and friction see the same
relative kinematics (Galilean invariance; only the arm's world-frame path changes, by
``(v_new − v_src) τ`` along the belt, which IK checks). Stretching the duration by
``v_src / v_new`` instead would scale the human's relative approach speeds and the closure
timing, i.e. change the behaviour we want to keep. So the duration is kept and the *start* is
retimed: the segment starts when the new object is where the source object was at the same
point of the segment, ``t_new = t_now + (a_src − a_now) / v_new``, where ``a`` is the position
along the belt. The grasp then happens where the source's grasp happened (the same arm
configuration region, the demonstrator's chosen intercept), and the wait before the reach
absorbs the speed change.

Object symmetry: a cube looks the same every 90° of yaw and a block every 180°; the new
object's yaw is replaced by the symmetric equivalent nearest the source's, so the transform
rotates the demonstration as little as the object allows (a cylinder or sphere: not at all).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation, Slerp

FloatArray = NDArray[np.float64]


def pose7_to_matrix(pose7: Sequence[float] | FloatArray) -> FloatArray:
    """4x4 pose from ``(x, y, z, qx, qy, qz, qw)`` (the dataset's ``obs/object_pose`` row)."""
    values = np.asarray(pose7, dtype=float)
    pose = np.eye(4)
    pose[:3, :3] = Rotation.from_quat(values[3:7]).as_matrix()
    pose[:3, 3] = values[:3]
    return pose


def yaw_of_matrix(pose: FloatArray) -> float:
    """Yaw (rad) about z of a rotation or pose matrix (its x axis projected on the xy plane)."""
    return math.atan2(float(pose[1, 0]), float(pose[0, 0]))


def yaw_pose(position_m: Sequence[float] | FloatArray, yaw_rad: float) -> FloatArray:
    """4x4 pose: rotation ``Rz(yaw_rad)``, translation ``position_m``."""
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    pose = np.eye(4)
    pose[:2, :2] = [[c, -s], [s, c]]
    pose[:3, 3] = np.asarray(position_m, dtype=float)
    return pose


def symmetry_period_rad(shape: str, size_m: Sequence[float]) -> float:
    """Yaw period of an object's appearance: 0 for rotationally symmetric (any yaw).

    Args:
        shape: ``box``, ``cylinder`` or ``sphere``.
        size_m: Full extents (x, y, z).

    """
    if shape in ("cylinder", "sphere"):
        return 0.0
    if abs(float(size_m[0]) - float(size_m[1])) < 1e-3:
        return math.pi / 2.0
    return math.pi


def equivalent_yaw(yaw_rad: float, reference_rad: float, period_rad: float) -> float:
    """Return the yaw among ``yaw_rad + k · period_rad`` nearest ``reference_rad``.

    A period of 0 (rotationally symmetric object) returns ``reference_rad`` itself.
    """
    if period_rad <= 0.0:
        return reference_rad
    k = round((reference_rad - yaw_rad) / period_rad)
    return yaw_rad + k * period_rad


@dataclass(frozen=True)
class MovingFrame:
    """An object frame translating with the belt: ``M(t) = [Rz(yaw) | origin + v (t − t0)]``.

    Attributes:
        start_s: ``t0``, the segment start (s).
        origin_m: (3,) object position at ``t0`` (m, base_link).
        yaw_rad: Object yaw at ``t0`` (about base_link z).
        velocity_mps: (3,) belt velocity (m/s, base_link).

    """

    start_s: float
    origin_m: FloatArray
    yaw_rad: float
    velocity_mps: FloatArray

    def matrix(self, time_s: float) -> FloatArray:
        """Return the frame's 4x4 pose at absolute time ``time_s``."""
        position = np.asarray(self.origin_m) + np.asarray(self.velocity_mps) * (
            time_s - self.start_s
        )
        return yaw_pose(position, self.yaw_rad)

    def static(self) -> MovingFrame:
        """Return the same frame with zero velocity (MimicGen's pose read once)."""
        return MovingFrame(self.start_s, self.origin_m, self.yaw_rad, np.zeros(3))


def relative_poses(
    poses: FloatArray, times_s: Sequence[float] | FloatArray, frame: MovingFrame
) -> FloatArray:
    """``M(t_k)⁻¹ P_k``: poses ``(N, 4, 4)`` at absolute ``times_s`` in a moving frame."""
    out = np.empty_like(np.asarray(poses, dtype=float))
    for k, (pose, time_s) in enumerate(zip(poses, times_s, strict=True)):
        out[k] = np.linalg.inv(frame.matrix(float(time_s))) @ pose
    return out


def transform_segment(
    poses: FloatArray,
    times_s: Sequence[float] | FloatArray,
    source: MovingFrame,
    target: MovingFrame,
    yaw_weights: Sequence[float] | FloatArray | None = None,
    translation_weights: Sequence[float] | FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Carry a segment from the source object's moving frame to the new object's.

    Args:
        poses: ``(N, 4, 4)`` source palm poses (base_link) at absolute source ``times_s``.
        times_s: ``(N,)`` source times.
        source: The source object's moving frame (its ``start_s`` is the segment start).
        target: The new object's moving frame (its ``start_s`` is the new segment start).
        yaw_weights: ``(N,)`` in [0, 1]: how much of the yaw difference between the frames
            is applied at each pose (None: all of it, MimicGen's rigid transform). See
            :func:`yaw_phase_in`.
        translation_weights: ``(N,)`` in [0, 1]: likewise for the frames' position
            difference (None: all of it).

    Returns:
        ``(new_times_s, new_poses)``: the same durations from ``target.start_s`` and the palm
        poses ``M_target(τ) M_source(τ)⁻¹ P`` with ``τ`` the time into the segment (the
        target frame's yaw replaced by ``source.yaw + w_k (target.yaw − source.yaw)``).

    """
    times = np.asarray(times_s, dtype=float)
    relative = relative_poses(poses, times, source)
    new_times = target.start_s + (times - source.start_s)
    weights = np.ones(times.size) if yaw_weights is None else np.asarray(yaw_weights, float)
    shift = (
        np.ones(times.size)
        if translation_weights is None
        else np.asarray(translation_weights, float)
    )
    yaw_difference = target.yaw_rad - source.yaw_rad
    out = np.empty_like(relative)
    for k, (time_s, new_time_s) in enumerate(zip(times, new_times, strict=True)):
        frame = target.matrix(float(new_time_s))
        origin = source.matrix(float(time_s))[:3, 3]
        frame[:3, 3] = origin + float(shift[k]) * (frame[:3, 3] - origin)
        yaw = source.yaw_rad + float(weights[k]) * yaw_difference
        frame[:3, :3] = yaw_pose(np.zeros(3), yaw)[:3, :3]
        out[k] = frame @ relative[k]
    return new_times, out


def yaw_phase_in(relative_positions_m: FloatArray, near_m: float) -> FloatArray:
    """Weights phasing the object's yaw into a segment as the palm approaches the object.

    A rigid MimicGen transform rotates the whole reach about the object by the yaw difference,
    which swings its far end (the palm near the robot at rest) up to tens of centimetres out
    of the workspace. Only the part near the object needs to follow the object's yaw, so the
    weight grows with a minimum-jerk profile from 0 at the segment's first pose to 1 once the
    palm is within ``near_m`` (horizontally) of the object, and never decreases.

    Args:
        relative_positions_m: ``(N, 3)`` palm positions in the source object's moving frame.
        near_m: Horizontal distance at which the object's yaw is fully applied.

    """
    distance = np.linalg.norm(np.asarray(relative_positions_m)[:, :2], axis=1)
    far = float(distance[0])
    if far <= near_m:
        return np.ones(distance.size)
    progress = np.maximum.accumulate(np.clip((far - distance) / (far - near_m), 0.0, 1.0))
    return progress**3 * (10.0 - 15.0 * progress + 6.0 * progress**2)  # type: ignore[no-any-return]


def retimed_start_s(
    along_source_m: float, along_now_m: float, now_s: float, speed_mps: float
) -> float:
    """When the new object reaches the along-belt position the source object had at its start.

    Args:
        along_source_m: Source object's position along the belt at the source segment start.
        along_now_m: New object's position along the belt at ``now_s``.
        now_s: Current time.
        speed_mps: New belt speed (> 0).

    Raises:
        ValueError: If ``speed_mps`` is not positive (a stopped belt has no retiming).

    """
    if speed_mps <= 0.0:
        raise ValueError(f"speed_mps = {speed_mps}: expected > 0 for retiming")
    return now_s + (along_source_m - along_now_m) / speed_mps


def fit_linear_motion(
    times_s: FloatArray, positions_m: FloatArray, reference_s: float
) -> tuple[FloatArray, FloatArray]:
    """Least-squares constant-velocity fit ``p(t) = p_ref + v (t − reference_s)``.

    Args:
        times_s: ``(N,)`` times, N ≥ 2 distinct.
        positions_m: ``(N, 3)`` positions.
        reference_s: Time at which ``p_ref`` is given.

    Returns:
        ``(p_ref, v)``.

    Raises:
        ValueError: If fewer than two distinct times are given.

    """
    times = np.asarray(times_s, dtype=float)
    if times.size < 2 or np.ptp(times) <= 0.0:
        raise ValueError(f"fit_linear_motion: expected ≥ 2 distinct times, got {times.size}")
    design = np.stack([np.ones_like(times), times - reference_s], axis=1)
    coefficients, *_ = np.linalg.lstsq(design, np.asarray(positions_m, dtype=float), rcond=None)
    return coefficients[0], coefficients[1]


def interpolate_poses(start: FloatArray, end: FloatArray, fractions: FloatArray) -> FloatArray:
    """Poses between ``start`` and ``end``: linear position, spherical-linear rotation.

    Args:
        start: 4x4 pose at fraction 0.
        end: 4x4 pose at fraction 1.
        fractions: ``(N,)`` values in [0, 1].

    Returns:
        ``(N, 4, 4)`` poses.

    """
    fractions = np.clip(np.asarray(fractions, dtype=float), 0.0, 1.0)
    slerp = Slerp([0.0, 1.0], Rotation.from_matrix(np.stack([start[:3, :3], end[:3, :3]])))
    out = np.tile(np.eye(4), (fractions.size, 1, 1))
    out[:, :3, :3] = slerp(fractions).as_matrix()
    out[:, :3, 3] = start[:3, 3] + np.outer(fractions, end[:3, 3] - start[:3, 3])
    return out
