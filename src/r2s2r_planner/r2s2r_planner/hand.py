"""The pinch hand model: thumb + index opposing, middle and ring open, sized from the object.

Geometry comes from :mod:`r2s2r_description` (forward kinematics of the hand chain), so a change
of the hand description changes the pinch. All points are in ``palm_link`` (``+z`` = approach
direction, away from the flange).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from r2s2r_description.cell import NOMINAL_LAYOUT
from r2s2r_description.frames import PALM_LINK
from r2s2r_description.model import Description, Link, LinkKind, forward_kinematics
from r2s2r_description.robot import (
    FINGER_RADIUS_M,
    FINGER_SEGMENTS_M,
    HAND_JOINT_NAMES,
    JOINT_LIMITS,
    THUMB_RADIUS_M,
    THUMB_SEGMENTS_M,
    hand_links_and_joints,
)
from r2s2r_description.transforms import FloatArray

from r2s2r_planner.config import PinchConfig

TIP_LINKS: dict[str, tuple[float, float]] = {
    "thumb_distal_link": (THUMB_SEGMENTS_M[-1], THUMB_RADIUS_M),
    "index_distal_link": (FINGER_SEGMENTS_M[-1], FINGER_RADIUS_M),
    "middle_distal_link": (FINGER_SEGMENTS_M[-1], FINGER_RADIUS_M),
    "ring_distal_link": (FINGER_SEGMENTS_M[-1], FINGER_RADIUS_M),
}
"""Fingertip links: (distal segment length, capsule radius); the tip sphere sits at
``length - radius`` along the link's z."""


class PinchError(ValueError):
    """The object cannot be pinched (too wide or too narrow for the hand)."""


@dataclass(frozen=True)
class PinchConfiguration:
    """Hand joint targets of a pinch sized for one object width.

    Attributes:
        width_m: Object width across the pinch.
        open: (12,) hand joints, fully open (HAND_JOINT_NAMES order).
        pre_grasp: (12,) joints with the tips ``pre_grasp_gap_m`` wider than the object.
        touch: (12,) joints where both tips just touch the object.
        closed: (12,) commanded grip (``squeeze_m`` past contact).
        center_palm_m: (3,) midpoint of the tip contacts at ``touch`` (where the object's
            centre goes), palm frame.
        axis_palm: (3,) unit vector thumb tip -> index tip at ``touch``, palm frame.
        tip_points_palm_m: Tip sphere centres (N, 3) over the open, pre-grasp, touch and closed
            configurations, palm frame (for clearance checks).
        tip_radius_m: Largest tip radius.

    """

    width_m: float
    open: FloatArray
    pre_grasp: FloatArray
    touch: FloatArray
    closed: FloatArray
    center_palm_m: FloatArray
    axis_palm: FloatArray
    tip_points_palm_m: FloatArray
    tip_radius_m: float


class PinchHand:
    """Pinch synergy of the hand: one closure scalar drives thumb and index.

    Args:
        config: Synergy parameters.

    """

    def __init__(self, config: PinchConfig | None = None) -> None:
        self.config = config or PinchConfig()
        links, joints = hand_links_and_joints(NOMINAL_LAYOUT.hand_camera_pose)
        self._description = Description(
            "hand", "flange", (Link("flange", LinkKind.ARM), *links), tuple(joints)
        )
        self._cache: dict[float, PinchConfiguration] = {}
        self._table: tuple[FloatArray, FloatArray] | None = None
        self._lower = np.array([JOINT_LIMITS[n].lower_rad for n in HAND_JOINT_NAMES])
        self._upper = np.array([JOINT_LIMITS[n].upper_rad for n in HAND_JOINT_NAMES])
        self._max_closure = min(
            JOINT_LIMITS["index_mcp_joint"].upper_rad, JOINT_LIMITS["thumb_mcp_joint"].upper_rad
        )

    def joints(self, closure: float) -> FloatArray:
        """Hand joint positions (HAND_JOINT_NAMES order) for closure scalar ``closure``."""
        cfg = self.config
        flex = max(closure, 0.0)
        values = {
            "thumb_rot_joint": cfg.thumb_rot_rad,
            "thumb_mcp_joint": closure,
            "thumb_ip_joint": cfg.thumb_ip_ratio * flex,
            "index_mcp_joint": closure,
            "index_pip_joint": cfg.pip_ratio * flex,
            "index_dip_joint": cfg.dip_ratio * flex,
        }
        for finger in ("middle", "ring"):
            values[f"{finger}_mcp_joint"] = cfg.other_fingers_mcp_rad
            values[f"{finger}_pip_joint"] = 0.0
            values[f"{finger}_dip_joint"] = 0.0
        q = np.array([values[n] for n in HAND_JOINT_NAMES])
        return np.clip(q, self._lower, self._upper)  # type: ignore[no-any-return]

    def tip_points(self, hand_q: FloatArray) -> dict[str, FloatArray]:
        """Tip sphere centres in ``palm_link`` for hand joints ``hand_q``."""
        poses = forward_kinematics(
            self._description, dict(zip(HAND_JOINT_NAMES, map(float, hand_q), strict=True))
        )
        palm_inv = np.linalg.inv(poses[PALM_LINK])
        return {
            link: (palm_inv @ poses[link] @ np.array([0.0, 0.0, length - radius, 1.0]))[:3]
            for link, (length, radius) in TIP_LINKS.items()
        }

    def gap_m(self, closure: float) -> float:
        """Free distance between the thumb and index tip surfaces at ``closure``."""
        tips = self.tip_points(self.joints(closure))
        distance = float(np.linalg.norm(tips["index_distal_link"] - tips["thumb_distal_link"]))
        return distance - FINGER_RADIUS_M - THUMB_RADIUS_M

    def _gap_table(self) -> tuple[FloatArray, FloatArray]:
        """Closure grid and gaps, up to the closure where the tips come closest."""
        if self._table is None:
            grid = np.linspace(self.config.open_closure, self._max_closure, 81)
            gaps = np.array([self.gap_m(float(c)) for c in grid])
            last = int(np.argmin(gaps))  # past it the tips cross and the gap grows again
            self._table = (grid[: last + 1], gaps[: last + 1])
        return self._table

    def closure_for_gap(self, gap_m: float) -> float:
        """Closure scalar whose tip gap is ``gap_m`` (bisection; the gap shrinks with closure).

        Raises:
            PinchError: If the gap is wider than the open hand or narrower than the closed one.

        """
        grid, gaps = self._gap_table()
        if gap_m > gaps[0] + 1e-9:
            raise PinchError(f"gap {gap_m:.4f} m: wider than the open pinch ({gaps[0]:.4f} m)")
        if gap_m < gaps[-1] - 1e-9:
            raise PinchError(
                f"gap {gap_m:.4f} m: narrower than the closed pinch ({gaps[-1]:.4f} m)"
            )
        index = int(np.searchsorted(-gaps, -gap_m))  # first grid point with gap <= gap_m
        low = float(grid[max(index - 1, 0)])
        high = float(grid[min(index, grid.size - 1)])
        for _ in range(16):
            middle = 0.5 * (low + high)
            if self.gap_m(middle) > gap_m:
                low = middle
            else:
                high = middle
        return 0.5 * (low + high)

    def max_width_m(self) -> float:
        """Widest object the pinch can take (with the pre-grasp gap)."""
        return float(self._gap_table()[1][0]) - self.config.pre_grasp_gap_m

    def configure(self, width_m: float) -> PinchConfiguration:
        """Open / pre-grasp / touch / closed hand joints for an object ``width_m`` wide.

        Raises:
            PinchError: If the object is too wide (or too narrow) for the pinch.

        """
        if width_m <= 0.0:
            raise PinchError(f"width_m = {width_m}: expected > 0")
        key = round(width_m, 6)
        if key not in self._cache:
            self._cache[key] = self._configure(key)
        return self._cache[key]

    def _configure(self, width_m: float) -> PinchConfiguration:
        cfg = self.config
        touch_c = self.closure_for_gap(width_m)
        pre_c = self.closure_for_gap(width_m + cfg.pre_grasp_gap_m)
        try:
            closed_c = self.closure_for_gap(max(width_m - cfg.squeeze_m, 0.0))
        except PinchError:
            closed_c = float(self._gap_table()[0][-1])  # narrower than the hand: close fully
        touch_q = self.joints(touch_c)
        tips = self.tip_points(touch_q)
        thumb, index = tips["thumb_distal_link"], tips["index_distal_link"]
        axis = (index - thumb) / np.linalg.norm(index - thumb)
        # Contact points lie on the segment between the tip centres, one radius in from each.
        contact_thumb = thumb + axis * THUMB_RADIUS_M
        contact_index = index - axis * FINGER_RADIUS_M
        configurations = [self.joints(cfg.open_closure), self.joints(pre_c), touch_q]
        configurations.append(self.joints(closed_c))
        points = np.array(
            [p for q in configurations for p in self.tip_points(q).values()], dtype=float
        )
        return PinchConfiguration(
            width_m=width_m,
            open=configurations[0],
            pre_grasp=configurations[1],
            touch=touch_q,
            closed=configurations[3],
            center_palm_m=0.5 * (contact_thumb + contact_index),
            axis_palm=axis,
            tip_points_palm_m=points,
            tip_radius_m=max(FINGER_RADIUS_M, THUMB_RADIUS_M),
        )
