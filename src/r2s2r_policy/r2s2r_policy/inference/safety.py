"""The safety filter of policy commands: finite values, position and velocity limits.

Every chunk the :class:`~r2s2r_policy.inference.engine.InferenceEngine` sends passes these
checks (the engine counts each :class:`InterventionKind`); limits come from the robot
description (:data:`r2s2r_description.robot.JOINT_LIMITS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from r2s2r_description.robot import JOINT_LIMITS


class InterventionKind(StrEnum):
    """Safety interventions, counted per chunk (or per hold)."""

    POSITION_CLAMP = "position_clamp"
    VELOCITY_CLAMP = "velocity_clamp"
    NON_FINITE_ACTION = "non_finite_action"
    STALE_OBSERVATION = "stale_observation"
    INFERENCE_ERROR = "inference_error"
    WORKSPACE_LIMIT = "workspace_limit"


@dataclass(frozen=True)
class JointSafetyLimits:
    """Position and velocity limits of a list of joints, as arrays in that order.

    Attributes:
        joint_names: Joint names.
        lower_rad: (N,) lower position limits.
        upper_rad: (N,) upper position limits.
        velocity_radps: (N,) speed limits.

    """

    joint_names: tuple[str, ...]
    lower_rad: np.ndarray
    upper_rad: np.ndarray
    velocity_radps: np.ndarray

    @classmethod
    def for_joints(
        cls, joint_names: Sequence[str], velocity_scale: float = 1.0
    ) -> JointSafetyLimits:
        """Limits of ``joint_names`` from :data:`r2s2r_description.robot.JOINT_LIMITS`.

        Args:
            joint_names: Joints in action order.
            velocity_scale: Fraction of the velocity limits to allow, in (0, 1].

        Raises:
            KeyError: If a joint has no limits in the robot description (all such are named).
            ValueError: If ``velocity_scale`` is outside (0, 1].

        """
        unknown = [name for name in joint_names if name not in JOINT_LIMITS]
        if unknown:
            raise KeyError(f"joints {unknown} have no limits in r2s2r_description.robot")
        if not 0.0 < velocity_scale <= 1.0:
            raise ValueError(f"velocity_scale = {velocity_scale}: expected in (0, 1]")
        limits = [JOINT_LIMITS[name] for name in joint_names]
        return cls(
            joint_names=tuple(joint_names),
            lower_rad=np.array([lim.lower_rad for lim in limits]),
            upper_rad=np.array([lim.upper_rad for lim in limits]),
            velocity_radps=np.array([lim.velocity_radps for lim in limits]) * velocity_scale,
        )


def chunk_is_finite(chunk: np.ndarray) -> bool:
    """Whether every value of an action chunk is finite (no NaN, no Inf)."""
    return bool(np.all(np.isfinite(chunk)))


def clamp_positions(chunk: np.ndarray, limits: JointSafetyLimits) -> tuple[np.ndarray, int]:
    """Clamp every point of a ``(H, N)`` chunk to the joint position limits.

    Returns:
        The clamped chunk (a new array) and the number of values that were changed.

    """
    clamped = np.clip(chunk, limits.lower_rad, limits.upper_rad)
    return clamped, int(np.count_nonzero(clamped != chunk))


def limit_velocities(
    chunk: np.ndarray, start_rad: np.ndarray, dt_s: float, limits: JointSafetyLimits
) -> tuple[np.ndarray, int]:
    """Limit the step between successive points to ``velocity_radps * dt_s``.

    Point ``k`` is reached ``dt_s`` after point ``k - 1``; point 0 ``dt_s`` after
    ``start_rad`` (the measured position). A step that is too large is shortened towards its
    target, and later points start from the shortened one, so the returned chunk is a feasible
    path that follows the policy's as closely as the limits allow. With ``start_rad`` and
    ``chunk`` inside the position limits, the result stays inside them.

    Args:
        chunk: ``(H, N)`` joint targets (rad).
        start_rad: ``(N,)`` position the chunk starts from (rad).
        dt_s: Time between points (s), > 0.
        limits: Velocity limits of the N joints.

    Returns:
        The limited chunk (a new array) and the number of steps (point × joint) shortened.

    Raises:
        ValueError: If ``dt_s`` is not positive or shapes disagree.

    """
    if not dt_s > 0.0:
        raise ValueError(f"dt_s = {dt_s}: expected > 0")
    if chunk.ndim != 2 or chunk.shape[1] != start_rad.shape[0]:
        raise ValueError(f"chunk {chunk.shape} and start {start_rad.shape}: expected (H, N), (N,)")
    max_step = limits.velocity_radps * dt_s
    limited = np.empty_like(chunk, dtype=np.float64)
    previous = np.asarray(start_rad, dtype=np.float64)
    changed = 0
    for index in range(chunk.shape[0]):
        step = chunk[index] - previous
        bounded = np.clip(step, -max_step, max_step)
        changed += int(np.count_nonzero(np.abs(bounded - step) > 1e-12))
        previous = previous + bounded
        limited[index] = previous
    return limited, changed
