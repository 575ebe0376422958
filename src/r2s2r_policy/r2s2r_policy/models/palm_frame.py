"""The tracked object seen from the palm: a policy input derived from joints and the track.

A policy that reads the measured arm joints and the tracked object's pose in ``base_link`` has
to learn the arm's forward kinematics before it can tell how far the object is from its hand,
and with a few tens of demonstrations it does not. :class:`PalmObjectFeatures` computes that
geometry explicitly, batched in torch, from the robot description (the same kinematic tree the
simulator, the planner and rviz use; no simulator, no cell calibration: ``base_link`` is the
robot's own frame and the tracker publishes in it):

- the palm position in ``base_link`` (m);
- the object position minus the palm position, in ``base_link`` (m);
- the object position relative to the palm, in the palm frame (m);
- the object velocity in the palm frame (m/s).

These are functions of observations the cell publishes (``/joint_states`` and
``/objects/tracks``), computed inside the model from the same batch keys in training and in
deployment, so the two cannot differ (docs/architecture.md section 7). robomimic's low-dim
observations carry the same kind of object-to-end-effector vector for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from r2s2r_description.cell import NOMINAL_LAYOUT
from r2s2r_description.frames import BASE_LINK, PALM_LINK
from r2s2r_description.model import Joint
from r2s2r_description.robot import arm_links_and_joints, hand_links_and_joints
from torch import nn

PALM_OBJECT_FIELDS: tuple[str, ...] = (
    "palm_x_m",
    "palm_y_m",
    "palm_z_m",
    "object_minus_palm_x_m",
    "object_minus_palm_y_m",
    "object_minus_palm_z_m",
    "object_in_palm_x_m",
    "object_in_palm_y_m",
    "object_in_palm_z_m",
    "object_velocity_in_palm_x_mps",
    "object_velocity_in_palm_y_mps",
    "object_velocity_in_palm_z_mps",
)
"""Columns of the derived input (:class:`PalmObjectFeatures` output), in order."""

TRACK_POSITION = slice(0, 3)
"""``x_m, y_m, z_m`` of the tracked-object vector (r2s2r_dataset.object_track)."""
TRACK_VELOCITY = slice(3, 6)
"""``vx_mps, vy_mps, vz_mps`` of the tracked-object vector."""


def chain_to_palm(tip: str = PALM_LINK, root: str = BASE_LINK) -> list[Joint]:
    """Return the joints from ``root`` to ``tip`` of the robot description, root first.

    Raises:
        ValueError: If ``tip`` is not below ``root`` in the arm + hand tree.

    """
    _, arm_joints = arm_links_and_joints()
    _, hand_joints = hand_links_and_joints(NOMINAL_LAYOUT.hand_camera_pose)
    by_child = {joint.child: joint for joint in (*arm_joints, *hand_joints)}
    chain: list[Joint] = []
    link = tip
    while link != root:
        joint = by_child.get(link)
        if joint is None:
            raise ValueError(f"link {tip!r} is not below {root!r} in the robot description")
        chain.append(joint)
        link = joint.parent
    return chain[::-1]


def _skew(axis: np.ndarray) -> np.ndarray:
    """Cross-product matrix ``[a]x`` of a 3-vector."""
    x, y, z = axis
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


class PalmObjectFeatures(nn.Module):
    """Batched palm forward kinematics and the tracked object relative to the palm.

    The chain from ``base_link`` to ``palm_link`` is folded at construction into one constant
    transform before each revolute joint and one after the last, so a batch costs one
    Rodrigues formula over all revolute joints at once and a matmul per revolute joint (a
    per-joint loop of small ops cost ~3 % of a training step).

    Args:
        joint_names: Columns of the joint-position input (must contain the chain's joints).

    Raises:
        ValueError: If a revolute joint of the chain is missing from ``joint_names``.

    """

    segments: torch.Tensor
    tail: torch.Tensor
    skews: torch.Tensor
    skews_squared: torch.Tensor
    columns: torch.Tensor

    def __init__(self, joint_names: Sequence[str]) -> None:
        super().__init__()
        chain = chain_to_palm()
        names = list(joint_names)
        revolute = [joint for joint in chain if joint.joint_type == "revolute"]
        missing = [joint.name for joint in revolute if joint.name not in names]
        if missing:
            raise ValueError(f"palm kinematics: joint inputs lack {missing} (have {names})")
        segments: list[np.ndarray] = []
        skews: list[np.ndarray] = []
        fixed = np.eye(4)  # the product of origins since the last revolute joint
        for joint in chain:
            fixed = fixed @ joint.origin.matrix()
            if joint.joint_type == "revolute":
                segments.append(fixed)
                axis = np.asarray(joint.axis, dtype=np.float64)
                skews.append(_skew(axis / np.linalg.norm(axis)))
                fixed = np.eye(4)
        skew_stack = np.array(skews).reshape(-1, 3, 3)
        for name, value in (
            ("segments", np.array(segments).reshape(-1, 4, 4)),
            ("tail", fixed),
            ("skews", skew_stack),
            ("skews_squared", skew_stack @ skew_stack),
        ):
            self.register_buffer(name, torch.from_numpy(value), persistent=False)
        columns = torch.tensor([names.index(joint.name) for joint in revolute], dtype=torch.long)
        self.register_buffer("columns", columns, persistent=False)

    @property
    def output_dim(self) -> int:
        """Width of the output (len(:data:`PALM_OBJECT_FIELDS`))."""
        return len(PALM_OBJECT_FIELDS)

    def palm_pose(self, joint_pos_rad: torch.Tensor) -> torch.Tensor:
        """``(B, 4, 4)`` pose of ``palm_link`` in ``base_link`` at the given joint positions."""
        dtype, device = joint_pos_rad.dtype, joint_pos_rad.device
        batch, count = joint_pos_rad.shape[0], len(self.columns)
        angles = joint_pos_rad[:, self.columns][:, :, None, None]
        # Rodrigues: R = I + sin(q) [a]x + (1 - cos(q)) [a]x^2, every revolute joint at once.
        motions = torch.zeros(batch, count, 4, 4, dtype=dtype, device=device)
        motions[..., :3, :3] = (
            torch.eye(3, dtype=dtype, device=device)
            + angles.sin() * self.skews.to(dtype)
            + (1.0 - angles.cos()) * self.skews_squared.to(dtype)
        )
        motions[..., 3, 3] = 1.0
        links = self.segments.to(dtype) @ motions
        pose = (
            links[:, 0] if count else torch.eye(4, dtype=dtype, device=device).expand(batch, 4, 4)
        )
        for index in range(1, count):
            pose = pose @ links[:, index]
        return pose @ self.tail.to(dtype)

    def forward(self, joint_pos_rad: torch.Tensor, object_track: torch.Tensor) -> torch.Tensor:
        """``(B, 12)`` features (:data:`PALM_OBJECT_FIELDS`) from joints ``(B, J)`` and tracks.

        Args:
            joint_pos_rad: Measured joint positions in the constructor's ``joint_names`` order.
            object_track: Tracked-object vectors ``(B, F)`` (position and velocity in
                ``base_link`` first, as :mod:`r2s2r_dataset.object_track` lays them out).

        """
        pose = self.palm_pose(joint_pos_rad)
        rotation, palm = pose[:, :3, :3], pose[:, :3, 3]
        relative = object_track[:, TRACK_POSITION] - palm
        in_palm = (rotation.transpose(1, 2) @ relative[:, :, None])[:, :, 0]
        velocity = (rotation.transpose(1, 2) @ object_track[:, TRACK_VELOCITY, None])[:, :, 0]
        return torch.cat([palm, relative, in_palm, velocity], dim=-1)
