"""rviz markers of the cell, free of ROS: what ``/cell/markers`` shows, as plain specs.

:func:`cell_markers` turns the static cell of a :class:`~r2s2r_description.model.Description`
(table, belt, bins, camera housing; not the robot, which rviz's RobotModel draws from
``/robot_description``) into :class:`MarkerSpec` in the frame of the link that carries each
shape, so the markers move with ``/tf``. :func:`object_marker` draws an object of a world object
type (shape, size and colour of :class:`~r2s2r_world.world.ObjectType`) at a pose in any frame.
The sim bridge converts the specs into ``visualization_msgs/MarkerArray``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from r2s2r_description.model import Description, LinkKind, Shape, ShapeKind
from r2s2r_description.transforms import Vector, matrix_to_quat, rpy_to_matrix
from r2s2r_world.world import ObjectType

Rgba = tuple[float, float, float, float]


class MarkerShape(StrEnum):
    """rviz marker primitives (``visualization_msgs/Marker`` CUBE, CYLINDER, SPHERE)."""

    CUBE = "cube"
    CYLINDER = "cylinder"
    SPHERE = "sphere"


class MarkerError(ValueError):
    """A marker cannot be made: unknown object type, bad pose or size."""


@dataclass(frozen=True)
class MarkerSpec:
    """One rviz marker.

    Attributes:
        namespace: Marker namespace (``table``, ``belt``, ``bins``, ``cameras``, ``objects``).
        marker_id: Id, unique within the namespace.
        shape: Primitive.
        frame_id: Frame the pose is expressed in (a TF frame).
        position_m: (3,) centre of the primitive in ``frame_id``.
        quat_wxyz: (4,) orientation in ``frame_id`` (a cylinder's axis is its z).
        scale_m: Full extents x, y, z (a cylinder's x and y are its diameter).
        rgba: Colour, each channel in [0, 1].
        label: What it is (a shape or object name), for text labels and tests.

    """

    namespace: str
    marker_id: int
    shape: MarkerShape
    frame_id: str
    position_m: tuple[float, float, float]
    quat_wxyz: tuple[float, float, float, float]
    scale_m: tuple[float, float, float]
    rgba: Rgba
    label: str


def _namespace(link_name: str, shape: Shape) -> str:
    if link_name == "belt_link":
        return "belt"
    if link_name.startswith("bin_") and link_name.endswith("_link"):
        return "bins"
    if "camera" in link_name:
        return "cameras"
    return shape.name or link_name


def _shape_marker(
    shape: Shape, frame_id: str, namespace: str, marker_id: int, label: str
) -> MarkerSpec:
    quat = matrix_to_quat(rpy_to_matrix(shape.origin.rpy_rad))
    if shape.kind == ShapeKind.BOX:
        kind, scale = MarkerShape.CUBE, tuple(float(v) for v in shape.size_m)
    elif shape.kind in (ShapeKind.CYLINDER, ShapeKind.CAPSULE):
        # A capsule is drawn as a cylinder of its straight length, as the URDF export does.
        radius, length = shape.size_m
        kind, scale = MarkerShape.CYLINDER, (2.0 * radius, 2.0 * radius, float(length))
    else:
        diameter = 2.0 * float(shape.size_m[0])
        kind, scale = MarkerShape.SPHERE, (diameter, diameter, diameter)
    x, y, z = (float(v) for v in shape.origin.xyz_m)
    return MarkerSpec(
        namespace=namespace,
        marker_id=marker_id,
        shape=kind,
        frame_id=frame_id,
        position_m=(x, y, z),
        quat_wxyz=(float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
        scale_m=(scale[0], scale[1], scale[2]),
        rgba=shape.rgba,
        label=label,
    )


def cell_markers(description: Description, include_floor: bool = False) -> list[MarkerSpec]:
    """Markers of the static cell: table, belt, bins and camera housing, in their link frames.

    Args:
        description: The cell description (nominal or grounded layout).
        include_floor: Also draw the 6 m floor slab (``world`` frame); off by default because
            rviz's grid already shows the floor.

    Returns:
        One marker per shape of every cell link; ids count up per namespace.

    """
    markers: list[MarkerSpec] = []
    next_id: dict[str, int] = {}
    for link in description.links:
        if link.kind != LinkKind.CELL:
            continue
        for index, shape in enumerate(link.shapes):
            if shape.name == "floor" and not include_floor:
                continue
            namespace = _namespace(link.name, shape)
            marker_id = next_id.get(namespace, 0)
            next_id[namespace] = marker_id + 1
            label = shape.name or f"{link.name}_{index}"
            markers.append(_shape_marker(shape, link.name, namespace, marker_id, label))
    return markers


def object_marker(
    marker_id: int,
    type_name: str,
    object_types: Mapping[str, ObjectType],
    frame_id: str,
    position_m: Vector,
    quat_wxyz: Vector,
    namespace: str = "objects",
) -> MarkerSpec:
    """Make the marker of one object with its type's shape, size and colour.

    Args:
        marker_id: Id within ``namespace`` (e.g. the track id).
        type_name: Object type (a key of ``object_types``).
        object_types: The world's object types.
        frame_id: Frame of the pose (``base_link`` for tracks, ``world`` for simulator state).
        position_m: (3,) centre of the object.
        quat_wxyz: (4,) orientation (a cylinder's axis is its z, as in the simulator).
        namespace: Marker namespace.

    Raises:
        MarkerError: Unknown type, or a non-finite position or zero quaternion.

    """
    if type_name not in object_types:
        raise MarkerError(
            f"object type {type_name!r}: unknown; expected one of {sorted(object_types)}"
        )
    position = np.asarray(position_m, dtype=float)
    quat = np.asarray(quat_wxyz, dtype=float)
    if position.shape != (3,) or not np.all(np.isfinite(position)):
        raise MarkerError(f"position_m = {list(position_m)}: expected 3 finite values")
    norm = float(np.linalg.norm(quat)) if quat.shape == (4,) else 0.0
    if not (np.isfinite(norm) and norm > 1e-9):
        raise MarkerError(f"quat_wxyz = {list(quat_wxyz)}: expected a non-zero quaternion")
    quat = quat / norm
    object_type = object_types[type_name]
    shape = {
        "box": MarkerShape.CUBE,
        "cylinder": MarkerShape.CYLINDER,
        "sphere": MarkerShape.SPHERE,
    }[object_type.shape]
    sx, sy, sz = object_type.size_m
    return MarkerSpec(
        namespace=namespace,
        marker_id=marker_id,
        shape=shape,
        frame_id=frame_id,
        position_m=(float(position[0]), float(position[1]), float(position[2])),
        quat_wxyz=(float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
        scale_m=(float(sx), float(sy), float(sz)),
        rgba=object_type.rgba,
        label=type_name,
    )
