"""Build the MuJoCo model of a world: the description, lights, belt motion and the objects."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
import numpy as np
from r2s2r_description.cell import build_description
from r2s2r_description.mjcf import OBJECT_COLLISION_BITS, geom_type_and_size, to_mjspec
from r2s2r_description.model import Shape, ShapeKind
from r2s2r_world.world import LightingParams, ObjectType, WorldParams

from r2s2r_sim.backend import BackendError, ObjectInstance

BELT_GEOM = "belt_surface"
"""Name of the belt's top-surface geom (carries ``surfacevel``)."""

PRIMITIVE_DETAIL: tuple[int, int] = (28, 16)
"""Slices and stacks of rendered spheres, capsules and cylinders: MuJoCo's default
(``visual/quality`` ``numslices``, ``numstacks``), what the real twin renders with."""

SCENE_CACHE_SIZE = 4
"""Compiled scenes a MuJoCo backend keeps by default (one per world and set of episode
objects: the four object types of a generation configuration)."""


def park_position(index: int) -> tuple[float, float, float]:
    """Where parked object ``index`` waits: under the floor, out of every camera's view."""
    return (0.0, 0.5 * index, -1.0)


def object_shape(obj: ObjectType) -> Shape:
    """Return the description's primitive of an object type, centred on the object's frame.

    The one object-shape -> geometry mapping: a world's ``size_m`` is the full bounding box
    (a cylinder's diameter, diameter, height; a sphere's diameter three times), a
    :class:`Shape`'s is the description's (a box's extents, a cylinder's radius and length, a
    sphere's radius); :func:`r2s2r_description.mjcf.geom_type_and_size` makes the MuJoCo geom.
    """
    x, _, z = obj.size_m
    if obj.shape == "box":
        return Shape(ShapeKind.BOX, tuple(obj.size_m))
    if obj.shape == "cylinder":
        return Shape(ShapeKind.CYLINDER, (x / 2.0, z))
    return Shape(ShapeKind.SPHERE, (x / 2.0,))


def add_object(spec: mujoco.MjSpec, instance: ObjectInstance, obj: ObjectType, index: int) -> None:
    """Add a free object body (parked) of type ``obj`` to ``spec``."""
    body = spec.worldbody.add_body()
    body.name = instance.name
    body.pos = list(park_position(index))
    body.gravcomp = 1.0  # parked objects float still; spawning sets gravcomp to 0
    joint = body.add_freejoint()
    joint.name = f"{instance.name}_joint"
    geom = body.add_geom()
    geom.name = f"{instance.name}_geom"
    geom.type, geom.size = geom_type_and_size(object_shape(obj))
    geom.mass = obj.mass_kg
    geom.friction = [obj.friction, 0.005, 0.002]
    # Torsional friction helps grasps. Round shapes (spheres, and cylinders lying on their side)
    # also get rolling friction (condim 6): without it the belt cannot carry a sphere and a
    # cylinder that falls over in a bin rolls between its walls for ever (never at rest).
    geom.condim = 6 if obj.shape in ("sphere", "cylinder") else 4
    geom.rgba = list(obj.rgba)
    geom.contype, geom.conaffinity = OBJECT_COLLISION_BITS


SceneExtra = Callable[[mujoco.MjSpec], None]
"""Adds bodies that are not part of the cell (e.g. the real twin's calibration board) to a spec."""


def apply_lighting(model: mujoco.MjModel, lighting: LightingParams) -> None:
    """Set the compiled model's light (``sun``) to ``lighting``, without recompiling.

    The renderer reads the light every frame, so a backend can change lighting per episode
    (generation's lighting randomization, the twin's lighting shift) on the same model.
    """
    index = model.light("sun").id
    direction = np.asarray(lighting.direction, dtype=float)
    model.light_dir[index] = direction / np.linalg.norm(direction)
    model.light_diffuse[index] = [lighting.diffuse] * 3
    model.light_ambient[index] = [lighting.ambient] * 3
    model.light_specular[index] = [lighting.specular] * 3


def build_model(
    world: WorldParams,
    objects: Sequence[ObjectInstance] = (),
    extras: Sequence[SceneExtra] = (),
    primitive_detail: tuple[int, int] = PRIMITIVE_DETAIL,
) -> mujoco.MjModel:
    """Compile the MuJoCo model of ``world`` with ``objects`` parked and ``extras`` applied.

    ``primitive_detail`` (slices, stacks) is how finely renderers made for the model draw
    spheres, capsules and cylinders; physics never reads it.

    Raises:
        BackendError: If an object names an unknown type or names repeat.

    """
    spec = to_mjspec(
        build_description(world.layout()),
        joint_gains=world.joint_gains(),
        timestep_s=world.physics.timestep_s,
    )
    spec.visual.map.znear = 0.005  # fraction of the model extent (a few mm): close hand views
    spec.visual.map.zfar = 5.0
    spec.visual.quality.numslices, spec.visual.quality.numstacks = primitive_detail
    # The offscreen buffer every renderer of the model draws into: the cameras' size, not
    # MuJoCo's 640 x 480. The same pixels (test_camera.py), and each render clears and
    # resolves a buffer that fits the core's cache.
    cameras = (world.cameras.head, world.cameras.hand)
    spec.visual.global_.offwidth = max(camera.width_px for camera in cameras)
    spec.visual.global_.offheight = max(camera.height_px for camera in cameras)
    light = spec.worldbody.add_light()
    light.name = "sun"
    light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    direction = np.asarray(world.lighting.direction, dtype=float)
    light.dir = list(direction / np.linalg.norm(direction))
    light.pos = [0.0, 0.0, 3.0]
    light.diffuse = [world.lighting.diffuse] * 3
    light.ambient = [world.lighting.ambient] * 3
    light.specular = [world.lighting.specular] * 3
    light.castshadow = False
    names: set[str] = set()
    for index, instance in enumerate(objects):
        if instance.type_name not in world.objects:
            raise BackendError(
                f"object {instance.name!r}: type {instance.type_name!r} not in world objects "
                f"{sorted(world.objects)}"
            )
        if instance.name in names:
            raise BackendError(f"object name {instance.name!r} repeats")
        names.add(instance.name)
        add_object(spec, instance, world.objects[instance.type_name], index)
    for extra in extras:
        extra(spec)
    # MuJoCo only moves the surface of geoms whose surfacevel is non-zero at compile time, so
    # compile with a unit speed and set the actual (possibly zero) speed on the model below.
    spec.geom(BELT_GEOM).surfacevel = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    model = spec.compile()
    belt_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, BELT_GEOM)
    model.geom_surfacevel[belt_id, :] = [world.belt.speed_mps, 0.0, 0.0, 0.0, 0.0, 0.0]
    return model
