"""Object-relative reach: where the palm goes, said relative to the object it goes for.

A policy that predicts joint targets from a tracked object's position has to learn the arm's
inverse kinematics to put its palm at an object it has not seen at that place, and with a few
tens of demonstrations it does not: real-only rollouts passed 3-8 cm beside the object where
the demonstrations closed under 1 cm off its axis (``bench/probe_policy_rollouts.py``). Said
relative to the object, the same demonstrations agree with each other: the palm approaches to
about the same offset from the object whatever the object's position. This is the object-centric
view MimicGen uses to transform demonstrations (its subtask segments are poses relative to the
object), here used inside the policy:

- **training**: besides the joint chunk, the model predicts for every chunk step ``k`` the palm
  position of the label's joint targets (forward kinematics of the robot description) minus the
  tracked object's position at the observation, both in ``base_link``. The labels come from the
  batch's own ``actions`` and ``object_track``, so no dataset holds anything new; steps where
  the object is not visible at the observation are masked out.
- **deployment** (:meth:`ObjectRelativeReach.correct`): while the object is visible, the
  predicted offsets plus the tracked position give palm goals, and a few damped least-squares
  steps on the arm joints move each chunk step's palm there, fully where the step's palm is
  predicted within ``NEAR_M`` of the object, not at all beyond ``FAR_M`` (the grasp is
  object-centric; waiting for the object and carrying it are not: corrected there, the palm
  followed the object down the belt and every validation rollout missed). The orientation, the
  hand and every step without a visible object keep the joint head's targets. The correction
  is bounded (``max_correction_m``), and the inference engine's position and velocity limits
  still apply afterwards.

Nothing here reads the simulator or the cell calibration: ``base_link`` is the robot's own
frame, the tracker publishes in it and the kinematics are the description's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .palm_frame import TRACK_POSITION, PalmObjectFeatures, chain_to_palm

REACH_DIM = 3
"""Outputs per chunk step: the palm position minus the object position (x, y, z in base_link)."""
REACH_SCALE_M = 0.25
"""Normalisation of the offsets (m per unit): the approach spans about a metre."""
NEAR_M = 0.10
"""Predicted palm-to-object distance (m) under which a chunk step is corrected fully."""
FAR_M = 0.20
"""Predicted palm-to-object distance (m) beyond which a chunk step is not corrected."""
VISIBLE_FIELD = "visible"
"""Tracked-object column that says the object is in the latest track message (1) or not (0)."""


class ObjectRelativeReach(nn.Module):
    """Labels, loss and deployment-time correction of the object-relative palm positions.

    Args:
        joint_names: Columns of the joint-position input.
        action_names: Columns of the action (joint targets).
        object_track_fields: Columns of the tracked-object input (needs ``visible``).
        delta_actions: Whether the batch's ``actions`` are deltas to the measured joints.

    Raises:
        ValueError: If an arm joint of the palm's chain is not an action, or ``visible`` is
            missing from the track.

    """

    def __init__(
        self,
        joint_names: Sequence[str],
        action_names: Sequence[str],
        object_track_fields: Sequence[str],
        delta_actions: bool = False,
    ) -> None:
        super().__init__()
        self.kinematics = PalmObjectFeatures(joint_names)
        names, actions = list(joint_names), list(action_names)
        arm = [joint.name for joint in chain_to_palm() if joint.joint_type == "revolute"]
        missing = [name for name in arm if name not in actions]
        if missing:
            raise ValueError(f"object-relative reach: the actions lack the arm joints {missing}")
        if VISIBLE_FIELD not in object_track_fields:
            raise ValueError(
                f"object-relative reach: the tracked object has no {VISIBLE_FIELD!r} column "
                f"({list(object_track_fields)})"
            )
        self._action_in_joints = [names.index(name) for name in actions]
        self._arm_in_joints = [names.index(name) for name in arm]
        self._visible = list(object_track_fields).index(VISIBLE_FIELD)
        self._delta = delta_actions

    def _joint_vectors(self, joints: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``(B, H, J)``: the measured joints with the action columns set to the targets."""
        full = joints[:, None, :].expand(-1, targets.shape[1], -1).clone()
        full[:, :, self._action_in_joints] = targets
        return full

    def palm_positions(self, joints: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``(B, H, 3)`` palm positions in ``base_link`` of absolute joint targets ``(B, H, A)``."""
        full = self._joint_vectors(joints, targets)
        batch, horizon, width = full.shape
        pose = self.kinematics.palm_pose(full.reshape(batch * horizon, width))
        return pose[:, :3, 3].reshape(batch, horizon, 3)

    def visible(self, track: torch.Tensor) -> torch.Tensor:
        """``(B,)`` bool: the object is in the latest track message."""
        return track[:, self._visible] > 0.5

    def labels(
        self, joints: torch.Tensor, actions: torch.Tensor, track: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalised offset labels ``(B, H, 3)`` and their mask ``(B, H)``.

        Args:
            joints: Measured joints ``(B, J)`` of the observation.
            actions: The batch's action labels ``(B, H, A)`` (deltas when ``delta_actions``).
            track: Tracked-object vectors ``(B, F)`` of the observation.
            mask: ``(B, H)`` True where the chunk step is real (not padding).

        """
        targets = actions + joints[:, None, self._action_in_joints] if self._delta else actions
        with torch.no_grad():
            palm = self.palm_positions(joints.double(), targets.double())
            offsets = (palm - track.double()[:, None, TRACK_POSITION]) / REACH_SCALE_M
        return offsets.to(actions.dtype), mask & self.visible(track)[:, None]

    @torch.no_grad()
    def correct(
        self,
        joints: np.ndarray,
        targets: np.ndarray,
        track: np.ndarray,
        offsets_normalized: np.ndarray,
        iterations: int = 3,
        damping: float = 0.01,
        max_correction_m: float = 0.15,
        near_m: float = NEAR_M,
        far_m: float = FAR_M,
    ) -> np.ndarray:
        """Move each chunk step's palm to the object plus its predicted offset.

        Args:
            joints: Measured joints ``(J,)`` of the observation.
            targets: Absolute joint targets ``(H, A)`` from the joint head.
            track: The tracked-object vector ``(F,)`` of the observation.
            offsets_normalized: Predicted offsets ``(H, 3)`` (units of ``REACH_SCALE_M``).
            iterations: Damped least-squares steps.
            damping: Damping of the least-squares steps (m).
            max_correction_m: Largest palm displacement a step's correction may ask for.
            near_m: Steps whose predicted palm-to-object distance is below this are corrected
                fully.
            far_m: Steps predicted farther from the object than this are not corrected (in
                between, a linear blend): away from the object, where the demonstrations wait
                or carry, the palm's place is not said relative to the object.

        Returns:
            ``(H, A)`` targets: the arm joints corrected, the rest unchanged; ``targets``
            itself when the object is not visible.

        """
        if track[self._visible] <= 0.5:
            return targets
        measured = torch.as_tensor(joints, dtype=torch.float64)[None]
        q = self._joint_vectors(measured, torch.as_tensor(targets, dtype=torch.float64)[None])[0]
        start = self.kinematics.palm_pose(q)[:, :3, 3]
        goal = torch.as_tensor(track, dtype=torch.float64)[TRACK_POSITION] + REACH_SCALE_M * (
            torch.as_tensor(offsets_normalized, dtype=torch.float64)
        )
        distance = (REACH_SCALE_M * torch.as_tensor(offsets_normalized, dtype=torch.float64)).norm(
            dim=1, keepdim=True
        )
        weight = ((far_m - distance) / max(far_m - near_m, 1e-9)).clamp(0.0, 1.0)
        if not bool((weight > 0).any()):
            return targets
        move = weight * (goal - start)
        norm = move.norm(dim=1, keepdim=True).clamp_min(1e-12)
        goal = start + move * (max_correction_m / norm).clamp(max=1.0)
        arm = self._arm_in_joints
        step_rad = 1e-4
        eye = torch.eye(3, dtype=torch.float64)
        for _ in range(iterations):
            horizon = q.shape[0]
            # Forward differences of the palm position over the arm joints, one batch.
            probes = q[None].repeat(len(arm) + 1, 1, 1)
            for i, column in enumerate(arm):
                probes[i + 1, :, column] += step_rad
            positions = self.kinematics.palm_pose(probes.reshape(-1, q.shape[1]))[:, :3, 3]
            positions = positions.reshape(len(arm) + 1, horizon, 3)
            palm = positions[0]
            jacobian = ((positions[1:] - palm[None]) / step_rad).permute(1, 2, 0)  # (H, 3, n)
            error = goal - palm
            solve = torch.linalg.solve(
                jacobian @ jacobian.transpose(1, 2) + damping**2 * eye, error[:, :, None]
            )
            q[:, arm] += (jacobian.transpose(1, 2) @ solve)[:, :, 0]
        corrected = np.array(targets, dtype=np.float64, copy=True)
        corrected[:, :] = q[:, self._action_in_joints].numpy()
        return corrected.astype(targets.dtype, copy=False)
