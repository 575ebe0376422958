"""The description data model: links with simple shapes, joints, and forward kinematics.

A :class:`Description` is a tree of :class:`Link` connected by :class:`Joint`. It is the one
source of truth that :mod:`r2s2r_description.urdf` (rviz, ``/robot_description``) and
:mod:`r2s2r_description.mjcf` (the simulator) both export, so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from r2s2r_description.transforms import (
    FloatArray,
    Pose,
    axis_angle_matrix,
    make_transform,
    matrix_to_rpy,
    z_axis_to,
)


class ShapeKind(StrEnum):
    """Primitive shapes. Capsules export to URDF as cylinders of the same straight length."""

    BOX = "box"
    CYLINDER = "cylinder"
    CAPSULE = "capsule"
    SPHERE = "sphere"


class LinkKind(StrEnum):
    """What a link belongs to; decides the simulator's collision filtering."""

    CELL = "cell"  # static furniture: table, belt, bins, camera mounts
    ARM = "arm"  # arm links: collide with objects only
    HAND = "hand"  # hand links: collide with objects and the cell


@dataclass(frozen=True)
class Shape:
    """A primitive shape attached to a link.

    Attributes:
        kind: The primitive.
        size_m: Box: full extents ``(x, y, z)``. Cylinder/capsule: ``(radius, length)`` with
            ``length`` the straight part along the shape's z axis. Sphere: ``(radius,)``.
        origin: Pose of the shape in its link frame.
        rgba: Colour.
        name: Optional geom name (the simulator looks some up, e.g. ``belt_surface``).
        collision: Whether the shape takes part in contacts.

    """

    kind: ShapeKind
    size_m: tuple[float, ...]
    origin: Pose = field(default_factory=Pose)
    rgba: tuple[float, float, float, float] = (0.7, 0.7, 0.7, 1.0)
    name: str | None = None
    collision: bool = True


@dataclass(frozen=True)
class Link:
    """A rigid link (a frame, optionally with shapes).

    Attributes:
        name: Frame name (``base_link``, ``palm_link``...).
        kind: Collision group.
        shapes: Geometry, empty for pure frames.
        camera: Name of the camera whose optical frame this link is (``head_camera``), or None.

    """

    name: str
    kind: LinkKind = LinkKind.CELL
    shapes: tuple[Shape, ...] = ()
    camera: str | None = None


@dataclass(frozen=True)
class JointLimits:
    """Joint limits.

    Attributes:
        lower_rad: Lower position limit.
        upper_rad: Upper position limit.
        velocity_radps: Maximum speed.
        effort_nm: Maximum torque (the simulator's actuator force range).

    """

    lower_rad: float
    upper_rad: float
    velocity_radps: float
    effort_nm: float


@dataclass(frozen=True)
class Joint:
    """A joint from ``parent`` to ``child`` (URDF semantics).

    Attributes:
        name: Joint name.
        parent: Parent link name.
        child: Child link name.
        origin: Pose of the child frame in the parent frame at zero joint position.
        joint_type: ``"revolute"`` or ``"fixed"``.
        axis: Rotation axis in the child frame (revolute only).
        limits: Limits (revolute only).
        armature_kgm2: Reflected rotor inertia (simulator only).
        damping_nms: Passive viscous damping (simulator only).

    """

    name: str
    parent: str
    child: str
    origin: Pose = field(default_factory=Pose)
    joint_type: str = "fixed"
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    limits: JointLimits | None = None
    armature_kgm2: float = 0.0
    damping_nms: float = 0.0


class DescriptionError(ValueError):
    """The description tree is malformed or a query names an unknown link or joint."""


@dataclass(frozen=True)
class Description:
    """A kinematic tree rooted at ``root``.

    Attributes:
        name: Robot/cell name (URDF ``robot name``).
        root: Root link name (``world``).
        links: All links.
        joints: All joints, in an order where parents come before children.

    """

    name: str
    root: str
    links: tuple[Link, ...]
    joints: tuple[Joint, ...]

    def __post_init__(self) -> None:
        """Check that the joints form a tree over the links, parents first."""
        names = {link.name for link in self.links}
        if len(names) != len(self.links):
            raise DescriptionError("duplicate link names in description")
        if self.root not in names:
            raise DescriptionError(f"root link '{self.root}' is not among the links")
        seen = {self.root}
        for joint in self.joints:
            if joint.parent not in seen:
                raise DescriptionError(
                    f"joint '{joint.name}': parent '{joint.parent}' must precede it in the tree"
                )
            if joint.child in seen or joint.child not in names:
                raise DescriptionError(f"joint '{joint.name}': bad child '{joint.child}'")
            if joint.joint_type not in ("fixed", "revolute"):
                raise DescriptionError(
                    f"joint '{joint.name}': type {joint.joint_type!r}, expected fixed|revolute"
                )
            if joint.joint_type == "revolute" and joint.limits is None:
                raise DescriptionError(f"joint '{joint.name}': revolute joint needs limits")
            seen.add(joint.child)
        if seen != names:
            raise DescriptionError(f"links not connected to the root: {sorted(names - seen)}")

    def link(self, name: str) -> Link:
        """Return the link called ``name``.

        Raises:
            DescriptionError: If there is no such link.

        """
        for link in self.links:
            if link.name == name:
                return link
        raise DescriptionError(f"unknown link '{name}'")

    def joint(self, name: str) -> Joint:
        """Return the joint called ``name``.

        Raises:
            DescriptionError: If there is no such joint.

        """
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise DescriptionError(f"unknown joint '{name}'")

    @property
    def movable_joints(self) -> tuple[Joint, ...]:
        """The revolute joints, in tree order."""
        return tuple(j for j in self.joints if j.joint_type == "revolute")


def joint_transform(joint: Joint, position_rad: float) -> FloatArray:
    """Transform parent <- child of ``joint`` at ``position_rad`` (ignored for fixed joints)."""
    transform = joint.origin.matrix()
    if joint.joint_type == "revolute" and position_rad != 0.0:
        motion = make_transform((0.0, 0.0, 0.0), axis_angle_matrix(joint.axis, position_rad))
        transform = transform @ motion
    return transform


def forward_kinematics(
    description: Description, joint_positions: Mapping[str, float] | None = None
) -> dict[str, FloatArray]:
    """Pose of every link in the root frame.

    Args:
        description: The tree.
        joint_positions: Revolute joint positions in radians by name; missing joints are 0.

    Returns:
        Link name -> homogeneous 4x4 transform root <- link.

    Raises:
        DescriptionError: If ``joint_positions`` names a joint that is not movable.

    """
    positions = dict(joint_positions or {})
    movable = {j.name for j in description.movable_joints}
    unknown = set(positions) - movable
    if unknown:
        raise DescriptionError(
            f"unknown joints {sorted(unknown)}; movable joints: {sorted(movable)}"
        )
    poses: dict[str, FloatArray] = {description.root: np.eye(4)}
    for joint in description.joints:
        poses[joint.child] = poses[joint.parent] @ joint_transform(
            joint, float(positions.get(joint.name, 0.0))
        )
    return poses


def capsule_between(
    start_m: Sequence[float],
    end_m: Sequence[float],
    radius_m: float,
    rgba: tuple[float, float, float, float] = (0.7, 0.7, 0.7, 1.0),
    kind: ShapeKind = ShapeKind.CAPSULE,
    name: str | None = None,
) -> Shape:
    """Make a capsule (or cylinder) whose axis runs from ``start_m`` to ``end_m`` (link frame)."""
    start = np.asarray(start_m, dtype=float)
    end = np.asarray(end_m, dtype=float)
    center = 0.5 * (start + end)
    rpy = matrix_to_rpy(z_axis_to(end - start))
    return Shape(
        kind=kind,
        size_m=(radius_m, float(np.linalg.norm(end - start))),
        origin=Pose(
            (float(center[0]), float(center[1]), float(center[2])),
            (float(rpy[0]), float(rpy[1]), float(rpy[2])),
        ),
        rgba=rgba,
        name=name,
    )
