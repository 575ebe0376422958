"""MuJoCo export of the description through ``mujoco.MjSpec``.

Every link becomes a body of the same name (fixed joints become nested static bodies), every
revolute joint a hinge with a position servo actuator of the same name, every optical frame
link a body carrying a MuJoCo camera (MuJoCo cameras look along ``-z`` with ``y`` up, i.e. the
optical frame turned by pi about x).

Collision filtering (``contype``/``conaffinity`` bits): cell 1/1, arm 2/0, hand 2/1,
objects (added by the simulator) 1/3: the arm touches objects only, the hand touches objects
and the cell, robot links never touch each other.
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco
import numpy as np

from r2s2r_description.model import Description, LinkKind, Shape, ShapeKind
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_description.transforms import matrix_to_quat, rpy_to_matrix

COLLISION_BITS: dict[LinkKind, tuple[int, int]] = {
    LinkKind.CELL: (1, 1),
    LinkKind.ARM: (2, 0),
    LinkKind.HAND: (2, 1),
}
"""(contype, conaffinity) per link kind."""

OBJECT_COLLISION_BITS = (1, 3)
"""(contype, conaffinity) of free objects: they touch the cell, hand, arm and each other."""

MUJOCO_CAMERA_QUAT_IN_OPTICAL = (0.0, 1.0, 0.0, 0.0)
"""A MuJoCo camera's orientation in its optical frame: a half turn about x (w, x, y, z)."""

DEFAULT_ARM_GAINS = (2000.0, 120.0)
DEFAULT_HAND_GAINS = (3.0, 0.05)


def _quat(rpy: tuple[float, float, float]) -> list[float]:
    return [float(v) for v in matrix_to_quat(rpy_to_matrix(rpy))]


def geom_type_and_size(shape: Shape) -> tuple[mujoco.mjtGeom, list[float]]:
    """MuJoCo geom type and ``size`` (half extents, radius, half length) of a primitive.

    The one mapping from a primitive to a MuJoCo geom: the description's links, the
    simulator's objects and the planner's attached object all go through it.

    Args:
        shape: The primitive (sizes in the description convention, see :class:`Shape`).

    Returns:
        The geom type and its three ``size`` values (m).

    """
    if shape.kind == ShapeKind.BOX:
        return mujoco.mjtGeom.mjGEOM_BOX, [s / 2.0 for s in shape.size_m]
    if shape.kind in (ShapeKind.CYLINDER, ShapeKind.CAPSULE):
        geom_type = (
            mujoco.mjtGeom.mjGEOM_CYLINDER
            if shape.kind == ShapeKind.CYLINDER
            else mujoco.mjtGeom.mjGEOM_CAPSULE
        )
        return geom_type, [shape.size_m[0], shape.size_m[1] / 2.0, 0.0]
    return mujoco.mjtGeom.mjGEOM_SPHERE, [shape.size_m[0], 0.0, 0.0]


def add_shape(body: mujoco.MjsBody, shape: Shape, kind_bits: tuple[int, int]) -> mujoco.MjsGeom:
    """Add a description shape to a MuJoCo body as a geom.

    Args:
        body: The MjSpec body.
        shape: The primitive (sizes in the description convention, see :class:`Shape`).
        kind_bits: ``(contype, conaffinity)`` used when the shape collides.

    Returns:
        The new geom.

    """
    geom = body.add_geom()
    if shape.name:
        geom.name = shape.name
    geom.type, geom.size = geom_type_and_size(shape)
    geom.pos = list(shape.origin.xyz_m)
    geom.quat = _quat(shape.origin.rpy_rad)
    geom.rgba = list(shape.rgba)
    if shape.collision:
        geom.contype, geom.conaffinity = kind_bits
    else:
        geom.contype, geom.conaffinity = 0, 0
        geom.mass = 0.0
        geom.density = 0.0
    return geom


def to_mjspec(
    description: Description,
    joint_gains: Mapping[str, tuple[float, float]] | None = None,
    timestep_s: float = 0.002,
) -> mujoco.MjSpec:
    """Build the MuJoCo model of the description.

    Args:
        description: The tree (rooted at ``world``).
        joint_gains: ``(kp [N·m/rad], kd [N·m·s/rad])`` per revolute joint for its position
            servo; joints not listed get :data:`DEFAULT_ARM_GAINS` or :data:`DEFAULT_HAND_GAINS`.
        timestep_s: Physics time step.

    Returns:
        An uncompiled spec; the simulator adds lights, objects and camera intrinsics, then
        compiles it.

    """
    gains = dict(joint_gains or {})
    spec = mujoco.MjSpec()
    spec.modelname = description.name
    spec.option.timestep = timestep_s
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.impratio = 10.0
    spec.compiler.autolimits = True
    spec.compiler.degree = False  # joint ranges below are radians
    spec.visual.quality.shadowsize = 0
    spec.visual.quality.offsamples = 0
    spec.visual.headlight.active = 0

    bodies: dict[str, mujoco.MjsBody] = {description.root: spec.worldbody}
    joints_by_child = {joint.child: joint for joint in description.joints}
    for link in description.links:
        if link.name == description.root:
            body = spec.worldbody
        else:
            joint = joints_by_child[link.name]
            body = bodies[joint.parent].add_body()
            body.name = link.name
            body.pos = list(joint.origin.xyz_m)
            body.quat = _quat(joint.origin.rpy_rad)
            if link.kind in (LinkKind.ARM, LinkKind.HAND):
                body.gravcomp = 1.0  # the real controllers compensate gravity
            if joint.joint_type == "revolute" and joint.limits is not None:
                hinge = body.add_joint()
                hinge.name = joint.name
                hinge.type = mujoco.mjtJoint.mjJNT_HINGE
                hinge.axis = list(joint.axis)
                hinge.range = [joint.limits.lower_rad, joint.limits.upper_rad]
                hinge.armature = joint.armature_kgm2
                hinge.damping = [joint.damping_nms, 0.0, 0.0]
            if not link.shapes and link.kind != LinkKind.CELL and joint.joint_type == "revolute":
                # A moving body needs mass; give frame-only links a tiny one.
                body.mass = 1e-3
                body.inertia = [1e-7, 1e-7, 1e-7]
                body.explicitinertial = True
        bodies[link.name] = body
        for shape in link.shapes:
            add_shape(body, shape, COLLISION_BITS[link.kind])
        if link.camera:
            camera = body.add_camera()
            camera.name = link.camera
            camera.quat = list(MUJOCO_CAMERA_QUAT_IN_OPTICAL)
            camera.fovy = 60.0
        if link.name != description.root:
            site = body.add_site()  # a marker of the frame itself, for FK checks and tools
            site.name = f"{link.name}_frame"
            site.size = [0.005, 0.0, 0.0]
            site.group = 5

    for joint in description.movable_joints:
        assert joint.limits is not None
        default = DEFAULT_ARM_GAINS if joint.name in ARM_JOINT_NAMES else DEFAULT_HAND_GAINS
        kp, kd = gains.get(joint.name, default)
        actuator = spec.add_actuator()
        actuator.name = joint.name
        actuator.target = joint.name
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.set_to_position(kp=float(kp), kv=float(kd))
        actuator.forcerange = [-joint.limits.effort_nm, joint.limits.effort_nm]
        actuator.forcelimited = 1
        actuator.ctrlrange = [joint.limits.lower_rad, joint.limits.upper_rad]
        actuator.ctrllimited = 1
    return spec


def body_pose(model: mujoco.MjModel, data: mujoco.MjData, name: str) -> np.ndarray:
    """4x4 world pose of a body (a link) after ``mj_forward``/``mj_kinematics``."""
    body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if body_id < 0:
        raise KeyError(f"unknown body '{name}'")
    transform = np.eye(4)
    transform[:3, :3] = data.xmat[body_id].reshape(3, 3)
    transform[:3, 3] = data.xpos[body_id]
    return transform
