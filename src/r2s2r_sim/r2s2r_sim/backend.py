"""The simulator backend interface: what the twin, the bridge, generation and evaluation use.

MuJoCo implements it in :mod:`r2s2r_sim.mujoco_backend`, Isaac Sim (unverified) in
:mod:`r2s2r_sim.isaac_backend`; :mod:`r2s2r_sim.backend_config` selects one by config and
``test_backend_conformance.py`` checks every backend against this protocol.
Frames: positions and orientations are in ``world``; joint vectors follow
:data:`r2s2r_description.robot.ALL_JOINT_NAMES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from r2s2r_description.transforms import Vector
from r2s2r_world.world import WorldParams

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class ObjectInstance:
    """An object that takes part in an episode (added to the scene, parked until spawned).

    Attributes:
        name: Unique name (also its body name), e.g. ``object_0``.
        type_name: A key of :attr:`WorldParams.objects`.

    """

    name: str
    type_name: str


@dataclass(frozen=True)
class ObjectPose:
    """State of one object in ``world``.

    Attributes:
        name: Object name.
        type_name: Object type.
        position_m: (3,) position of its centre.
        quat_wxyz: (4,) orientation.
        linear_velocity_mps: (3,) velocity.
        active: False while parked out of the scene (not yet arrived).

    """

    name: str
    type_name: str
    position_m: FloatArray
    quat_wxyz: FloatArray
    linear_velocity_mps: FloatArray
    active: bool


@dataclass(frozen=True)
class Contact:
    """One active contact.

    Attributes:
        body1: Name of the first body (``world`` for static cell geometry at the root).
        body2: Name of the second body.
        geom1: Name of the first geom ('' when unnamed).
        geom2: Name of the second geom.
        position_m: (3,) contact point in ``world``.
        normal_force_n: Normal force magnitude.

    """

    body1: str
    body2: str
    geom1: str
    geom2: str
    position_m: FloatArray
    normal_force_n: float


class BackendError(RuntimeError):
    """The backend was used out of order (e.g. before reset) or asked for an unknown name."""


class BackendUnavailableError(BackendError):
    """The requested simulator backend cannot run here (the message says why, in one line)."""


@runtime_checkable
class SimBackend(Protocol):
    """A simulator of the cell with ros2_control-like controllers and calibrated cameras."""

    @property
    def time_s(self) -> float:
        """Simulated time since reset."""
        ...

    @property
    def world(self) -> WorldParams:
        """The world parameters in effect."""
        ...

    def reset(self, world: WorldParams, seed: int, objects: Sequence[ObjectInstance] = ()) -> None:
        """Start an episode: build/refresh the scene from ``world``, robot at home, objects parked.

        Args:
            world: World parameters (poses, intrinsics, gains, belt speed, lighting...).
            seed: Episode seed (for any randomness inside the backend).
            objects: Objects that may appear in this episode (spawned later).

        """
        ...

    def step(self, n_steps: int = 1) -> None:
        """Advance ``n_steps`` physics steps, running the controllers at their rate."""
        ...

    def command_trajectory(
        self,
        joint_names: Sequence[str],
        times_s: Sequence[float] | FloatArray,
        positions: Sequence[Sequence[float]] | FloatArray,
        velocities: Sequence[Sequence[float]] | FloatArray | None = None,
    ) -> None:
        """Send a JointTrajectory to the arm or hand controller (chosen by the joint names).

        Raises:
            r2s2r_sim.controllers.TrajectoryError: Wrong joint names, lengths or times; the
                robot keeps doing what it did.

        """
        ...

    def set_joint_targets(self, joint_names: Sequence[str], positions: Sequence[float]) -> None:
        """Command a step to ``positions`` (a one-point trajectory at ``time_from_start = 0``)."""
        ...

    def joint_positions(self) -> FloatArray:
        """Measured joint positions (rad), :data:`ALL_JOINT_NAMES` order."""
        ...

    def joint_velocities(self) -> FloatArray:
        """Measured joint velocities (rad/s), :data:`ALL_JOINT_NAMES` order."""
        ...

    def render(self, camera_name: str) -> NDArray[np.uint8]:
        """Render an RGB image (H x W x 3) of ``head_camera`` or ``hand_camera``.

        The world's intrinsics, distortion and blur are applied.
        """
        ...

    def render_depth(self, camera_name: str) -> NDArray[np.float32]:
        """Depth image (H x W, metres along the optical axis) with the same geometry as RGB."""
        ...

    def spawn_object(
        self,
        name: str,
        position_m: Vector,
        quat_wxyz: Vector = (1.0, 0.0, 0.0, 0.0),
    ) -> None:
        """Put a parked object into the scene at rest at a pose in ``world``."""
        ...

    def object_poses(self) -> dict[str, ObjectPose]:
        """Pose and velocity of every object of the episode."""
        ...

    def contacts(self) -> list[Contact]:
        """Active contacts."""
        ...

    def body_pose(self, name: str) -> FloatArray:
        """4x4 pose in ``world`` of a link/body (e.g. ``palm_link``, ``bin_0_link``)."""
        ...

    def set_belt_speed(self, speed_mps: float) -> None:
        """Change the belt speed (m/s along ``belt_link`` x)."""
        ...

    @property
    def belt_travel_m(self) -> float:
        """Belt surface travel since reset (what the encoder integrates)."""
        ...

    def get_state(self) -> object:
        """Return an opaque snapshot of the full simulation state (physics, controllers, belt)."""
        ...

    def set_state(self, state: object) -> None:
        """Restore a snapshot from :meth:`get_state` (same world and objects)."""
        ...


@runtime_checkable
class SceneSnapshots(Protocol):
    """A backend that can draw a past instant again, from what its cameras saw, without physics.

    Generation steps an attempt with snapshots at its frame times and renders them only if the
    attempt succeeds (:mod:`r2s2r_datagen.recording`): a render of a shown snapshot is, array
    for array, the render at the instant it was taken.
    """

    def scene_snapshot(self) -> object:
        """Return an opaque copy of what a render draws now (the poses of everything drawn)."""
        ...

    def show_scene_snapshot(self, snapshot: object) -> None:
        """Pose the drawn scene as in ``snapshot`` (same world and objects) for rendering.

        Renders and body poses read the snapshot's instant until the next step or reset, or
        until a snapshot of now is shown again; joints, objects and the physics are untouched.

        Raises:
            BackendError: If ``snapshot`` is not one of this backend's scene snapshots.

        """
        ...


def belt_encoder_angle_rad(belt_travel_m: float, roller_radius_m: float) -> float:
    """Roller angle of a belt encoder: travel / roller radius (no slip).

    Raises:
        ValueError: If the radius is not positive.

    """
    if roller_radius_m <= 0.0:
        raise ValueError(f"roller_radius_m = {roller_radius_m}: expected > 0")
    return belt_travel_m / roller_radius_m
