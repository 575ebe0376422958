"""MuJoCo collision checking of arm configurations against the cell, with a clearance margin.

The checker compiles its own model of the cell from :mod:`r2s2r_description` (the simulator's
model filters robot-cell contacts of the arm, which a planner must not ignore) and re-assigns
collision bits: the cell collides with every robot link; the distal robot (forearm, wrist,
hand, a held object) collides with the proximal arm (shoulder, upper arm); links of one group
never collide with each other (adjacent links touch by design). ``base_link`` is fixed and
never checked. Every pair within ``clearance_m`` counts as a collision (MuJoCo geom margins),
so a path that passes the check keeps that distance. Moving objects on the belt are not part
of the model: the approach ends above them and the pick's belt-tracking segments are checked
against the cell only.

A path is checked densely by :meth:`CollisionChecker.check_path`: straight joint-space
segments interpolated so that no joint moves more than ``step_rad`` between checks (a
discrete check at a planner's edge resolution misses grazing contacts in between).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
from r2s2r_description.cell import CellLayout, build_description
from r2s2r_description.frames import BASE_LINK, PALM_LINK, WORLD_FRAME
from r2s2r_description.mjcf import geom_type_and_size, to_mjspec
from r2s2r_description.model import LinkKind
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_description.transforms import FloatArray, matrix_to_quat
from r2s2r_sim.scene import object_shape
from r2s2r_world.world import ObjectType

CELL_BITS = (1, 6)
PROXIMAL_BITS = (4, 3)
DISTAL_BITS = (2, 5)
PROXIMAL_LINKS = ("shoulder_link", "upper_arm_link")
FIXED_ROBOT_LINKS = (BASE_LINK,)


@dataclass(frozen=True)
class Obstacle:
    """An extra static box in the planning scene (e.g. a fixture not in the description).

    Attributes:
        name: Geom name.
        size_m: Full extents (x, y, z).
        pose: 4x4 pose in world.

    """

    name: str
    size_m: tuple[float, float, float]
    pose: FloatArray


@dataclass(frozen=True)
class AttachedObject:
    """An object held in the hand during transport.

    Attributes:
        object_type: Its shape and size.
        pose_in_palm: 4x4 pose of its centre in ``palm_link``.

    """

    object_type: ObjectType
    pose_in_palm: FloatArray


@dataclass(frozen=True)
class PathCheck:
    """Result of a dense path check.

    Attributes:
        valid: No configuration along the path is within the clearance of a collision.
        checked_states: Configurations checked.
        segment: Index of the first colliding segment (or -1).
        fraction: Position along that segment in [0, 1] (or -1).
        contact: ``(geom1, geom2)`` names of the first contact ('' when unnamed), or None.

    """

    valid: bool
    checked_states: int
    segment: int = -1
    fraction: float = -1.0
    contact: tuple[str, str] | None = None


def _geom_label(model: mujoco.MjModel, geom: int) -> str:
    name = model.geom(geom).name
    return name or f"{model.body(model.geom_bodyid[geom]).name}/geom{geom}"


class CollisionChecker:
    """Collision queries for arm configurations (hand joints held fixed per query).

    Args:
        layout: Cell placements (a world's ``layout()``).
        clearance_m: Required distance between robot and cell.
        hand_q: (12,) hand joints (HAND_JOINT_NAMES order) during the queries.
        attached: A held object, moving with the palm.
        obstacles: Extra static boxes.

    """

    def __init__(
        self,
        layout: CellLayout,
        clearance_m: float = 0.01,
        hand_q: Sequence[float] | FloatArray | None = None,
        attached: AttachedObject | None = None,
        obstacles: Sequence[Obstacle] = (),
    ) -> None:
        description = build_description(layout)
        spec = to_mjspec(description)
        kinds = {link.name: link.kind for link in description.links}
        for geom in spec.geoms:
            if geom.contype == 0 and geom.conaffinity == 0:
                continue
            body = geom.parent.name or WORLD_FRAME
            kind = kinds.get(body, LinkKind.CELL)
            if body in FIXED_ROBOT_LINKS:
                geom.contype, geom.conaffinity = 0, 0
            elif kind == LinkKind.CELL:
                geom.contype, geom.conaffinity = CELL_BITS
            elif body in PROXIMAL_LINKS:
                geom.contype, geom.conaffinity = PROXIMAL_BITS
            else:
                geom.contype, geom.conaffinity = DISTAL_BITS
        if attached is not None:
            self._add_attached(spec, attached)
        for obstacle in obstacles:
            geom = spec.worldbody.add_geom()
            geom.name = obstacle.name
            geom.type = mujoco.mjtGeom.mjGEOM_BOX
            geom.size = [s / 2.0 for s in obstacle.size_m]
            geom.pos = list(obstacle.pose[:3, 3])
            geom.quat = list(matrix_to_quat(obstacle.pose[:3, :3]))
            geom.contype, geom.conaffinity = CELL_BITS
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self._arm_adr = np.array(
            [self.model.jnt_qposadr[self.model.joint(n).id] for n in ARM_JOINT_NAMES]
        )
        self._hand_adr = np.array(
            [self.model.jnt_qposadr[self.model.joint(n).id] for n in HAND_JOINT_NAMES]
        )
        self._collidable = (self.model.geom_contype != 0) | (self.model.geom_conaffinity != 0)
        self.clearance_m = clearance_m
        if hand_q is not None:
            self.set_hand(hand_q)
        self.checks = 0

    @staticmethod
    def _add_attached(spec: mujoco.MjSpec, attached: AttachedObject) -> None:
        palm = spec.body(PALM_LINK)
        geom = palm.add_geom()
        geom.name = "attached_object"
        geom.type, geom.size = geom_type_and_size(object_shape(attached.object_type))
        geom.pos = list(attached.pose_in_palm[:3, 3])
        geom.quat = list(matrix_to_quat(attached.pose_in_palm[:3, :3]))
        geom.contype, geom.conaffinity = DISTAL_BITS
        geom.mass = 0.0
        geom.density = 0.0

    @property
    def clearance_m(self) -> float:
        """Required robot-cell distance (m)."""
        return self._clearance_m

    @clearance_m.setter
    def clearance_m(self, value: float) -> None:
        if not 0.0 <= value <= 0.2:
            raise ValueError(f"clearance_m = {value}: expected within [0, 0.2] m")
        self._clearance_m = float(value)
        self.model.geom_margin[self._collidable] = value

    def set_hand(self, hand_q: Sequence[float] | FloatArray) -> None:
        """Hold the hand joints at ``hand_q`` (HAND_JOINT_NAMES order) for later queries.

        Raises:
            ValueError: If ``hand_q`` does not have one value per hand joint.

        """
        values = np.asarray(hand_q, dtype=float)
        if values.shape != (len(HAND_JOINT_NAMES),):
            raise ValueError(
                f"hand_q shape {values.shape}: expected ({len(HAND_JOINT_NAMES)},) in "
                "HAND_JOINT_NAMES order"
            )
        self.data.qpos[self._hand_adr] = values

    def _collide(self, arm_q: Sequence[float] | FloatArray) -> int:
        self.data.qpos[self._arm_adr] = arm_q
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_collision(self.model, self.data)
        self.checks += 1
        return int(self.data.ncon)

    def is_valid(self, arm_q: Sequence[float] | FloatArray) -> bool:
        """Whether the arm at ``arm_q`` keeps the clearance from everything it may touch."""
        return self._collide(arm_q) == 0

    def contacts(self, arm_q: Sequence[float] | FloatArray) -> list[tuple[str, str, float]]:
        """Pairs within the clearance at ``arm_q``: ``(geom1, geom2, distance_m)``."""
        count = self._collide(arm_q)
        return [
            (
                _geom_label(self.model, int(self.data.contact[i].geom1)),
                _geom_label(self.model, int(self.data.contact[i].geom2)),
                float(self.data.contact[i].dist),
            )
            for i in range(count)
        ]

    def clearance(self, arm_q: Sequence[float] | FloatArray, max_distance_m: float = 0.1) -> float:
        """Smallest robot-cell distance at ``arm_q`` (capped at ``max_distance_m``).

        Uses the margins: temporarily widens them to ``max_distance_m`` and reads the closest
        contact distance (negative when penetrating).
        """
        saved = self.clearance_m
        self.model.geom_margin[self._collidable] = max_distance_m
        try:
            count = self._collide(arm_q)
            distances = [float(self.data.contact[i].dist) for i in range(count)]
        finally:
            self.model.geom_margin[self._collidable] = saved
        return min(distances, default=max_distance_m)

    def check_path(
        self, waypoints: FloatArray | Sequence[Sequence[float]], step_rad: float
    ) -> PathCheck:
        """Check a piecewise-linear joint path densely.

        Args:
            waypoints: (N, 6) arm configurations; consecutive ones are joined by straight
                joint-space segments.
            step_rad: Largest joint change between two checked configurations.

        Raises:
            ValueError: If ``step_rad`` is not positive or the waypoints are not (N, 6).

        """
        path = np.asarray(waypoints, dtype=float)
        if path.ndim != 2 or path.shape[1] != len(ARM_JOINT_NAMES) or path.shape[0] == 0:
            raise ValueError(f"waypoints shape {path.shape}: expected (N >= 1, 6)")
        if step_rad <= 0.0:
            raise ValueError(f"step_rad = {step_rad}: expected > 0")
        checked = 0
        if not self.is_valid(path[0]):
            pair = self.contacts(path[0])[0]
            return PathCheck(False, 1, 0, 0.0, (pair[0], pair[1]))
        checked += 1
        for index in range(path.shape[0] - 1):
            start, end = path[index], path[index + 1]
            count = max(int(np.ceil(np.max(np.abs(end - start)) / step_rad)), 1)
            for k in range(1, count + 1):
                fraction = k / count
                q = start + fraction * (end - start)
                checked += 1
                if not self.is_valid(q):
                    pair = self.contacts(q)[0]
                    return PathCheck(False, checked, index, fraction, (pair[0], pair[1]))
        return PathCheck(True, checked)
