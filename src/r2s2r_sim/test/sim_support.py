"""Shared paths, worlds and grasps of the r2s2r_sim tests."""

from pathlib import Path

import numpy as np
from r2s2r_world.kinematics import PalmIk, top_down_palm_pose
from r2s2r_world.world import ObjectType, WorldParams

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"

MARKER_DIAMETER_M = 0.04
"""Diameter of the camera tests' magenta marker sphere (m)."""


def add_marker(world: WorldParams) -> None:
    """Give ``world`` the magenta ``marker`` sphere type and a brighter ambient light."""
    world.objects["marker"] = ObjectType(
        shape="sphere",
        size_m=(MARKER_DIAMETER_M,) * 3,
        mass_kg=0.05,
        friction=0.8,
        rgba=(1.0, 0.0, 1.0, 1.0),
        target_bin="bin_0",
    )
    world.lighting.ambient = 0.6


def cylinder_grasp_waypoints(
    world: WorldParams, obj: np.ndarray, height: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arm positions above, at and lifted from an upright cylinder at ``obj`` (top-down palm)."""
    ik = PalmIk(world.layout())
    yaw = -np.pi / 2
    above = ik.solve(top_down_palm_pose(obj + np.array([0, 0, height / 2 + 0.16]), yaw))
    at = ik.solve(top_down_palm_pose(obj + np.array([0, 0, height / 2 + 0.01]), yaw), above)
    lifted = ik.solve(top_down_palm_pose(obj + np.array([0, 0, height / 2 + 0.21]), yaw), at)
    return above, at, lifted


def whole_hand(flex: float) -> list[float]:
    """Hand positions of a whole-hand grasp closed by ``flex`` (rad; negative opens)."""
    return [0.0, flex, 0.9 * flex] + [flex, 0.9 * flex, 0.6 * flex] * 3
