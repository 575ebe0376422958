"""Scene elements: rigid sets of boxes with a nominal pose in ``base_link``, and pose directions.

An element says which directions of its pose are known from physics (:attr:`SceneElement.held`)
and which may be unobservable from the camera (:attr:`SceneElement.unobservable_ok`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from r2s2r_common.config import ConfigModel

from r2s2r_calibration.geometry import FloatArray, pose_from_xyz_rpy

FaceName = Literal["+x", "-x", "+y", "-y", "+z", "-z"]
FACES: tuple[FaceName, ...] = ("+x", "-x", "+y", "-y", "+z", "-z")

PoseAxis = Literal["rx", "ry", "rz", "tx", "ty", "tz"]
"""A pose direction in the element frame: rotation about / translation along x, y or z."""
AXES: tuple[PoseAxis, ...] = ("rx", "ry", "rz", "tx", "ty", "tz")


class BoxPrimitive(ConfigModel):
    """One box of an element, in the element frame."""

    size_m: tuple[float, float, float] = Field(description="Box extent along x, y, z (m).")
    xyz_m: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="Box centre in the element frame (m)."
    )
    rpy_rad: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="Box orientation in the element frame (rad)."
    )
    hidden_faces: list[FaceName] = Field(
        default_factory=lambda: list[FaceName](["-z"]),
        description="Faces never seen (resting on something); left out of the model cloud.",
    )

    @field_validator("size_m")
    @classmethod
    def _positive(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if min(value) <= 0:
            raise ValueError(f"size_m = {value}; every extent must be > 0 m")
        return value


class SceneElement(ConfigModel):
    """A rigid scene element (table, belt, bin) with its nominal pose in ``base_link``."""

    name: str = Field(description="Element name, e.g. 'table', 'belt', 'bin_0'.")
    boxes: list[BoxPrimitive] = Field(min_length=1, description="Boxes making up the element.")
    xyz_m: tuple[float, float, float] = Field(description="Nominal position in base_link (m).")
    rpy_rad: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="Nominal orientation in base_link (rad)."
    )
    unobservable_ok: list[PoseAxis] = Field(
        default_factory=list,
        description="Pose directions (element frame; rotations about axes through the observed "
        "points) that may be unobservable from the camera: they are held at the nominal pose "
        "and reported instead of refusing the registration. E.g. ['tx'] for a belt whose ends "
        "(x = travel direction) are out of view.",
    )
    held: list[PoseAxis] = Field(
        default_factory=list,
        description="Pose directions (element frame) known from physics, not registered: they "
        "stay at the nominal pose and are reported as held. E.g. ['rx', 'ry', 'tz'] for a bin "
        "standing on the table (its height, roll and pitch are the table top's), which leaves "
        "x, y and yaw to the registration.",
    )

    on_support: bool = Field(
        False,
        description="The element stands on a plane at z = 0 of its frame (a bin on the table "
        "top). Observed points nearer to that plane than to the element are the support's and "
        "are left out; otherwise the table next to a wall's bottom edge drags the wall "
        "sideways.",
    )

    @field_validator("held")
    @classmethod
    def _not_all_held(cls, value: list[PoseAxis]) -> list[PoseAxis]:
        if len(set(value)) == len(AXES):
            raise ValueError(
                f"held = {value} holds every pose direction; leave at least one to register"
            )
        return value

    def nominal_pose(self) -> FloatArray:
        """``T_base_element`` at the nominal pose."""
        return pose_from_xyz_rpy(self.xyz_m, self.rpy_rad)
