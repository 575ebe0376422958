"""The robot's two trajectory controllers and the one joint-trajectory command they take.

Each controller has a key, ``arm`` or ``hand`` (what commands, the simulator's backend and the
datasets call it), and a ROS name, ``<key>_controller`` (its ``/<name>/joint_trajectory``
topic, used only where a command becomes a message). Both come from here:
:data:`CONTROLLER_JOINTS` (keys and joints) and :func:`controller_name`.
"""

from __future__ import annotations

from dataclasses import dataclass

from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_description.transforms import FloatArray

CONTROLLER_JOINTS: dict[str, tuple[str, ...]] = {"arm": ARM_JOINT_NAMES, "hand": HAND_JOINT_NAMES}
"""Joints of each trajectory controller, by key, in the controller's order."""


def controller_name(key: str) -> str:
    """Return the ROS name of a controller (``arm`` -> ``arm_controller``).

    Raises:
        ValueError: A key that is not one of :data:`CONTROLLER_JOINTS`.

    """
    if key not in CONTROLLER_JOINTS:
        raise ValueError(f"controller {key!r}: expected one of {sorted(CONTROLLER_JOINTS)}")
    return f"{key}_controller"


ARM = "arm"
"""Key of the arm's trajectory controller."""
HAND = "hand"
"""Key of the hand's trajectory controller."""


@dataclass(frozen=True)
class JointCommand:
    """One joint trajectory for one controller (``time_from_start`` relative to sending).

    Attributes:
        controller: The controller's key (:data:`ARM`, :data:`HAND`).
        joint_names: The controller's joints, the column order of ``positions``.
        times_s: (M,) strictly increasing ``time_from_start`` values (s).
        positions: (M, N) positions (rad) in ``joint_names`` order.
        velocities: (M, N) velocities (rad/s), or None (the controller interpolates
            linearly).
        send_time_s: Simulated (or ROS) time at which the command was sent (s; 0 when the
            sender does not record it).

    """

    controller: str
    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    velocities: FloatArray | None = None
    send_time_s: float = 0.0
