"""The action label of a frame: the trajectory controller's reference at the frame's time.

Commands reach the arm and hand as ``JointTrajectory`` messages (ros2_control's
``joint_trajectory_controller`` topic interface). Between the points of a trajectory the
controller *interpolates* (linearly, or with cubic splines when the points carry velocities;
before the first point from the reference in force when the trajectory starts), so the joint
target at time ``t`` is the interpolated reference, not the next point: a hand trajectory of two
points five seconds apart closes the hand over five seconds. A policy executes its chunk through
the same controller, so its label must be that reference: ``actions[t]`` is the reference the
commands received up to ``t`` define at ``t`` (no command latency: the label is what was
*commanded*; the cell's latency acts on the policy's commands the same way).

:func:`controller_reference` computes it with the controller emulation the simulator runs
(:class:`r2s2r_sim.controllers.JointTrajectoryController`, no latency, no position clipping), so
the labels of real data (bags), simulated data and the executing controller agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from r2s2r_sim.controllers import JointTrajectoryController, TrajectoryError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class TimedCommand:
    """One trajectory command as received.

    Attributes:
        start_s: When it was received (its ``time_from_start`` counts from here), s.
        joint_names: Its joints.
        times_s: (M,) ``time_from_start`` per point.
        positions: (M, len(joint_names)) positions.
        velocities: (M, len(joint_names)) velocities, or None (linear interpolation).

    """

    start_s: float
    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    velocities: FloatArray | None = None


class TrajectoryReferenceError(ValueError):
    """A command that the controller would refuse (joints, lengths, times)."""


def controller_reference(
    commands: Sequence[TimedCommand],
    joint_names: Sequence[str],
    times_s: Sequence[float] | FloatArray,
    initial: Sequence[float] | FloatArray,
) -> FloatArray:
    """Return the controller's reference of ``joint_names`` at each of ``times_s``.

    Args:
        commands: Commands in any order (applied in ``start_s`` order; at a sample time, those
            received at or before it are in force).
        joint_names: The controller's joints (every command names exactly these).
        times_s: Increasing sample times, s.
        initial: Reference before the first command (the position the controller holds).

    Returns:
        (len(times_s), len(joint_names)) reference positions.

    Raises:
        TrajectoryReferenceError: If a command names other joints or is malformed.

    """
    names = list(joint_names)
    infinite = [float("inf")] * len(names)
    controller = JointTrajectoryController(names, [-v for v in infinite], infinite)
    controller.reset(np.asarray(initial, dtype=float))
    ordered = sorted(commands, key=lambda c: c.start_s)
    samples = np.asarray(times_s, dtype=float)
    out = np.zeros((samples.size, len(names)))
    next_command = 0
    for row, time_s in enumerate(samples):
        while next_command < len(ordered) and ordered[next_command].start_s <= time_s + 1e-9:
            command = ordered[next_command]
            controller.update(command.start_s)  # the reference it starts from
            try:
                controller.command(
                    command.start_s,
                    command.joint_names,
                    command.times_s,
                    command.positions,
                    command.velocities,
                )
            except TrajectoryError as error:
                raise TrajectoryReferenceError(str(error)) from None
            next_command += 1
        out[row] = controller.update(float(time_s))
    return out
