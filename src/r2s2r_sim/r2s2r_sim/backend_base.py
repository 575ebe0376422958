"""What every simulator backend does alike, written once: :class:`BackendBase`.

The controllers (:func:`robot_controllers`) and how a command reaches them, the episode's world
and objects, and the belt's speed and travel. The backends (:mod:`r2s2r_sim.mujoco_backend`,
:mod:`r2s2r_sim.isaac_backend`) derive from it and keep what their simulator does its own way:
stepping, bodies, contacts, cameras and state.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Sequence

from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HAND_JOINT_NAMES, JOINT_LIMITS
from r2s2r_world.world import WorldParams

from r2s2r_sim.backend import BackendError, FloatArray, ObjectInstance
from r2s2r_sim.controllers import JointTrajectoryController, controller_for


def robot_controllers() -> tuple[JointTrajectoryController, JointTrajectoryController]:
    """Return the arm's and the hand's trajectory controllers, within the joint limits."""
    lower = [JOINT_LIMITS[n].lower_rad for n in ALL_JOINT_NAMES]
    upper = [JOINT_LIMITS[n].upper_rad for n in ALL_JOINT_NAMES]
    n_arm = len(ARM_JOINT_NAMES)
    arm = JointTrajectoryController(ARM_JOINT_NAMES, lower[:n_arm], upper[:n_arm])
    hand = JointTrajectoryController(HAND_JOINT_NAMES, lower[n_arm:], upper[n_arm:])
    return arm, hand


class BackendBase(abc.ABC):
    """The parts of :class:`r2s2r_sim.backend.SimBackend` every backend does the same way.

    A backend sets the attributes below in its ``__init__`` (the controllers from
    :func:`robot_controllers`) and defines :meth:`_require` and :attr:`time_s`.
    """

    arm_controller: JointTrajectoryController
    hand_controller: JointTrajectoryController
    _world: WorldParams | None
    _objects: tuple[ObjectInstance, ...]
    _belt_travel_m: float
    _belt_speed_mps: float

    @abc.abstractmethod
    def _require(self) -> object:
        """Return the simulator's handles; raise :class:`BackendError` before a reset."""

    @property
    @abc.abstractmethod
    def time_s(self) -> float:
        """Simulation time since the last reset (s)."""

    @property
    def world(self) -> WorldParams:
        """See :attr:`r2s2r_sim.backend.SimBackend.world`."""
        if self._world is None:
            raise BackendError("call reset(world, seed) first")
        return self._world

    @property
    def objects(self) -> tuple[ObjectInstance, ...]:
        """The episode's objects."""
        return self._objects

    def _controller_for(self, joint_names: Sequence[str]) -> JointTrajectoryController:
        return controller_for(self.arm_controller, self.hand_controller, joint_names)

    def command_trajectory(
        self,
        joint_names: Sequence[str],
        times_s: Sequence[float] | FloatArray,
        positions: Sequence[Sequence[float]] | FloatArray,
        velocities: Sequence[Sequence[float]] | FloatArray | None = None,
    ) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.command_trajectory`."""
        self._require()
        controller = self._controller_for(joint_names)
        controller.command(self.time_s, joint_names, times_s, positions, velocities)

    def set_joint_targets(self, joint_names: Sequence[str], positions: Sequence[float]) -> None:
        """See :meth:`r2s2r_sim.backend.SimBackend.set_joint_targets`."""
        self.command_trajectory(joint_names, [0.0], [list(positions)])

    @property
    def belt_speed_mps(self) -> float:
        """Current belt speed."""
        return self._belt_speed_mps

    @property
    def belt_travel_m(self) -> float:
        """See :attr:`r2s2r_sim.backend.SimBackend.belt_travel_m`."""
        return self._belt_travel_m

    def _controller_snapshots(self) -> list[dict[str, object]]:
        """Return the controllers' states, arm then hand (for a backend's ``get_state``)."""
        return [self.arm_controller.snapshot(), self.hand_controller.snapshot()]

    def _restore_controllers(self, snapshots: Sequence[dict[str, object]]) -> None:
        """Put back :meth:`_controller_snapshots` (copies: a state can be restored again)."""
        self.arm_controller.restore(copy.deepcopy(snapshots[0]))
        self.hand_controller.restore(copy.deepcopy(snapshots[1]))
