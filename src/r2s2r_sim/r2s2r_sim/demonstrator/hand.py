"""Whole-hand grasp shapes: a pre-shape that cages the object without touching the belt.

A person reaching for a low object on a belt curls the fingers into a cage around it before
touching it: fingertips outside the object's sides, low enough to close under its centre of
mass, high enough not to scrape the moving belt. :func:`cage_preshape` finds that shape for an
object's height and half-width from the hand's planar finger kinematics (flexion happens in
the palm's y-z plane; fingers on the +y edge, thumb on −y, palm z pointing at the object).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from r2s2r_description.robot import (
    FINGER_BASE_Y_M,
    FINGER_RADIUS_M,
    FINGER_SEGMENTS_M,
    JOINT_LIMITS,
    THUMB_BASE_Y_M,
    THUMB_RADIUS_M,
    THUMB_SEGMENTS_M,
)

from r2s2r_sim.demonstrator.motion import FloatArray

SIDE_MARGIN_M = 0.008
"""Clearance between every finger point and the object's side before closing."""
BELT_CLEARANCE_M = 0.012
"""Height of the lowest finger point above the belt at the grasp pose."""


@dataclass(frozen=True)
class GraspShape:
    """A whole-hand grasp for one object size.

    Attributes:
        open: (12,) pre-shape, hand controller order.
        closed: (12,) closure target (every flexion joint curls further).
        palm_above_top_m: Palm height above the object's top that keeps the fingertips
            :data:`BELT_CLEARANCE_M` above the belt.

    """

    open: FloatArray
    closed: FloatArray
    palm_above_top_m: float


def _chain_points(
    angles: FloatArray, segments_m: tuple[float, ...], base_lateral_m: float
) -> tuple[FloatArray, FloatArray]:
    """Return lateral offset and depth of the joints and tip of a planar finger chain.

    Lateral is measured outwards from the palm centre; ``angles`` is a ``(K, J)`` grid of
    joint angles (flexion positive, inwards).
    """
    cumulative = np.cumsum(angles, axis=1)
    lateral = np.full((angles.shape[0],), base_lateral_m)
    depth = np.zeros(angles.shape[0])
    laterals, depths = [], []
    for j, length in enumerate(segments_m):
        lateral = lateral - length * np.sin(cumulative[:, j])
        depth = depth + length * np.cos(cumulative[:, j])
        laterals.append(lateral)
        depths.append(depth)
    return np.stack(laterals, axis=1), np.stack(depths, axis=1)


def _best_chain(
    names: tuple[str, ...],
    segments_m: tuple[float, ...],
    base_m: float,
    radius_m: float,
    half_width_m: float,
) -> tuple[FloatArray, float]:
    """Joint angles with every point outside the object, as shallow as possible."""
    grids = [
        np.arange(JOINT_LIMITS[n].lower_rad, JOINT_LIMITS[n].upper_rad + 1e-9, 0.05) for n in names
    ]
    mesh = np.stack(np.meshgrid(*grids, indexing="ij"), axis=-1).reshape(-1, len(names))
    lateral, depth = _chain_points(mesh, segments_m, base_m)
    outside = lateral.min(axis=1) >= half_width_m + radius_m + SIDE_MARGIN_M
    # The deepest point sets the palm height; prefer the shallowest cage, then the least curl.
    score = depth.max(axis=1) + 1e-3 * np.abs(mesh).sum(axis=1)
    score[~outside] = np.inf
    best = int(np.argmin(score))
    return mesh[best], float(depth[best].max() + radius_m)


def cage_preshape(
    object_height_m: float, half_width_m: float, closure_rad: float = 1.2
) -> GraspShape:
    """Pre-shape and closure of the whole hand for an object of this height and half-width.

    Args:
        object_height_m: Object height above the belt.
        half_width_m: Half of the object's extent along the closing direction (palm y).
        closure_rad: Extra MCP flexion of the closure (distal joints curl by a third of it).

    """
    finger_names = ("index_mcp_joint", "index_pip_joint", "index_dip_joint")
    finger, finger_depth = _best_chain(
        finger_names, FINGER_SEGMENTS_M, FINGER_BASE_Y_M, FINGER_RADIUS_M, half_width_m
    )
    thumb, thumb_depth = _best_chain(
        ("thumb_mcp_joint", "thumb_ip_joint"),
        THUMB_SEGMENTS_M,
        -THUMB_BASE_Y_M,
        THUMB_RADIUS_M,
        half_width_m,
    )
    open_shape = np.array([0.0, *thumb, *finger, *finger, *finger])
    delta = np.array(
        [
            0.0,
            closure_rad,
            closure_rad / 3.0,
            *([closure_rad, closure_rad / 3.0, closure_rad / 3.0] * 3),
        ]
    )
    names = (
        "thumb_rot_joint",
        "thumb_mcp_joint",
        "thumb_ip_joint",
        *(f"{f}_{j}_joint" for f in ("index", "middle", "ring") for j in ("mcp", "pip", "dip")),
    )
    lower = np.array([JOINT_LIMITS[n].lower_rad for n in names])
    upper = np.array([JOINT_LIMITS[n].upper_rad for n in names])
    closed = np.clip(open_shape + delta, lower, upper)
    deepest = max(finger_depth, thumb_depth)
    palm_above_top = max(0.003, deepest - object_height_m + BELT_CLEARANCE_M)
    return GraspShape(open_shape, closed, palm_above_top)
