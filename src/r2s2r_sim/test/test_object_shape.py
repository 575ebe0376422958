"""One object-shape -> MuJoCo geom mapping, equal to the two it replaced (simulator, planner)."""

from __future__ import annotations

import mujoco
from r2s2r_description.mjcf import geom_type_and_size
from r2s2r_sim.scene import object_shape
from r2s2r_world.world import ObjectType, WorldParams


def _old_object_geom(obj: ObjectType) -> tuple[mujoco.mjtGeom, list[float]]:
    """Verbatim the mapping of ``scene.add_object`` and ``collision._add_attached`` before."""
    x, y, z = obj.size_m
    if obj.shape == "box":
        return mujoco.mjtGeom.mjGEOM_BOX, [x / 2.0, y / 2.0, z / 2.0]
    if obj.shape == "cylinder":
        return mujoco.mjtGeom.mjGEOM_CYLINDER, [x / 2.0, z / 2.0, 0.0]
    return mujoco.mjtGeom.mjGEOM_SPHERE, [x / 2.0, 0.0, 0.0]


def test_object_geoms_are_the_ones_before(nominal_world: WorldParams) -> None:
    objects = list(nominal_world.objects.values())
    shapes = {obj.shape for obj in objects}
    assert shapes == {"box", "cylinder", "sphere"}
    for obj in objects:
        for size in (obj.size_m, (0.031, 0.031, 0.047), (0.123, 0.123, 0.123)):
            sized = obj.model_copy(update={"size_m": size})
            geom_type, geom_size = geom_type_and_size(object_shape(sized))
            old_type, old_size = _old_object_geom(sized)
            assert geom_type == old_type
            assert geom_size == old_size  # exact floats
