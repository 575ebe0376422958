"""A NumPy emulation of ros2_control's ``joint_trajectory_controller`` with command latency.

What it reproduces: a trajectory is a list of points with ``time_from_start``; it starts when it
is *executed* (``latency_s`` after it was received, like a real robot's command path); before
the first point the controller interpolates from the current desired state; between points it
interpolates linearly (positions only) or with cubic Hermite splines (positions + velocities);
after the last point it holds. A new trajectory replaces the old one when it is executed.
The PD servo itself (per-joint ``kp``/``kd``) is the simulator's position actuator.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES

FloatArray = NDArray[np.float64]


class TrajectoryError(ValueError):
    """A trajectory command is malformed (joint names, lengths, times, limits)."""


@dataclass(frozen=True)
class Trajectory:
    """A validated trajectory in the controller's joint order.

    Attributes:
        times_s: (M,) strictly increasing ``time_from_start`` values, ``>= 0``.
        positions: (M, N) joint positions (rad).
        velocities: (M, N) joint velocities (rad/s), or None for linear interpolation.

    """

    times_s: FloatArray
    positions: FloatArray
    velocities: FloatArray | None = None


def make_trajectory(
    controller_joints: Sequence[str],
    joint_names: Sequence[str],
    times_s: Sequence[float] | FloatArray,
    positions: Sequence[Sequence[float]] | FloatArray,
    velocities: Sequence[Sequence[float]] | FloatArray | None = None,
) -> Trajectory:
    """Validate a command and reorder it into the controller's joint order.

    Args:
        controller_joints: The joints this controller owns, in its order.
        joint_names: The command's joint names (any order, each exactly once, all required).
        times_s: ``time_from_start`` per point.
        positions: (M, len(joint_names)) positions.
        velocities: Optional (M, len(joint_names)) velocities.

    Raises:
        TrajectoryError: Unknown, missing or repeated joint names, wrong lengths, non-finite
            values, or times that are negative or not strictly increasing.

    """
    names = list(joint_names)
    if len(set(names)) != len(names):
        raise TrajectoryError(f"joint_names {names}: each joint must appear once")
    if set(names) != set(controller_joints):
        unknown = sorted(set(names) - set(controller_joints))
        missing = sorted(set(controller_joints) - set(names))
        raise TrajectoryError(
            f"joint_names: unknown {unknown}, missing {missing}; expected {list(controller_joints)}"
        )
    times = np.asarray(times_s, dtype=float).reshape(-1)
    pos = np.asarray(positions, dtype=float)
    if pos.ndim != 2 or pos.shape != (times.size, len(names)) or times.size == 0:
        raise TrajectoryError(
            f"positions shape {pos.shape}: expected ({times.size}, {len(names)}) with ≥ 1 point"
        )
    if not (np.all(np.isfinite(times)) and np.all(np.isfinite(pos))):
        raise TrajectoryError("times_s and positions must be finite")
    if times[0] < 0.0 or np.any(np.diff(times) <= 0.0):
        raise TrajectoryError(f"times_s {times.tolist()}: expected ≥ 0 and strictly increasing")
    order = [names.index(j) for j in controller_joints]
    vel = None
    if velocities is not None:
        vel = np.asarray(velocities, dtype=float)
        if vel.shape != pos.shape or not np.all(np.isfinite(vel)):
            raise TrajectoryError(f"velocities shape {vel.shape}: expected {pos.shape}, finite")
        vel = vel[:, order]
    return Trajectory(times, pos[:, order], vel)


def sample_trajectory(
    trajectory: Trajectory, start_positions: FloatArray, t_s: float
) -> FloatArray:
    """Desired positions ``t_s`` seconds after the trajectory started executing.

    The segment before the first point starts from ``start_positions`` at ``t = 0`` (with zero
    velocity when the trajectory carries velocities).
    """
    times, positions, velocities = trajectory.times_s, trajectory.positions, trajectory.velocities
    if t_s >= times[-1]:
        return positions[-1].copy()
    index = int(np.searchsorted(times, t_s, side="right"))
    if index == 0:
        t0, t1 = 0.0, float(times[0])
        p0, p1 = start_positions, positions[0]
        v0 = None if velocities is None else np.zeros_like(p0)
        v1 = None if velocities is None else velocities[0]
    else:
        t0, t1 = float(times[index - 1]), float(times[index])
        p0, p1 = positions[index - 1], positions[index]
        v0 = None if velocities is None else velocities[index - 1]
        v1 = None if velocities is None else velocities[index]
    duration = t1 - t0
    if duration <= 0.0:
        return p1.copy()
    s = (t_s - t0) / duration
    if v0 is None or v1 is None:
        return p0 + s * (p1 - p0)  # type: ignore[no-any-return]
    s2, s3 = s * s, s * s * s
    h00, h10 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s
    h01, h11 = -2 * s3 + 3 * s2, s3 - s2
    return h00 * p0 + h10 * duration * v0 + h01 * p1 + h11 * duration * v1  # type: ignore[no-any-return]


class _Segments:
    """A trajectory as segments from a start position, for sampling at many times at once.

    Segment 0 runs from ``(0 s, start positions, zero velocity)`` to the first point (what
    :func:`sample_trajectory` does before the first point), segment ``i`` from point ``i - 1``
    to point ``i``; all per-segment values are computed once.
    """

    def __init__(self, trajectory: Trajectory, start_positions: FloatArray) -> None:
        times, positions, velocities = (
            trajectory.times_s,
            trajectory.positions,
            trajectory.velocities,
        )
        knot_times = np.concatenate([[0.0], times])
        knot_positions = np.vstack([np.asarray(start_positions, dtype=float)[None, :], positions])
        self.inner_times = times[:-1]  # searchsorted here gives the segment index
        self.t0 = knot_times[:-1]
        self.duration = knot_times[1:] - knot_times[:-1]
        self.p0, self.p1 = knot_positions[:-1], knot_positions[1:]
        self.p_delta = self.p1 - self.p0
        self.v0: FloatArray | None = None
        self.v1: FloatArray | None = None
        if velocities is not None:
            knot_velocities = np.vstack([np.zeros((1, positions.shape[1])), velocities])
            self.v0, self.v1 = knot_velocities[:-1], knot_velocities[1:]
        self.empty = self.duration <= 0.0
        self.any_empty = bool(self.empty.any())
        # Dividing by 1 where a segment is empty: those rows are replaced by the end point.
        self.safe_duration = np.where(self.empty, 1.0, self.duration)
        self.end_s = float(times[-1])
        self.end_positions = positions[-1]

    def sample(self, t: FloatArray) -> FloatArray:
        """Positions at the increasing times ``t`` (see :func:`sample_trajectory_many`)."""
        segment = np.searchsorted(self.inner_times, t, side="right")
        duration = self.safe_duration[segment]
        s = ((t - self.t0[segment]) / duration)[:, None]
        p0, p1 = self.p0[segment], self.p1[segment]
        if self.v0 is None or self.v1 is None:
            result = p0 + s * self.p_delta[segment]
        else:
            # The operations of sample_trajectory, in its order (3·s² and s³ computed once).
            s2 = s * s
            s3 = s2 * s
            two_s3, three_s2 = 2 * s3, 3 * s2
            h00 = two_s3 - three_s2 + 1
            h10 = s3 - 2 * s2 + s
            h01 = three_s2 - two_s3
            h11 = s3 - s2
            d = duration[:, None]
            result = h00 * p0 + h10 * d * self.v0[segment] + h01 * p1 + h11 * d * self.v1[segment]
        if self.any_empty:
            empty = self.empty[segment]
            result[empty] = p1[empty]
        if t[-1] >= self.end_s:
            result[t >= self.end_s] = self.end_positions
        return result  # type: ignore[no-any-return]


def sample_trajectory_many(
    trajectory: Trajectory, start_positions: FloatArray, t_s: FloatArray
) -> FloatArray:
    """:func:`sample_trajectory` at several increasing times: (K,) times → (K, N) positions.

    Row ``k`` equals ``sample_trajectory(trajectory, start_positions, t_s[k])`` bit for bit:
    the same floating-point operations in the same order, done on arrays.
    """
    return _Segments(trajectory, start_positions).sample(np.asarray(t_s, dtype=float))


@dataclass
class _Pending:
    execute_at_s: float
    trajectory: Trajectory


class JointTrajectoryController:
    """Trajectory following for one joint group, with a latency queue.

    Args:
        joint_names: The joints it owns, in order.
        lower_rad: Lower position limits (targets are clipped, as the drive would).
        upper_rad: Upper position limits.
        latency_s: Delay between receiving and executing a command.

    """

    def __init__(
        self,
        joint_names: Sequence[str],
        lower_rad: Sequence[float],
        upper_rad: Sequence[float],
        latency_s: float = 0.0,
    ):
        if latency_s < 0.0:
            raise TrajectoryError(f"latency_s = {latency_s}: expected ≥ 0")
        self.joint_names = tuple(joint_names)
        self.lower = np.asarray(lower_rad, dtype=float)
        self.upper = np.asarray(upper_rad, dtype=float)
        self.latency_s = float(latency_s)
        self._queue: collections.deque[_Pending] = collections.deque()
        self._active: Trajectory | None = None
        self._active_start_s = 0.0
        self._start_positions = np.zeros(len(self.joint_names))
        self._segments: _Segments | None = None  # of the active trajectory (update_ticks)
        self.desired = np.zeros(len(self.joint_names))
        self.commands_received = 0

    def reset(self, positions: Sequence[float] | FloatArray) -> None:
        """Drop all commands and hold ``positions``."""
        self._queue.clear()
        self._active = None
        self.desired = np.clip(np.asarray(positions, dtype=float), self.lower, self.upper)

    def command(
        self,
        now_s: float,
        joint_names: Sequence[str],
        times_s: Sequence[float] | FloatArray,
        positions: Sequence[Sequence[float]] | FloatArray,
        velocities: Sequence[Sequence[float]] | FloatArray | None = None,
    ) -> None:
        """Receive a trajectory at ``now_s``; it executes at ``now_s + latency_s``.

        Raises:
            TrajectoryError: If the command is malformed (nothing is queued then).

        """
        trajectory = make_trajectory(self.joint_names, joint_names, times_s, positions, velocities)
        self._queue.append(_Pending(now_s + self.latency_s, trajectory))
        self.commands_received += 1

    @property
    def busy(self) -> bool:
        """Whether a command is pending or a trajectory is still being executed."""
        return bool(self._queue) or self._active is not None

    def update(self, now_s: float) -> FloatArray:
        """Advance to ``now_s`` and return the desired positions (the servo targets)."""
        while self._queue and self._queue[0].execute_at_s <= now_s + 1e-9:
            self._activate(self._queue.popleft())
        if self._active is not None:
            elapsed = now_s - self._active_start_s
            self.desired = np.clip(
                sample_trajectory(self._active, self._start_positions, elapsed),
                self.lower,
                self.upper,
            )
            if elapsed >= self._active.times_s[-1]:
                self._active = None
        return self.desired

    def update_ticks(self, times_s: FloatArray) -> FloatArray:
        """:meth:`update` at each of several control ticks, for as long as it is busy.

        The same result, bit for bit, as calling :meth:`update` at ``times_s[0]``,
        ``times_s[1]``, ... while :attr:`busy` (no command may arrive in between), with the
        interpolation done on arrays; the simulator's stepping loop then only copies rows.

        Args:
            times_s: (K,) increasing tick times.

        Returns:
            (M, N) desired positions at the first M ticks, the ticks at which the controller
            was busy (M < K: it is idle from tick M on).

        """
        times = np.asarray(times_s, dtype=float)
        rows: list[FloatArray] = []
        k = 0
        while k < times.size and self.busy:
            now = float(times[k])
            while self._queue and self._queue[0].execute_at_s <= now + 1e-9:
                self._activate(self._queue.popleft())
            # Ticks until the next command starts executing (exclusive).
            stop = times.size
            if self._queue:
                due = np.flatnonzero(self._queue[0].execute_at_s <= times[k + 1 :] + 1e-9)
                stop = k + 1 + int(due[0]) if due.size else times.size
            if self._active is None:
                rows.append(np.broadcast_to(self.desired, (stop - k, self.desired.size)))
                k = stop
                continue
            elapsed = times[k:stop] - self._active_start_s
            finished = False
            if elapsed[-1] >= self._active.times_s[-1]:
                last = int(np.flatnonzero(elapsed >= self._active.times_s[-1])[0])
                stop, elapsed, finished = k + last + 1, elapsed[: last + 1], True
            if self._segments is None:
                self._segments = _Segments(self._active, self._start_positions)
            samples = self._segments.sample(elapsed)
            # np.clip's arithmetic (max, then min) without its Python-level overhead.
            np.minimum(np.maximum(samples, self.lower, out=samples), self.upper, out=samples)
            rows.append(samples)
            self.desired = samples[-1].copy()
            if finished:
                self._active = None
            k = stop
        if not rows:
            return np.empty((0, self.desired.size))
        return rows[0] if len(rows) == 1 else np.vstack(rows)

    def _activate(self, pending: _Pending) -> None:
        """Start executing a queued trajectory from the current desired positions."""
        self._active = pending.trajectory
        self._active_start_s = pending.execute_at_s
        self._start_positions = self.desired.copy()
        self._segments = None

    def snapshot(self) -> dict[str, object]:
        """Return a copy of the internal state (for simulator get_state/set_state)."""
        return {
            "queue": [(p.execute_at_s, p.trajectory) for p in self._queue],
            "active": self._active,
            "active_start_s": self._active_start_s,
            "start_positions": self._start_positions.copy(),
            "desired": self.desired.copy(),
        }

    def restore(self, snapshot: dict[str, object]) -> None:
        """Restore a state from :meth:`snapshot`."""
        queue = snapshot["queue"]
        assert isinstance(queue, list)
        self._queue = collections.deque(_Pending(t, traj) for t, traj in queue)
        active = snapshot["active"]
        self._active = active if isinstance(active, Trajectory) else None
        self._segments = None
        self._active_start_s = float(snapshot["active_start_s"])  # type: ignore[arg-type]
        self._start_positions = np.array(snapshot["start_positions"], dtype=float)
        self.desired = np.array(snapshot["desired"], dtype=float)


def controller_for(
    arm: JointTrajectoryController, hand: JointTrajectoryController, joint_names: Sequence[str]
) -> JointTrajectoryController:
    """Return the controller a trajectory's joints belong to (every backend dispatches so).

    Raises:
        TrajectoryError: If the joints are neither all arm joints nor all hand joints.

    """
    names = set(joint_names)
    if names and names <= set(ARM_JOINT_NAMES):
        return arm
    if names and names <= set(HAND_JOINT_NAMES):
        return hand
    raise TrajectoryError(
        f"joint_names {list(joint_names)}: expected the arm joints {list(ARM_JOINT_NAMES)} "
        f"or the hand joints {list(HAND_JOINT_NAMES)}"
    )
