"""Twin frames with ground truth for the tracker's tests and benchmark (needs MuJoCo).

Renders the head camera of a world (the real twin's hidden world as "reality") with objects riding
the belt, and states what the pipeline would know about the camera: the NOMINAL camera_info and
``/tf_static`` (:func:`scene_geometry_from_world` with the nominal world) or what world grounding
would give (the same function with the twin's world). Ground truth from the simulator is returned
for evaluation only; the tracker itself never sees it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

# MuJoCo picks its OpenGL platform at import: headless EGL unless the caller chose another.
os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
from numpy.typing import NDArray
from r2s2r_description.cameras import HEAD
from r2s2r_description.transforms import invert_transform, quat_to_matrix
from r2s2r_sim.backend import ObjectInstance
from r2s2r_sim.backend_config import ClosableSimBackend, make_backend
from r2s2r_world.world import WorldParams

from r2s2r_belt.tracking.geometry import FloatArray


@dataclass(frozen=True)
class TruthPose:
    """Simulator truth of one object in the (true) base frame.

    Attributes:
        name: Object instance name.
        type_name: Its type.
        position_m: (3,) centre in ``base_link``.
        rotation: 3x3 orientation in ``base_link``.
        velocity_mps: (3,) linear velocity in ``base_link``.

    """

    name: str
    type_name: str
    position_m: FloatArray
    rotation: FloatArray
    velocity_mps: FloatArray


@dataclass(frozen=True)
class TwinFrame:
    """One rendered head-camera frame and the truth at its capture time."""

    stamp_s: float
    rgb: NDArray[np.uint8]
    depth_m: NDArray[np.float32]
    truth: tuple[TruthPose, ...]


@dataclass(frozen=True)
class Placement:
    """Where an object starts on the belt (belt frame: x along travel, y across).

    Attributes:
        type_name: Catalogue type.
        belt_x_m: Start along the belt.
        belt_y_m: Lateral offset.
        yaw_rad: Yaw about the belt normal relative to the belt's x axis.

    """

    type_name: str
    belt_x_m: float
    belt_y_m: float
    yaw_rad: float


class TwinScene:
    """A simulator (the factory's default, MuJoCo) on ``world`` with objects on the moving belt.

    Args:
        world: The world that plays reality (the twin's hidden world).
        backend: Reuse a backend (its model is rebuilt only when world or objects change).

    """

    def __init__(self, world: WorldParams, backend: ClosableSimBackend | None = None) -> None:
        self.world = world
        self.backend = backend or make_backend()

    def start(
        self, placements: Sequence[Placement], belt_speed_mps: float | None, seed: int = 0
    ) -> None:
        """Reset with the objects of ``placements`` spawned at rest on the belt."""
        objects = [ObjectInstance(f"object_{i}", p.type_name) for i, p in enumerate(placements)]
        self.backend.reset(self.world, seed, objects)
        if belt_speed_mps is not None:
            self.backend.set_belt_speed(belt_speed_mps)
        world_from_belt = self.world.belt.pose.to_pose().matrix()
        belt_yaw = math.atan2(world_from_belt[1, 0], world_from_belt[0, 0])
        for instance, placement in zip(objects, placements, strict=True):
            height = self.world.objects[placement.type_name].size_m[2]
            local = np.array([placement.belt_x_m, placement.belt_y_m, height / 2.0 + 0.001, 1.0])
            position = (world_from_belt @ local)[:3]
            yaw = belt_yaw + placement.yaw_rad
            quat = (math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0))
            self.backend.spawn_object(instance.name, position, quat)

    def step_s(self, duration_s: float) -> None:
        """Advance the simulation by ``duration_s``."""
        steps = round(duration_s / self.world.physics.timestep_s)
        if steps > 0:
            self.backend.step(steps)

    def truth(self) -> tuple[TruthPose, ...]:
        """Active objects' true poses in the TRUE base frame (evaluation only)."""
        base_from_world = invert_transform(self.world.robot.base_pose.to_pose().matrix())
        poses = []
        for pose in self.backend.object_poses().values():
            if not pose.active:
                continue
            rotation = quat_to_matrix(pose.quat_wxyz)
            poses.append(
                TruthPose(
                    name=pose.name,
                    type_name=pose.type_name,
                    position_m=base_from_world[:3, :3] @ pose.position_m + base_from_world[:3, 3],
                    rotation=base_from_world[:3, :3] @ rotation,
                    velocity_mps=base_from_world[:3, :3] @ pose.linear_velocity_mps,
                )
            )
        return tuple(poses)

    def frame(self) -> TwinFrame:
        """Render the head camera now (RGB + registered depth) with the truth."""
        rgb = self.backend.render(HEAD.name)
        depth = self.backend.render_depth(HEAD.name)
        return TwinFrame(self.backend.time_s, rgb, depth, self.truth())


def yaw_error_rad(estimated_rad: float, true_rad: float, period_rad: float) -> float:
    """Absolute yaw difference modulo the shape's symmetry period (0 period: 0)."""
    if period_rad <= 0.0:
        return 0.0
    difference = (estimated_rad - true_rad + period_rad / 2.0) % period_rad - period_rad / 2.0
    return abs(difference)
