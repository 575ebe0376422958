"""The state publisher's core, free of ROS: joint positions to parent -> child transforms.

What robot_state_publisher does with a URDF, done here on the workspace's own
:class:`~r2s2r_description.model.Description` (one source of truth): every joint gives one
transform from its parent link to its child link, fixed joints once (``/tf_static``), revolute
joints from each joint state (``/tf``). The transforms are exactly
:func:`r2s2r_description.model.joint_transform`, so composing them gives
:func:`r2s2r_description.model.forward_kinematics`, which the simulator's MuJoCo model also
matches: rviz and the simulator see the same robot.

Also reads the cell layout (robot base, belt, bins and camera mounts) from a world YAML file
(``config/world/nominal.yaml`` or a grounded world), so rviz can show a grounded cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator
from r2s2r_common.config import ConfigError, ConfigModel, parse_config, read_yaml

from r2s2r_description.cell import CellLayout
from r2s2r_description.model import Description, joint_transform
from r2s2r_description.transforms import (
    FloatArray,
    Pose,
    make_transform,
    matrix_to_quat,
    quat_to_matrix,
)


@dataclass(frozen=True)
class FrameTransform:
    """One transform ``parent <- child`` (a ``geometry_msgs/TransformStamped`` without stamp).

    Attributes:
        parent: Parent frame (``header.frame_id``).
        child: Child frame (``child_frame_id``).
        translation_m: (3,) child origin in the parent frame.
        quat_wxyz: (4,) child orientation in the parent frame, unit quaternion.

    """

    parent: str
    child: str
    translation_m: tuple[float, float, float]
    quat_wxyz: tuple[float, float, float, float]

    @staticmethod
    def from_matrix(parent: str, child: str, transform: FloatArray) -> FrameTransform:
        """Build from a homogeneous 4x4 transform ``parent <- child``."""
        quat = matrix_to_quat(transform[:3, :3])
        xyz = transform[:3, 3]
        return FrameTransform(
            parent,
            child,
            (float(xyz[0]), float(xyz[1]), float(xyz[2])),
            (float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
        )


class JointStateError(ValueError):
    """A joint state message is malformed (lengths differ, repeated names, non-finite values)."""


@dataclass(frozen=True)
class MovingTransforms:
    """Transforms of the revolute joints named in one joint state.

    Attributes:
        transforms: One per named revolute joint of the description, in tree order.
        unknown_joints: Names in the message that are not revolute joints of the description
            (ignored, as robot_state_publisher does; the node reports them).

    """

    transforms: tuple[FrameTransform, ...]
    unknown_joints: tuple[str, ...]


def fixed_transforms(description: Description) -> list[FrameTransform]:
    """Return the transforms of every fixed joint (what ``/tf_static`` carries), in tree order."""
    return [
        FrameTransform.from_matrix(joint.parent, joint.child, joint_transform(joint, 0.0))
        for joint in description.joints
        if joint.joint_type == "fixed"
    ]


def check_joint_state(names: Sequence[str], positions: Sequence[float]) -> dict[str, float]:
    """Validate a joint state and return positions by name.

    Args:
        names: ``JointState.name``.
        positions: ``JointState.position`` (rad).

    Raises:
        JointStateError: Different lengths, a repeated name or a non-finite position.

    """
    if len(names) != len(positions):
        raise JointStateError(
            f"joint state: {len(names)} names but {len(positions)} positions; expected equal"
        )
    by_name: dict[str, float] = {}
    for name, value in zip(names, positions, strict=True):
        if name in by_name:
            raise JointStateError(f"joint state: name {name!r} appears twice")
        if not math.isfinite(float(value)):
            raise JointStateError(f"joint state: {name} = {value}; expected a finite position")
        by_name[name] = float(value)
    return by_name


def moving_transforms(description: Description, positions: Mapping[str, float]) -> MovingTransforms:
    """Return ``parent <- child`` of each revolute joint present in ``positions``.

    Joints absent from ``positions`` get no transform (their frames keep the last one
    published), as with robot_state_publisher.

    Args:
        description: The kinematic tree.
        positions: Joint positions in radians by name (see :func:`check_joint_state`).

    """
    movable = {joint.name for joint in description.movable_joints}
    transforms = tuple(
        FrameTransform.from_matrix(
            joint.parent, joint.child, joint_transform(joint, positions[joint.name])
        )
        for joint in description.movable_joints
        if joint.name in positions
    )
    unknown = tuple(name for name in positions if name not in movable)
    return MovingTransforms(transforms, unknown)


def compose(transforms: Sequence[FrameTransform], root: str) -> dict[str, FloatArray]:
    """Chain transforms into poses ``root <- frame`` (what a TF listener computes).

    Args:
        transforms: Parent -> child transforms (any order; each child once).
        root: The root frame.

    Returns:
        Frame name -> 4x4 transform for every frame connected to ``root``.

    """
    by_parent: dict[str, list[FrameTransform]] = {}
    for transform in transforms:
        by_parent.setdefault(transform.parent, []).append(transform)
    poses: dict[str, FloatArray] = {root: np.eye(4)}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for transform in by_parent.get(parent, []):
            local = make_transform(transform.translation_m, quat_to_matrix(transform.quat_wxyz))
            poses[transform.child] = poses[parent] @ local
            frontier.append(transform.child)
    return poses


# -- the cell layout of a world file ---------------------------------------------------------


class _PoseSection(ConfigModel):
    xyz_m: tuple[float, float, float] = Field(description="Translation in metres.")
    rpy_rad: tuple[float, float, float] = Field(
        default=(0.0, 0.0, 0.0), description="URDF roll, pitch, yaw in radians."
    )

    @field_validator("xyz_m", "rpy_rad")
    @classmethod
    def _finite(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if not all(math.isfinite(v) for v in value):
            raise ValueError(f"expected finite values, got {value}")
        return value

    def to_pose(self) -> Pose:
        return Pose(self.xyz_m, self.rpy_rad)


class _Lenient(BaseModel):
    """A section whose other keys belong to the world schema (checked by r2s2r_world)."""

    model_config = ConfigDict(extra="ignore")


class _Posed(_Lenient):
    pose: _PoseSection


class _Robot(_Lenient):
    base_pose: _PoseSection


class _Cameras(_Lenient):
    head: _Posed
    hand: _Posed


class _WorldLayoutSections(_Lenient):
    robot: _Robot
    belt: _Posed
    bins: dict[str, _Posed] = Field(min_length=1)
    cameras: _Cameras


def layout_from_world_file(path: str | Path) -> CellLayout:
    """Read the cell placements of a world YAML file (``r2s2r_world.world.WorldParams`` schema).

    Only the pose sections are read here (``robot.base_pose``, ``belt.pose``,
    ``bins.<name>.pose``, ``cameras.head.pose``, ``cameras.hand.pose``); the rest of the file
    is the world schema's to validate. The description package cannot import that schema
    (``r2s2r_world`` depends on the description), hence this reader of a subset.

    Raises:
        ConfigError: Missing file, bad YAML or a missing/invalid pose, named by key.

    """
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a world mapping at the top level")
    sections = parse_config(_WorldLayoutSections, data, str(path))
    return CellLayout(
        base_pose=sections.robot.base_pose.to_pose(),
        belt_pose=sections.belt.pose.to_pose(),
        bin_poses={name: item.pose.to_pose() for name, item in sections.bins.items()},
        head_camera_pose=sections.cameras.head.pose.to_pose(),
        hand_camera_pose=sections.cameras.hand.pose.to_pose(),
    )


def _overridden_pose(pose: Pose, override: Any, key: str, source: str) -> Pose:
    """``pose`` with the keys of a world-override pose mapping replaced (validated)."""
    if not isinstance(override, Mapping):
        raise ConfigError(f"{source}: {key} = {override!r}: expected a mapping with xyz_m, rpy_rad")
    merged = {"xyz_m": pose.xyz_m, "rpy_rad": pose.rpy_rad, **override}
    return parse_config(_PoseSection, merged, f"{source}: {key}").to_pose()


def _section(overrides: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = overrides.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {key} = {value!r}: expected a mapping")
    return value


def apply_layout_overrides(
    layout: CellLayout, overrides: Mapping[str, Any], source: str = "world_overrides"
) -> CellLayout:
    """Return the layout with the poses a grounding artifact's ``world_overrides`` recovered.

    Only placements are read (``robot.base_pose``, ``belt.pose``, ``bins.<name>.pose``,
    ``cameras.head.pose``, ``cameras.hand.pose``); intrinsics, belt speed and controller
    overrides belong to other consumers. Absent entries keep the layout's value.

    Args:
        layout: The layout before grounding (CAD or a world file's).
        overrides: ``world_overrides`` of the artifact (WorldParams field names).
        source: Shown in front of error messages (the artifact path).

    Raises:
        ConfigError: A pose that is not a mapping of finite ``xyz_m``/``rpy_rad`` triples, or a
            bin the layout does not have (named by key).

    """
    robot = _section(overrides, "robot", source)
    belt = _section(overrides, "belt", source)
    cameras = _section(overrides, "cameras", source)
    head = _section(cameras, "head", f"{source}: cameras")
    hand = _section(cameras, "hand", f"{source}: cameras")
    bins = dict(layout.bin_poses)
    for name, entry in _section(overrides, "bins", source).items():
        if name not in bins:
            raise ConfigError(
                f"{source}: bins.{name}: the cell layout has no such bin (bins: {sorted(bins)}); "
                "was the artifact grounded on another cell?"
            )
        if isinstance(entry, Mapping) and "pose" in entry:
            bins[name] = _overridden_pose(bins[name], entry["pose"], f"bins.{name}.pose", source)
    updates: dict[str, Any] = {"bin_poses": bins}
    for field_name, section, key, label in (
        ("base_pose", robot, "base_pose", "robot.base_pose"),
        ("belt_pose", belt, "pose", "belt.pose"),
        ("head_camera_pose", head, "pose", "cameras.head.pose"),
        ("hand_camera_pose", hand, "pose", "cameras.hand.pose"),
    ):
        if key in section:
            updates[field_name] = _overridden_pose(
                getattr(layout, field_name), section[key], label, source
            )
    return replace(layout, **updates)
