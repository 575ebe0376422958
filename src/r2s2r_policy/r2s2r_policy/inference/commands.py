"""The joint trajectory the inference engine sends, and its split per controller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from r2s2r_description.controllers import CONTROLLER_JOINTS


def split_by_controller(
    joint_names: Sequence[str], positions: np.ndarray
) -> dict[str, tuple[list[str], np.ndarray]]:
    """Split ``(M, N)`` trajectory points into one block per controller.

    Returns:
        ``controller -> (joint names, (M, n) positions)`` for each controller that owns at least
        one of ``joint_names``, the joints in the controller's order.

    Raises:
        ValueError: If a joint belongs to no controller.

    """
    index = {name: i for i, name in enumerate(joint_names)}
    owned = {name for joints in CONTROLLER_JOINTS.values() for name in joints}
    orphans = [name for name in joint_names if name not in owned]
    if orphans:
        raise ValueError(f"joints {orphans} belong to no controller ({sorted(CONTROLLER_JOINTS)})")
    blocks: dict[str, tuple[list[str], np.ndarray]] = {}
    for controller, joints in CONTROLLER_JOINTS.items():
        names = [name for name in joints if name in index]
        if names:
            blocks[controller] = (names, positions[:, [index[name] for name in names]])
    return blocks


@dataclass(frozen=True)
class ActionCommand:
    """A joint trajectory to send (one JointTrajectory per controller).

    Attributes:
        joint_names: Joints, action order.
        times_s: ``(M,)`` time_from_start of each point (s), start = when it is sent: point
            ``k`` of a chunk at ``(k + 1)·dt`` after the observation, less the time since.
        positions_rad: ``(M, N)`` targets.
        hold: True for a hold at the measured position (one point).
        observation_time_s: Engine-clock time of the newest image the chunk was computed from.

    """

    joint_names: tuple[str, ...]
    times_s: np.ndarray
    positions_rad: np.ndarray
    hold: bool = False
    observation_time_s: float = 0.0

    def by_controller(self) -> dict[str, tuple[list[str], np.ndarray]]:
        """Split the command per controller (see :func:`split_by_controller`)."""
        return split_by_controller(self.joint_names, self.positions_rad)
