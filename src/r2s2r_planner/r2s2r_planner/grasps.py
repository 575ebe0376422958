"""Pinch grasp proposals on an object's primitive geometry, scored and checked for reach.

A candidate puts the pinch centre (midpoint of the thumb and index contacts, see
:class:`~r2s2r_planner.hand.PinchConfiguration`) on the object's vertical axis and aligns the
pinch axis with a pair of opposite faces (boxes: the two horizontal face normals; cylinders and
spheres: sampled horizontal directions). The approach is top-down, optionally tilted about the
pinch axis. Candidates are scored on antipodal quality (contact normals against the pinch axis,
within the friction cone), fingertip clearance to the belt, joint travel from a seed
configuration and tilt, and kept only when the arm's IK reaches both grasp and pre-grasp.
All poses are 4x4 in ``world``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from r2s2r_description.transforms import FloatArray, axis_angle_matrix
from r2s2r_world.kinematics import IkError, PalmIk
from r2s2r_world.world import ObjectType

from r2s2r_planner.config import GraspConfig
from r2s2r_planner.hand import PinchConfiguration, PinchError, PinchHand


class GraspError(ValueError):
    """No grasp candidate exists (object too wide, too low, or out of reach); says why."""


@dataclass(frozen=True)
class GraspCandidate:
    """One pinch grasp.

    Attributes:
        palm_pose: Palm pose at the grasp (4x4, world).
        pre_grasp_pose: Palm pose at the pre-grasp (backed off along the approach axis).
        arm_q: (6,) arm joints at the grasp.
        pre_grasp_arm_q: (6,) arm joints at the pre-grasp.
        pinch: Hand joint configurations sized for this object width.
        palm_offset_m: (3,) palm position minus object centre (world axes); with a belt that
            translates the object, ``palm(t) = object(t) + palm_offset_m``.
        axis_world: (3,) pinch axis (thumb -> index) in world.
        tilt_rad: Tilt about the pinch axis (0 = straight top-down).
        quality: Antipodal quality in [0, 1] (1: contact normals along the pinch axis).
        belt_clearance_m: Lowest fingertip surface above the belt.
        score: Higher is better.

    """

    palm_pose: FloatArray
    pre_grasp_pose: FloatArray
    arm_q: FloatArray
    pre_grasp_arm_q: FloatArray
    pinch: PinchConfiguration
    palm_offset_m: FloatArray
    axis_world: FloatArray
    tilt_rad: float
    quality: float
    belt_clearance_m: float
    score: float


def object_grasp_axes(
    obj: ObjectType, rotation: FloatArray, max_width_m: float, round_samples: int
) -> list[tuple[FloatArray, float]]:
    """Horizontal pinch directions and the object width across each.

    Args:
        obj: Object type (shape and full extents).
        rotation: 3x3 object orientation in world (upright on the belt).
        max_width_m: Widest object the pinch takes.
        round_samples: Directions sampled on cylinders and spheres.

    Returns:
        ``(unit direction, width)`` pairs; each face pair appears with both signs (thumb on
        either side).

    """
    axes: list[tuple[FloatArray, float]] = []
    if obj.shape == "box":
        for column, width in ((0, obj.size_m[0]), (1, obj.size_m[1])):
            if width > max_width_m:
                continue
            direction = np.array([rotation[0, column], rotation[1, column], 0.0])
            direction /= np.linalg.norm(direction)
            axes += [(direction, width), (-direction, width)]
    elif obj.size_m[0] <= max_width_m:
        for k in range(round_samples):
            angle = 2.0 * math.pi * k / round_samples
            axes.append((np.array([math.cos(angle), math.sin(angle), 0.0]), obj.size_m[0]))
    return axes


def top_down_rotation(axis_palm: FloatArray, direction: FloatArray) -> FloatArray:
    """Palm rotation facing down (palm z = world -z) whose pinch axis points along ``direction``.

    Args:
        axis_palm: Pinch axis in the palm frame.
        direction: Desired horizontal direction of the pinch axis in world.

    """
    psi = math.atan2(direction[1], direction[0]) - math.atan2(-axis_palm[1], axis_palm[0])
    c, s = math.cos(psi), math.sin(psi)
    x_axis = np.array([c, s, 0.0])
    z_axis = np.array([0.0, 0.0, -1.0])
    return np.stack([x_axis, np.cross(z_axis, x_axis), z_axis], axis=1)


def antipodal_quality(
    obj: ObjectType, axis_world: FloatArray, direction: FloatArray, contact_offset_m: float
) -> float:
    """|cos| of the angle between the pinch axis and the contact normals.

    Args:
        obj: Object type.
        axis_world: Pinch axis in world.
        direction: Horizontal face normal (boxes, cylinders) the pinch is aligned with.
        contact_offset_m: Height of the contacts above the object centre (spheres tilt their
            normals with it).

    """
    normal = np.asarray(direction, dtype=float)
    if obj.shape == "sphere":
        radius = obj.size_m[0] / 2.0
        ratio = min(abs(contact_offset_m) / radius, 1.0)
        normal = normal * math.sqrt(1.0 - ratio**2) + np.array([0.0, 0.0, 1.0]) * ratio * (
            1.0 if contact_offset_m > 0 else -1.0
        )
    # The normals on both sides are symmetric about the centre; both deviate by the same angle.
    return float(abs(np.dot(axis_world, normal)) / np.linalg.norm(normal))


class GraspProposer:
    """Proposes pinch grasps for an object at a pose.

    Args:
        ik: Arm IK of the cell (``PalmIk(world.layout())``).
        config: Grasp settings.
        hand: Pinch hand model (built from ``config.pinch`` when None).

    """

    def __init__(
        self, ik: PalmIk, config: GraspConfig | None = None, hand: PinchHand | None = None
    ) -> None:
        self.ik = ik
        self.config = config or GraspConfig()
        self.hand = hand or PinchHand(self.config.pinch)

    def propose(
        self,
        obj: ObjectType,
        position_m: FloatArray,
        rotation: FloatArray,
        belt_top_z_m: float,
        seed_q: FloatArray,
    ) -> list[GraspCandidate]:
        """Scored, reachable grasps for an object, best first.

        Args:
            obj: Object type.
            position_m: (3,) object centre in world.
            rotation: 3x3 object orientation in world.
            belt_top_z_m: Height of the belt surface (world z).
            seed_q: (6,) arm joints the motion starts from (IK seed, joint travel score).

        Raises:
            GraspError: If no candidate survives; the message counts why each was dropped.

        """
        cfg = self.config
        position = np.asarray(position_m, dtype=float)
        height = obj.size_m[2]
        axes = object_grasp_axes(obj, rotation, self.hand.max_width_m(), cfg.round_yaw_samples)
        if not axes:
            raise GraspError(
                f"object {obj.shape} {obj.size_m}: wider than the pinch "
                f"({self.hand.max_width_m():.3f} m) across every face pair"
            )
        rejected = {"friction_cone": 0, "belt_clearance": 0, "too_low": 0, "ik": 0}
        candidates: list[GraspCandidate] = []
        max_cone = math.atan(cfg.friction)
        for direction, width in axes:
            try:
                pinch = self.hand.configure(width)
            except PinchError:
                continue
            for tilt in cfg.tilt_angles_rad:
                rotation_palm = top_down_rotation(pinch.axis_palm, direction)
                axis_world = rotation_palm @ pinch.axis_palm
                tilt_axis = axis_world / np.linalg.norm(axis_world)
                rotation_palm = axis_angle_matrix(tilt_axis, tilt) @ rotation_palm
                tips_z = (rotation_palm @ pinch.tip_points_palm_m.T)[2]
                center_z = float((rotation_palm @ pinch.center_palm_m)[2])
                # Contacts at mid-height unless the lowest tip would then hit the belt.
                lowest_tip = float(tips_z.min()) - center_z - pinch.tip_radius_m
                contact_height = max(height / 2.0, cfg.belt_clearance_m - lowest_tip)
                if contact_height > height - cfg.top_margin_m:
                    rejected["too_low"] += 1
                    continue
                grasp_point = position + np.array([0.0, 0.0, contact_height - height / 2.0])
                quality = antipodal_quality(
                    obj, axis_world, direction, contact_height - height / 2.0
                )
                if math.acos(min(quality, 1.0)) > max_cone:
                    rejected["friction_cone"] += 1
                    continue
                palm = np.eye(4)
                palm[:3, :3] = rotation_palm
                palm[:3, 3] = grasp_point - rotation_palm @ pinch.center_palm_m
                clearance = float(tips_z.min()) + palm[2, 3] - pinch.tip_radius_m - belt_top_z_m
                if clearance < cfg.belt_clearance_m - 1e-6:
                    rejected["belt_clearance"] += 1
                    continue
                pre = palm.copy()
                pre[:3, 3] -= rotation_palm[:, 2] * cfg.pre_grasp_height_m
                try:
                    pre_q = self.ik.solve(pre, seed_q)
                    grasp_q = self.ik.solve(palm, pre_q)
                except IkError:
                    rejected["ik"] += 1
                    continue
                travel = float(np.linalg.norm(pre_q - np.asarray(seed_q)))
                score = (
                    quality
                    + 0.5 * min(clearance / 0.02, 1.0)
                    + 0.5 * math.exp(-travel / 2.0)
                    - 0.5 * abs(tilt)
                )
                candidates.append(
                    GraspCandidate(
                        palm_pose=palm,
                        pre_grasp_pose=pre,
                        arm_q=grasp_q,
                        pre_grasp_arm_q=pre_q,
                        pinch=pinch,
                        palm_offset_m=palm[:3, 3] - position,
                        axis_world=axis_world,
                        tilt_rad=float(tilt),
                        quality=quality,
                        belt_clearance_m=clearance,
                        score=score,
                    )
                )
        if not candidates:
            raise GraspError(
                f"no reachable pinch grasp for {obj.shape} at {np.round(position, 3).tolist()}: "
                f"rejected {rejected}"
            )
        candidates.sort(key=lambda c: -c.score)
        return candidates[: cfg.max_candidates]
