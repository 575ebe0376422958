"""URDF export (``/robot_description`` for rviz and robot_state_publisher) and a NumPy reader.

The reader exists so tests and tools can check what rviz gets without ROS: it parses the URDF
string and computes forward kinematics with the URDF semantics (origin then axis rotation).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from r2s2r_description.model import Description, Shape, ShapeKind
from r2s2r_description.transforms import (
    FloatArray,
    axis_angle_matrix,
    make_transform,
    rpy_to_matrix,
)


def _fmt(values: tuple[float, ...] | list[float]) -> str:
    return " ".join(f"{float(v):.9g}" for v in values)


def _geometry_element(parent: ET.Element, shape: Shape) -> None:
    geometry = ET.SubElement(parent, "geometry")
    if shape.kind == ShapeKind.BOX:
        ET.SubElement(geometry, "box", size=_fmt(shape.size_m))
    elif shape.kind in (ShapeKind.CYLINDER, ShapeKind.CAPSULE):
        radius, length = shape.size_m
        ET.SubElement(geometry, "cylinder", radius=f"{radius:.9g}", length=f"{length:.9g}")
    else:
        ET.SubElement(geometry, "sphere", radius=f"{shape.size_m[0]:.9g}")


def to_urdf(description: Description) -> str:
    """Export the description as a URDF string.

    Capsules become cylinders of the same straight length (URDF has no capsule); every shape is
    a ``visual`` and, when it collides in the simulator, also a ``collision``.

    Args:
        description: The tree to export.

    Returns:
        The URDF XML text.

    """
    robot = ET.Element("robot", name=description.name)
    materials: dict[tuple[float, ...], str] = {}
    for link in description.links:
        element = ET.SubElement(robot, "link", name=link.name)
        for index, shape in enumerate(link.shapes):
            tags = ("visual", "collision") if shape.collision else ("visual",)
            for tag in tags:
                item = ET.SubElement(element, tag, name=shape.name or f"{link.name}_{index}")
                ET.SubElement(
                    item, "origin", xyz=_fmt(shape.origin.xyz_m), rpy=_fmt(shape.origin.rpy_rad)
                )
                _geometry_element(item, shape)
                if tag == "visual":
                    key = tuple(round(c, 3) for c in shape.rgba)
                    if key not in materials:
                        materials[key] = f"color_{len(materials)}"
                        mat = ET.SubElement(robot, "material", name=materials[key])
                        ET.SubElement(mat, "color", rgba=_fmt(key))
                    ET.SubElement(item, "material", name=materials[key])
    for joint in description.joints:
        element = ET.SubElement(robot, "joint", name=joint.name, type=joint.joint_type)
        ET.SubElement(element, "parent", link=joint.parent)
        ET.SubElement(element, "child", link=joint.child)
        ET.SubElement(
            element, "origin", xyz=_fmt(joint.origin.xyz_m), rpy=_fmt(joint.origin.rpy_rad)
        )
        if joint.joint_type == "revolute" and joint.limits is not None:
            ET.SubElement(element, "axis", xyz=_fmt(joint.axis))
            ET.SubElement(
                element,
                "limit",
                lower=f"{joint.limits.lower_rad:.9g}",
                upper=f"{joint.limits.upper_rad:.9g}",
                velocity=f"{joint.limits.velocity_radps:.9g}",
                effort=f"{joint.limits.effort_nm:.9g}",
            )
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"


@dataclass(frozen=True)
class UrdfJoint:
    """A joint read back from URDF text."""

    name: str
    joint_type: str
    parent: str
    child: str
    origin: FloatArray
    axis: FloatArray


class UrdfError(ValueError):
    """The URDF text is malformed or a query names an unknown joint."""


def parse_urdf_joints(urdf_text: str) -> list[UrdfJoint]:
    """Read the joints of a URDF, ordered so that parents come before children.

    Raises:
        UrdfError: If the text is not a URDF tree.

    """
    root = ET.fromstring(urdf_text)
    joints: list[UrdfJoint] = []
    for element in root.findall("joint"):
        origin_el = element.find("origin")
        xyz = [0.0, 0.0, 0.0]
        rpy = [0.0, 0.0, 0.0]
        if origin_el is not None:
            xyz = [float(v) for v in origin_el.get("xyz", "0 0 0").split()]
            rpy = [float(v) for v in origin_el.get("rpy", "0 0 0").split()]
        axis_el = element.find("axis")
        axis = (
            [1.0, 0.0, 0.0]
            if axis_el is None
            else [float(v) for v in axis_el.get("xyz", "1 0 0").split()]
        )
        parent_el, child_el = element.find("parent"), element.find("child")
        if parent_el is None or child_el is None:
            raise UrdfError(f"joint '{element.get('name')}' lacks parent or child")
        joints.append(
            UrdfJoint(
                name=str(element.get("name")),
                joint_type=str(element.get("type")),
                parent=str(parent_el.get("link")),
                child=str(child_el.get("link")),
                origin=make_transform(xyz, rpy_to_matrix(rpy)),
                axis=np.asarray(axis, dtype=float),
            )
        )
    children = {j.child for j in joints}
    roots = {j.parent for j in joints} - children
    if len(roots) != 1:
        raise UrdfError(f"expected one root link, found {sorted(roots)}")
    ordered: list[UrdfJoint] = []
    frontier = set(roots)
    remaining = list(joints)
    while remaining:
        ready = [j for j in remaining if j.parent in frontier]
        if not ready:
            raise UrdfError("URDF joints do not form a tree")
        for joint in ready:
            ordered.append(joint)
            frontier.add(joint.child)
            remaining.remove(joint)
    return ordered


def urdf_forward_kinematics(
    urdf_text: str, joint_positions: Mapping[str, float] | None = None
) -> dict[str, FloatArray]:
    """Pose of every URDF link in the root frame, computed independently of the description.

    Args:
        urdf_text: URDF XML.
        joint_positions: Revolute/continuous joint positions (rad); missing joints are 0.

    Returns:
        Link name -> 4x4 transform root <- link.

    """
    joints = parse_urdf_joints(urdf_text)
    positions = joint_positions or {}
    root = joints[0].parent
    poses: dict[str, FloatArray] = {root: np.eye(4)}
    for joint in joints:
        transform = poses[joint.parent] @ joint.origin
        if joint.joint_type in ("revolute", "continuous"):
            angle = float(positions.get(joint.name, 0.0))
            motion = make_transform((0, 0, 0), axis_angle_matrix(joint.axis, angle))
            transform = np.asarray(transform @ motion, dtype=float)
        poses[joint.child] = transform
    return poses


@dataclass(frozen=True)
class UrdfVisual:
    """One ``<visual>`` of a URDF link: a primitive in its link's frame.

    Attributes:
        link: The link (frame) the shape is attached to.
        kind: ``box``, ``cylinder`` or ``sphere`` (a URDF ``<mesh>`` is skipped by the parser).
        size_m: Box: full extents ``(x, y, z)``; cylinder: ``(radius, length)`` along the
            shape's z axis; sphere: ``(radius,)``.
        origin: 4x4 transform link <- shape.
        rgba: Colour (0..1) of its material, grey when it names none.

    """

    link: str
    kind: str
    size_m: tuple[float, ...]
    origin: FloatArray
    rgba: tuple[float, float, float, float]


def _floats(text: str | None, default: str) -> list[float]:
    return [float(v) for v in (text or default).split()]


def parse_urdf_visuals(urdf_text: str) -> list[UrdfVisual]:
    """Read every primitive ``<visual>`` of a URDF (what rviz's RobotModel draws).

    Materials are resolved by name from the robot's top-level ``<material>`` elements or
    read inline; meshes are skipped (the workspace's description has none).

    Raises:
        UrdfError: If the text is not XML, or a shape lacks its size attribute.

    """
    try:
        root = ET.fromstring(urdf_text)
    except ET.ParseError as error:
        raise UrdfError(f"URDF is not XML: {error}") from None
    named: dict[str, tuple[float, float, float, float]] = {}
    for defined in root.findall("material"):
        color = defined.find("color")
        if color is not None:
            r, g, b, a = _floats(color.get("rgba"), "0.7 0.7 0.7 1")
            named[str(defined.get("name"))] = (r, g, b, a)
    visuals: list[UrdfVisual] = []
    for link in root.findall("link"):
        for visual in link.findall("visual"):
            origin_el = visual.find("origin")
            xyz = _floats(None if origin_el is None else origin_el.get("xyz"), "0 0 0")
            rpy = _floats(None if origin_el is None else origin_el.get("rpy"), "0 0 0")
            geometry = visual.find("geometry")
            shape = None if geometry is None else next(iter(geometry), None)
            if shape is None or shape.tag not in ("box", "cylinder", "sphere"):
                continue
            attributes = {"box": ("size",), "cylinder": ("radius", "length"), "sphere": ("radius",)}
            size: list[float] = []
            for attribute in attributes[shape.tag]:
                if shape.get(attribute) is None:
                    raise UrdfError(
                        f"link '{link.get('name')}': <{shape.tag}> lacks its '{attribute}'"
                    )
                size += _floats(shape.get(attribute), "")
            rgba = (0.7, 0.7, 0.7, 1.0)
            material = visual.find("material")
            if material is not None:
                inline = material.find("color")
                if inline is not None:
                    r, g, b, a = _floats(inline.get("rgba"), "0.7 0.7 0.7 1")
                    rgba = (r, g, b, a)
                else:
                    rgba = named.get(str(material.get("name")), rgba)
            visuals.append(
                UrdfVisual(
                    link=str(link.get("name")),
                    kind=shape.tag,
                    size_m=tuple(size),
                    origin=make_transform(xyz, rpy_to_matrix(rpy)),
                    rgba=rgba,
                )
            )
    return visuals
