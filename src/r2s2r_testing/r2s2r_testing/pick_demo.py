"""A scripted pick demonstration as a dataset episode, and the boundaries it was scripted with.

A cube demo in ``base_link`` (10 Hz, 120 frames): the object arrives at frame 5, the reach
starts at frame 30, the hand closes over frames 60-64, the object is lifted 2 cm per frame from
frame 68, carried over ``bin_0`` by frame 95, and the hand opens at frame 100. MimicGen's subtask
annotation must find :data:`REACH_START`, :data:`GRASP_CLOSED`, :data:`GRASP_END` and
:data:`RELEASE` in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from r2s2r_datagen.mimicgen.annotation import bin_poses_in_base
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS

from r2s2r_dataset import HAND_CAMERA_KEY, HEAD_CAMERA_KEY, Episode, EpisodeMetadata

if TYPE_CHECKING:
    from r2s2r_world.world import WorldParams

DT_S = 0.1
"""Frame period of the demonstration (s)."""
FRAMES = 120
"""Frames of the demonstration."""
MCP = ("thumb_mcp_joint", "index_mcp_joint", "middle_mcp_joint", "ring_mcp_joint")
"""The hand joints that close it (their commands encode the grasp)."""
REACH_START, GRASP_CLOSED, GRASP_END, RELEASE = 30, 64, 69, 100
"""Boundaries that annotation must find in the demonstration."""


def demo_metadata(joint_names: Sequence[str]) -> EpisodeMetadata:
    """Return the metadata of a successful real cube demo on a 0.1 m/s belt at 10 Hz.

    Args:
        joint_names: The columns of its joint positions and of its actions.

    """
    return EpisodeMetadata(
        source="real",
        world_config_id="real",
        behavior_source="demo",
        task="pick_sort",
        object_type="cube",
        belt_speed_mps=0.1,
        outcome="success",
        joint_names=list(joint_names),
        action_names=list(joint_names),
        control_rate_hz=10.0,
    )


def pick_demonstration(
    nominal: WorldParams, grasp: bool = True, lift: bool = True, release_over_bin: bool = True
) -> Episode:
    """Return the scripted demo; ``grasp``/``lift``/``release_over_bin`` off spoil that phase.

    Args:
        nominal: The world whose bins the object is carried to.
        grasp: Whether the hand closes (frames 60-64).
        lift: Whether the object is lifted and carried.
        release_over_bin: Whether it is carried over ``bin_0`` (else 0.4 m beside ``bin_2``).

    """
    times = np.arange(FRAMES) * DT_S
    actions = np.tile([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES], (FRAMES, 1))
    actions[REACH_START:, 0] += 0.02 * np.arange(1, FRAMES - REACH_START + 1)  # shoulder pan
    closure = np.full(FRAMES, -0.3)
    closure[REACH_START:] = -0.5
    if grasp:
        closure[60:65] = [-0.5, -0.3, -0.1, 0.1, 0.3]
        closure[65:RELEASE] = 0.3
    for name in MCP:
        actions[:, ALL_JOINT_NAMES.index(name)] = closure
    rest_z = 0.05 + 0.025  # belt top in base_link + half the cube
    pose = np.zeros((FRAMES, 7))
    pose[:, 6] = 1.0
    pose[:, 0] = -0.55
    pose[:, 1] = 0.3 - 0.1 * (times - 0.5)
    pose[:, 2] = rest_z
    if lift:
        pose[68:, 2] = rest_z + 0.02 * np.minimum(np.arange(68, FRAMES) - 67, 8)
        bin_xy = bin_poses_in_base(nominal)["bin_0" if release_over_bin else "bin_2"][:2, 3]
        if not release_over_bin:
            bin_xy = bin_xy + np.array([0.0, 0.4])
        start_xy = pose[74, :2].copy()
        for k in range(75, FRAMES):
            s = min((k - 74) / 21.0, 1.0)
            pose[k, :2] = start_xy + s * (bin_xy - start_xy)
    valid = np.arange(FRAMES) >= 5
    metadata = demo_metadata(ALL_JOINT_NAMES)
    image = np.zeros((FRAMES, 4, 4, 3), dtype=np.uint8)
    return Episode(
        metadata=metadata,
        timestamps_s=times,
        images={HEAD_CAMERA_KEY: image, HAND_CAMERA_KEY: image.copy()},
        joint_pos_rad=actions.astype(np.float32),
        belt_speed_mps=np.full(FRAMES, 0.1, dtype=np.float32),
        actions=actions.astype(np.float32),
        object_pose=pose.astype(np.float32),
        object_pose_valid=valid,
    )
