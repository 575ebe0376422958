"""Time parameterization of joint paths with ruckig: time-optimal, jerk-limited, straight.

Each straight joint-space segment of a path is timed rest-to-rest with ruckig's phase
synchronization, which keeps every joint on the straight line between the waypoints (the path
that was collision-checked) while reaching the velocity, acceleration and jerk limits on the
limiting joint. The planner's motion style follows: straight segments with brief stops at the
vertices, not a human's blended curves.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from r2s2r_description.robot import ARM_JOINT_NAMES, JOINT_LIMITS
from r2s2r_description.transforms import FloatArray
from ruckig import InputParameter, Result, Ruckig, Synchronization, Trajectory

from r2s2r_planner.config import TimingConfig


class TimingError(RuntimeError):
    """Ruckig could not time a segment (limits or inputs out of its domain)."""


@dataclass(frozen=True)
class JointTrajectory:
    """A timed joint trajectory (what a JointTrajectory message carries).

    Attributes:
        joint_names: Joint names, column order.
        times_s: (M,) ``time_from_start`` of each point, increasing, first 0.
        positions: (M, N) positions (rad).
        velocities: (M, N) velocities (rad/s).
        accelerations: (M, N) accelerations (rad/s²).

    """

    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    velocities: FloatArray
    accelerations: FloatArray

    @property
    def duration_s(self) -> float:
        """Time of the last point."""
        return float(self.times_s[-1])

    def then(self, other: JointTrajectory) -> JointTrajectory:
        """Concatenate: ``other`` (starting where this one ends) follows this trajectory.

        Raises:
            ValueError: If the joint names differ or ``other`` does not start where this ends.

        """
        if other.joint_names != self.joint_names:
            raise ValueError(f"joint names {other.joint_names} != {self.joint_names}")
        if not np.allclose(other.positions[0], self.positions[-1], atol=1e-6):
            raise ValueError(
                f"trajectories do not meet: {other.positions[0]} != {self.positions[-1]}"
            )
        offset = self.duration_s
        return JointTrajectory(
            self.joint_names,
            np.concatenate([self.times_s, other.times_s[1:] + offset]),
            np.vstack([self.positions, other.positions[1:]]),
            np.vstack([self.velocities, other.velocities[1:]]),
            np.vstack([self.accelerations, other.accelerations[1:]]),
        )


def arm_limits(config: TimingConfig) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Velocity, acceleration and jerk limits of the arm joints (ARM_JOINT_NAMES order)."""
    velocity = np.array([JOINT_LIMITS[n].velocity_radps for n in ARM_JOINT_NAMES])
    n = len(ARM_JOINT_NAMES)
    return (
        velocity * config.velocity_scale,
        np.full(n, config.max_acceleration_radps2),
        np.full(n, config.max_jerk_radps3),
    )


def _segment(
    start: FloatArray,
    end: FloatArray,
    limits: tuple[FloatArray, FloatArray, FloatArray],
) -> Trajectory:
    dofs = start.size
    inp = InputParameter(dofs)
    inp.current_position = start.tolist()
    inp.current_velocity = [0.0] * dofs
    inp.current_acceleration = [0.0] * dofs
    inp.target_position = end.tolist()
    inp.target_velocity = [0.0] * dofs
    inp.target_acceleration = [0.0] * dofs
    inp.max_velocity = limits[0].tolist()
    inp.max_acceleration = limits[1].tolist()
    inp.max_jerk = limits[2].tolist()
    inp.synchronization = Synchronization.Phase
    trajectory = Trajectory(dofs)
    result = Ruckig(dofs).calculate(inp, trajectory)
    if result not in (Result.Working, Result.Finished):
        raise TimingError(f"ruckig failed on segment {start} -> {end}: {result}")
    return trajectory


def segment_duration_s(
    start: Sequence[float] | FloatArray,
    end: Sequence[float] | FloatArray,
    config: TimingConfig,
) -> float:
    """Time-optimal rest-to-rest duration of one straight arm segment."""
    return float(
        _segment(np.asarray(start, float), np.asarray(end, float), arm_limits(config)).duration
    )


def time_parameterize(
    waypoints: FloatArray | Sequence[Sequence[float]],
    config: TimingConfig,
    joint_names: Sequence[str] = ARM_JOINT_NAMES,
    limits: tuple[FloatArray, FloatArray, FloatArray] | None = None,
) -> JointTrajectory:
    """Time a piecewise-linear joint path, rest-to-rest per segment.

    Args:
        waypoints: (N >= 1, D) configurations.
        config: Limits scale and sample period.
        joint_names: Names of the D columns.
        limits: ``(velocity, acceleration, jerk)`` per joint; the arm's from ``config`` when
            None.

    Returns:
        Points every ``sample_period_s`` within each segment plus every vertex exactly.

    Raises:
        ValueError: If the waypoints are malformed.
        TimingError: If ruckig rejects a segment.

    """
    path = np.asarray(waypoints, dtype=float)
    if path.ndim != 2 or path.shape[0] == 0 or path.shape[1] != len(joint_names):
        raise ValueError(f"waypoints shape {path.shape}: expected (N >= 1, {len(joint_names)})")
    bounds = limits if limits is not None else arm_limits(config)
    times = [0.0]
    positions = [path[0]]
    zeros = np.zeros(path.shape[1])
    velocities = [zeros]
    accelerations = [zeros]
    offset = 0.0
    for start, end in itertools.pairwise(path):
        if np.max(np.abs(end - start)) < 1e-9:
            continue
        segment = _segment(start, end, bounds)
        count = max(int(np.ceil(segment.duration / config.sample_period_s)), 1)
        for t in np.linspace(0.0, segment.duration, count + 1)[1:]:
            p, v, a = segment.at_time(float(t))
            times.append(offset + float(t))
            positions.append(np.array(p))
            velocities.append(np.array(v))
            accelerations.append(np.array(a))
        positions[-1] = end.copy()  # exact vertex
        velocities[-1] = zeros
        offset += float(segment.duration)
    return JointTrajectory(
        tuple(joint_names),
        np.array(times),
        np.array(positions),
        np.array(velocities),
        np.array(accelerations),
    )
