"""The cell around the robot: floor, table, conveyor belt, sorting bins and the head camera.

Frames: ``world`` is on the floor; ``base_link`` sits on the table; ``belt_link`` is on the
belt's top surface at its centre with ``+x`` the direction of travel; ``<bin>_link`` is at the
centre of a bin's outer bottom face; ``head_camera_link`` follows REP 103 (x forward).
All placements come in a :class:`CellLayout`; :data:`NOMINAL_LAYOUT` holds the CAD values that
``config/world/nominal.yaml`` repeats and that ``/tf_static`` and ``/robot_description`` carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from r2s2r_description.cameras import HEAD
from r2s2r_description.frames import BASE_LINK, WORLD_FRAME
from r2s2r_description.model import Description, Joint, Link, LinkKind, Shape, ShapeKind
from r2s2r_description.robot import OPTICAL_FROM_LINK, arm_links_and_joints, hand_links_and_joints
from r2s2r_description.transforms import Pose

TABLE_TOP_Z_M = 0.75
TABLE_SIZE_M = (1.0, 1.4)
TABLE_CENTER_XY_M = (-0.15, 0.0)
BELT_LENGTH_M = 1.6
BELT_WIDTH_M = 0.30
BELT_THICKNESS_M = 0.04
BIN_INNER_SIZE_M = (0.24, 0.24)
BIN_WALL_HEIGHT_M = 0.12
BIN_WALL_THICKNESS_M = 0.01

_HEAD_CAMERA_PITCH_RAD = float(np.arctan2(1.0, 1.25))
_BASE_POSE = Pose((0.0, 0.0, TABLE_TOP_Z_M), (0.0, 0.0, np.pi))
_BELT_POSE = Pose((0.55, 0.0, 0.80), (0.0, 0.0, np.pi / 2.0))
_HEAD_CAMERA_POSE = Pose((1.30, 0.0, 1.75), (0.0, _HEAD_CAMERA_PITCH_RAD, np.pi))
_HAND_CAMERA_POSE = Pose((0.062, 0.0, -0.012), (0.0, -np.pi / 2.0, 0.0))


def _default_bins() -> dict[str, Pose]:
    return {
        "bin_0": Pose((-0.40, -0.32, TABLE_TOP_Z_M)),
        "bin_1": Pose((-0.40, 0.0, TABLE_TOP_Z_M)),
        "bin_2": Pose((-0.40, 0.32, TABLE_TOP_Z_M)),
    }


@dataclass(frozen=True)
class CellLayout:
    """Where the cell's parts are.

    Attributes:
        base_pose: ``base_link`` in ``world``.
        belt_pose: ``belt_link`` in ``world`` (top surface centre, x = travel direction).
        bin_poses: ``<name>_link`` in ``world`` per bin (outer bottom centre).
        head_camera_pose: ``head_camera_link`` in ``world``.
        hand_camera_pose: ``hand_camera_link`` in ``palm_link``.

    """

    base_pose: Pose = _BASE_POSE
    belt_pose: Pose = _BELT_POSE
    bin_poses: dict[str, Pose] = field(default_factory=_default_bins)
    head_camera_pose: Pose = _HEAD_CAMERA_POSE
    hand_camera_pose: Pose = _HAND_CAMERA_POSE


NOMINAL_LAYOUT = CellLayout()
"""The CAD layout (the uncalibrated simulator and the published ``/tf_static``)."""

_TABLE = (0.62, 0.50, 0.38, 1.0)
_BELT = (0.12, 0.12, 0.13, 1.0)
_FRAME = (0.35, 0.37, 0.40, 1.0)
_BIN = (0.30, 0.55, 0.35, 1.0)
_FLOOR = (0.45, 0.45, 0.45, 1.0)


def _bin_shapes(name: str) -> tuple[Shape, ...]:
    inner_x, inner_y = BIN_INNER_SIZE_M
    wall, height = BIN_WALL_THICKNESS_M, BIN_WALL_HEIGHT_M
    outer_x, outer_y = inner_x + 2 * wall, inner_y + 2 * wall
    return (
        Shape(
            ShapeKind.BOX, (outer_x, outer_y, wall), Pose((0, 0, wall / 2)), _BIN, f"{name}_floor"
        ),
        Shape(
            ShapeKind.BOX,
            (wall, outer_y, height),
            Pose(((outer_x - wall) / 2, 0, height / 2)),
            _BIN,
            f"{name}_wall_px",
        ),
        Shape(
            ShapeKind.BOX,
            (wall, outer_y, height),
            Pose((-(outer_x - wall) / 2, 0, height / 2)),
            _BIN,
            f"{name}_wall_nx",
        ),
        Shape(
            ShapeKind.BOX,
            (inner_x, wall, height),
            Pose((0, (outer_y - wall) / 2, height / 2)),
            _BIN,
            f"{name}_wall_py",
        ),
        Shape(
            ShapeKind.BOX,
            (inner_x, wall, height),
            Pose((0, -(outer_y - wall) / 2, height / 2)),
            _BIN,
            f"{name}_wall_ny",
        ),
    )


def cell_links_and_joints(layout: CellLayout) -> tuple[list[Link], list[Joint]]:
    """Build the static cell (everything but the robot) as links hanging off ``world``."""
    belt_height = float(layout.belt_pose.xyz_m[2])
    table_x, table_y = TABLE_SIZE_M
    links = [
        Link(
            WORLD_FRAME,
            LinkKind.CELL,
            (
                Shape(ShapeKind.BOX, (6.0, 6.0, 0.02), Pose((0, 0, -0.01)), _FLOOR, "floor"),
                Shape(
                    ShapeKind.BOX,
                    (table_x, table_y, TABLE_TOP_Z_M),
                    Pose((*TABLE_CENTER_XY_M, TABLE_TOP_Z_M / 2)),
                    _TABLE,
                    "table",
                ),
            ),
        ),
        Link(
            "belt_link",
            LinkKind.CELL,
            (
                Shape(
                    ShapeKind.BOX,
                    (BELT_LENGTH_M, BELT_WIDTH_M, BELT_THICKNESS_M),
                    Pose((0, 0, -BELT_THICKNESS_M / 2)),
                    _BELT,
                    "belt_surface",
                ),
                Shape(
                    ShapeKind.BOX,
                    (BELT_LENGTH_M - 0.1, BELT_WIDTH_M + 0.04, belt_height - BELT_THICKNESS_M),
                    Pose((0, 0, -BELT_THICKNESS_M - (belt_height - BELT_THICKNESS_M) / 2)),
                    _FRAME,
                    "belt_frame",
                ),
            ),
        ),
        Link(
            HEAD.link,
            LinkKind.CELL,
            (
                Shape(
                    ShapeKind.BOX,
                    (0.03, 0.10, 0.03),
                    Pose((-0.02, 0, 0)),
                    (0.1, 0.1, 0.1, 1.0),
                    collision=False,
                ),
            ),
        ),
        Link(HEAD.optical_frame, LinkKind.CELL, camera=HEAD.name),
    ]
    joints = [
        Joint("world_belt_joint", WORLD_FRAME, "belt_link", layout.belt_pose),
        Joint(
            f"{WORLD_FRAME}_{HEAD.name}_joint", HEAD.mount_frame, HEAD.link, layout.head_camera_pose
        ),
        Joint(
            f"{HEAD.name}_optical_joint",
            HEAD.link,
            HEAD.optical_frame,
            OPTICAL_FROM_LINK,
        ),
    ]
    for name, pose in layout.bin_poses.items():
        links.append(Link(f"{name}_link", LinkKind.CELL, _bin_shapes(name)))
        joints.append(Joint(f"world_{name}_joint", WORLD_FRAME, f"{name}_link", pose))
    return links, joints


def build_description(layout: CellLayout = NOMINAL_LAYOUT) -> Description:
    """Return the whole cell: static parts, the arm on ``base_link`` and the hand on ``flange``.

    Args:
        layout: Placements (the nominal CAD layout by default).

    Returns:
        A description rooted at ``world``, exported by :func:`r2s2r_description.urdf.to_urdf`
        and :func:`r2s2r_description.mjcf.to_mjspec`.

    """
    cell_links, cell_joints = cell_links_and_joints(layout)
    arm_links, arm_joints = arm_links_and_joints()
    hand_links, hand_joints = hand_links_and_joints(layout.hand_camera_pose)
    base_joint = Joint("world_base_joint", WORLD_FRAME, BASE_LINK, layout.base_pose)
    return Description(
        name="r2s2r_cell",
        root=WORLD_FRAME,
        links=tuple(cell_links + arm_links + hand_links),
        joints=tuple([*cell_joints, base_joint, *arm_joints, *hand_joints]),
    )
