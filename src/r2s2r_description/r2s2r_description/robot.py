"""The robot: a UR5e-sized 6-DoF arm with a 12-joint, four-finger (thumb + 3) dexterous hand.

Kinematics follow the UR5e convention (``ur_description``: d1 = 0.1625, a2 = -0.425,
a3 = -0.3922, d4 = 0.1333, d5 = 0.0997, d6 = 0.0996, all joint axes ``z`` of the child link).
Geometry is capsules, cylinders and boxes only (fast to render, fast to collide).

Hand frame ``palm_link`` (origin on the palm surface): ``+z`` is the palm normal, i.e. the
approach direction away from the flange; the three fingers sit on the ``+y`` edge in a row along
``x`` (index at ``+x``), the thumb on the ``-y`` edge. Positive flexion of every finger joint
curls it towards the palm centre, so closing all joints makes a whole-hand (power) grasp of an
object in front of the palm.
"""

from __future__ import annotations

from r2s2r_description.cameras import HAND
from r2s2r_description.frames import BASE_LINK, PALM_LINK
from r2s2r_description.model import (
    Joint,
    JointLimits,
    Link,
    LinkKind,
    Shape,
    ShapeKind,
    capsule_between,
)
from r2s2r_description.transforms import Pose

ARM_JOINT_NAMES: tuple[str, ...] = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
"""Arm joints in controller order (``/arm_controller``)."""

FINGER_NAMES: tuple[str, ...] = ("index", "middle", "ring")
"""The three non-thumb fingers, ``+x`` to ``-x`` along the palm edge."""

HAND_JOINT_NAMES: tuple[str, ...] = (
    "thumb_rot_joint",
    "thumb_mcp_joint",
    "thumb_ip_joint",
    *(f"{finger}_{joint}_joint" for finger in FINGER_NAMES for joint in ("mcp", "pip", "dip")),
)
"""Hand joints in controller order (``/hand_controller``): 12 actuated joints."""

ALL_JOINT_NAMES: tuple[str, ...] = ARM_JOINT_NAMES + HAND_JOINT_NAMES
"""Arm then hand joints, the order of ``/joint_states`` from the simulator and the twin."""

_TAU = 6.283185307179586
_PI = 3.141592653589793

JOINT_LIMITS: dict[str, JointLimits] = {
    "shoulder_pan_joint": JointLimits(-_TAU, _TAU, _PI, 150.0),
    "shoulder_lift_joint": JointLimits(-_TAU, _TAU, _PI, 150.0),
    "elbow_joint": JointLimits(-_PI, _PI, _PI, 150.0),
    "wrist_1_joint": JointLimits(-_TAU, _TAU, _PI, 28.0),
    "wrist_2_joint": JointLimits(-_TAU, _TAU, _PI, 28.0),
    "wrist_3_joint": JointLimits(-_TAU, _TAU, _PI, 28.0),
    "thumb_rot_joint": JointLimits(-1.0, 1.0, 4.0, 1.0),
    "thumb_mcp_joint": JointLimits(-0.5, 1.6, 4.0, 3.0),
    "thumb_ip_joint": JointLimits(0.0, 1.6, 4.0, 2.0),
    **{
        f"{finger}_{joint}_joint": JointLimits(lower, upper, 4.0, effort)
        for finger in FINGER_NAMES
        for joint, lower, upper, effort in (
            ("mcp", -0.5, 1.6, 1.5),
            ("pip", 0.0, 1.7, 1.0),
            ("dip", 0.0, 1.4, 0.6),
        )
    },
}
"""Position (rad), velocity (rad/s) and effort (N·m) limits of every actuated joint."""

HOME_POSITIONS: dict[str, float] = {
    "shoulder_pan_joint": 0.0,
    "shoulder_lift_joint": -1.9,
    "elbow_joint": 1.9,
    "wrist_1_joint": -1.5708,
    "wrist_2_joint": -1.5708,
    "wrist_3_joint": 0.0,
    "thumb_rot_joint": 0.0,
    "thumb_mcp_joint": -0.3,
    "thumb_ip_joint": 0.1,
    **{
        f"{finger}_{joint}_joint": value
        for finger in FINGER_NAMES
        for joint, value in (("mcp", -0.3), ("pip", 0.1), ("dip", 0.1))
    },
}
"""A ready pose: hand above the belt side of the cell, palm facing down, fingers open."""

# UR5e link lengths (m).
UR5E_D1_M = 0.1625
UR5E_A2_M = -0.425
UR5E_A3_M = -0.3922
UR5E_D4_M = 0.1333
UR5E_D5_M = 0.0997
UR5E_D6_M = 0.0996

FLANGE_TO_PALM_M = 0.06
"""Palm surface distance from the flange along the tool axis (adapter + palm thickness)."""

PALM_SIZE_M = (0.10, 0.09, 0.03)
FINGER_BASE_Y_M = 0.04
FINGER_BASE_X_M = (0.03, 0.0, -0.03)
FINGER_SEGMENTS_M = (0.045, 0.03, 0.025)
FINGER_RADIUS_M = 0.0085
THUMB_BASE_Y_M = -0.045
THUMB_SEGMENTS_M = (0.05, 0.04)
THUMB_RADIUS_M = 0.01

_ARM_GREY = (0.55, 0.58, 0.62, 1.0)
_JOINT_BLUE = (0.20, 0.35, 0.60, 1.0)
_HAND_DARK = (0.18, 0.18, 0.20, 1.0)
_FINGER = (0.85, 0.72, 0.60, 1.0)


def _revolute(
    name: str, parent: str, child: str, origin: Pose, axis: tuple[float, float, float]
) -> Joint:
    arm = name in ARM_JOINT_NAMES
    return Joint(
        name=name,
        parent=parent,
        child=child,
        origin=origin,
        joint_type="revolute",
        axis=axis,
        limits=JOINT_LIMITS[name],
        armature_kgm2=0.2 if arm else 2e-4,
        damping_nms=1.0 if arm else 0.01,
    )


def _cyl(radius_m: float, length_m: float, origin: Pose, rgba: tuple[float, ...]) -> Shape:
    return Shape(ShapeKind.CYLINDER, (radius_m, length_m), origin, tuple(rgba))  # type: ignore[arg-type]


def arm_links_and_joints() -> tuple[list[Link], list[Joint]]:
    """Build the arm from ``base_link`` to ``flange`` (``flange`` z = tool axis)."""
    half_pi = _PI / 2.0
    links = [
        Link(
            BASE_LINK,
            LinkKind.ARM,
            (_cyl(0.075, 0.09, Pose((0.0, 0.0, 0.045)), _ARM_GREY),),
        ),
        Link(
            "shoulder_link",
            LinkKind.ARM,
            (_cyl(0.06, 0.13, Pose((0.0, 0.0, -0.02)), _JOINT_BLUE),),
        ),
        Link(
            "upper_arm_link",
            LinkKind.ARM,
            (
                _cyl(0.06, 0.14, Pose((0.0, 0.0, 0.07)), _JOINT_BLUE),
                capsule_between((0.0, 0.0, 0.138), (UR5E_A2_M, 0.0, 0.138), 0.054, _ARM_GREY),
            ),
        ),
        Link(
            "forearm_link",
            LinkKind.ARM,
            (
                _cyl(0.05, 0.12, Pose((0.0, 0.0, 0.06)), _JOINT_BLUE),
                capsule_between((0.0, 0.0, 0.01), (UR5E_A3_M, 0.0, 0.01), 0.042, _ARM_GREY),
            ),
        ),
        Link(
            "wrist_1_link",
            LinkKind.ARM,
            (_cyl(0.045, 0.11, Pose((0.0, 0.0, -0.01)), _JOINT_BLUE),),
        ),
        Link(
            "wrist_2_link",
            LinkKind.ARM,
            (_cyl(0.045, 0.11, Pose((0.0, 0.0, -0.01)), _JOINT_BLUE),),
        ),
        Link(
            "wrist_3_link",
            LinkKind.ARM,
            (_cyl(0.045, 0.04, Pose((0.0, 0.0, -0.02)), _ARM_GREY),),
        ),
        Link("flange", LinkKind.ARM),
    ]
    joints = [
        _revolute(
            "shoulder_pan_joint",
            BASE_LINK,
            "shoulder_link",
            Pose((0.0, 0.0, UR5E_D1_M)),
            (0.0, 0.0, 1.0),
        ),
        _revolute(
            "shoulder_lift_joint",
            "shoulder_link",
            "upper_arm_link",
            Pose((0.0, 0.0, 0.0), (half_pi, 0.0, 0.0)),
            (0.0, 0.0, 1.0),
        ),
        _revolute(
            "elbow_joint",
            "upper_arm_link",
            "forearm_link",
            Pose((UR5E_A2_M, 0.0, 0.0)),
            (0.0, 0.0, 1.0),
        ),
        _revolute(
            "wrist_1_joint",
            "forearm_link",
            "wrist_1_link",
            Pose((UR5E_A3_M, 0.0, UR5E_D4_M)),
            (0.0, 0.0, 1.0),
        ),
        _revolute(
            "wrist_2_joint",
            "wrist_1_link",
            "wrist_2_link",
            Pose((0.0, -UR5E_D5_M, 0.0), (half_pi, 0.0, 0.0)),
            (0.0, 0.0, 1.0),
        ),
        _revolute(
            "wrist_3_joint",
            "wrist_2_link",
            "wrist_3_link",
            Pose((0.0, UR5E_D6_M, 0.0), (-half_pi, 0.0, 0.0)),
            (0.0, 0.0, 1.0),
        ),
        Joint("wrist_3_flange_joint", "wrist_3_link", "flange"),
    ]
    return links, joints


def _finger_chain(
    prefix: str,
    parent: str,
    base: Pose,
    joint_names: tuple[str, ...],
    segments_m: tuple[float, ...],
    radius_m: float,
    axis: tuple[float, float, float],
) -> tuple[list[Link], list[Joint]]:
    """Build a serial finger: each segment points along its link's +z; flexion about ``axis``."""
    link_names = [f"{prefix}_{part}_link" for part in ("proximal", "middle", "distal")]
    if len(segments_m) == 2:
        link_names = [f"{prefix}_proximal_link", f"{prefix}_distal_link"]
    links: list[Link] = []
    joints: list[Joint] = []
    previous, origin = parent, base
    for name, link_name, length in zip(joint_names, link_names, segments_m, strict=True):
        is_tip = link_name.endswith("distal_link")
        end = length - (radius_m if is_tip else 0.0)
        links.append(
            Link(
                link_name,
                LinkKind.HAND,
                (capsule_between((0.0, 0.0, 0.0), (0.0, 0.0, end), radius_m, _FINGER),),
            )
        )
        joints.append(_revolute(name, previous, link_name, origin, axis))
        previous, origin = link_name, Pose((0.0, 0.0, length))
    return links, joints


def hand_links_and_joints(hand_camera_pose: Pose) -> tuple[list[Link], list[Joint]]:
    """Build the hand from ``flange`` to the fingertips, and the hand camera on the palm.

    Args:
        hand_camera_pose: Pose of ``hand_camera_link`` in ``palm_link`` (x forward, REP 103).

    """
    palm_x, palm_y, palm_z = PALM_SIZE_M
    links = [
        Link(
            PALM_LINK,
            LinkKind.HAND,
            (
                Shape(
                    ShapeKind.BOX,
                    (palm_x, palm_y, palm_z),
                    Pose((0.0, 0.0, -palm_z / 2.0)),
                    _HAND_DARK,
                    name="palm",
                ),
                _cyl(0.035, FLANGE_TO_PALM_M - palm_z, Pose((0.0, 0.0, -0.045)), _ARM_GREY),
            ),
        ),
        Link("thumb_base_link", LinkKind.HAND, ()),
        Link(
            HAND.link,
            LinkKind.HAND,
            (
                Shape(
                    ShapeKind.BOX,
                    (0.02, 0.03, 0.02),
                    Pose((-0.012, 0.0, 0.0)),
                    (0.1, 0.1, 0.1, 1.0),
                    collision=False,
                ),
            ),
        ),
        Link(HAND.optical_frame, LinkKind.HAND, camera=HAND.name),
    ]
    joints = [
        Joint("flange_palm_joint", "flange", PALM_LINK, Pose((0.0, 0.0, FLANGE_TO_PALM_M))),
        Joint(f"{HAND.name}_joint", HAND.mount_frame, HAND.link, hand_camera_pose),
        Joint(
            f"{HAND.name}_optical_joint",
            HAND.link,
            HAND.optical_frame,
            OPTICAL_FROM_LINK,
        ),
        _revolute(
            "thumb_rot_joint",
            PALM_LINK,
            "thumb_base_link",
            Pose((0.0, THUMB_BASE_Y_M, 0.0)),
            (0.0, 0.0, 1.0),
        ),
    ]
    thumb_links, thumb_joints = _finger_chain(
        "thumb",
        "thumb_base_link",
        Pose(),
        ("thumb_mcp_joint", "thumb_ip_joint"),
        THUMB_SEGMENTS_M,
        THUMB_RADIUS_M,
        (-1.0, 0.0, 0.0),
    )
    links += thumb_links
    joints += thumb_joints
    for finger, base_x in zip(FINGER_NAMES, FINGER_BASE_X_M, strict=True):
        finger_links, finger_joints = _finger_chain(
            finger,
            PALM_LINK,
            Pose((base_x, FINGER_BASE_Y_M, 0.0)),
            tuple(f"{finger}_{j}_joint" for j in ("mcp", "pip", "dip")),
            FINGER_SEGMENTS_M,
            FINGER_RADIUS_M,
            (1.0, 0.0, 0.0),
        )
        links += finger_links
        joints += finger_joints
    return links, joints


OPTICAL_FROM_LINK = Pose((0.0, 0.0, 0.0), (-_PI / 2.0, 0.0, -_PI / 2.0))
"""``<camera>_optical_frame`` in ``<camera>_link`` (REP 103: optical z forward, x right, y down)."""
