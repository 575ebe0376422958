"""Action labels: the trajectory controller's reference, interpolated as the controller does."""

from __future__ import annotations

import numpy as np
import pytest
from r2s2r_dataset.reference import (
    TimedCommand,
    TrajectoryReferenceError,
    controller_reference,
)

JOINTS = ("a", "b")


def command(start_s: float, times: list[float], points: list[list[float]]) -> TimedCommand:
    return TimedCommand(start_s, JOINTS, np.array(times), np.array(points))


def test_a_sparse_trajectory_is_interpolated_not_jumped_to() -> None:
    # Two points five seconds apart (a slow hand pre-shape): the reference moves over five
    # seconds; the next point is reached only at its time.
    slow = command(1.0, [5.0], [[1.0, -1.0]])
    reference = controller_reference([slow], JOINTS, [0.5, 1.0, 2.0, 3.5, 6.0, 7.0], [0.0, 0.0])
    np.testing.assert_allclose(reference[:, 0], [0.0, 0.0, 0.2, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(reference[:, 1], -reference[:, 0])


def test_a_new_command_starts_from_the_reference_in_force() -> None:
    first = command(0.0, [1.0], [[1.0, 1.0]])
    replacement = command(0.5, [0.5], [[0.0, 0.0]])  # at 0.5 s the reference is 0.5
    reference = controller_reference(
        [replacement, first], JOINTS, [0.25, 0.5, 0.75, 1.0, 2.0], [0.0, 0.0]
    )
    np.testing.assert_allclose(reference[:, 0], [0.25, 0.5, 0.25, 0.0, 0.0])


def test_velocities_give_the_controllers_cubic_spline() -> None:
    spline = TimedCommand(0.0, JOINTS, np.array([1.0]), np.array([[1.0, 1.0]]), np.zeros((1, 2)))
    reference = controller_reference([spline], JOINTS, [0.5], [0.0, 0.0])
    np.testing.assert_allclose(reference[0], [0.5, 0.5])  # symmetric ease in and out
    quarter = controller_reference([spline], JOINTS, [0.25], [0.0, 0.0])
    assert quarter[0, 0] < 0.25  # slower than linear at the start


def test_a_command_for_other_joints_is_refused() -> None:
    other = TimedCommand(0.0, ("a", "c"), np.array([1.0]), np.array([[1.0, 1.0]]))
    with pytest.raises(TrajectoryReferenceError, match="unknown"):
        controller_reference([other], JOINTS, [1.0], [0.0, 0.0])
