"""Arm inverse kinematics for the palm frame (damped least squares on the MuJoCo model).

A helper for scripted motions (tests, demonstrators, planners' seeds, calibration views): it
solves for the six arm joints that put ``palm_link`` (or another link) at a target pose in
``world`` for a given cell layout, and gives the link's forward kinematics. It compiles the
description's model (:func:`r2s2r_description.mjcf.to_mjspec`) and uses MuJoCo's kinematics and
Jacobian only, never a simulation step, so it needs no simulator; the planner, calibration and
generation use it on a real cell as in simulation.
"""

from __future__ import annotations

import mujoco
import numpy as np
from r2s2r_description.cell import CellLayout, build_description
from r2s2r_description.frames import PALM_LINK
from r2s2r_description.mjcf import to_mjspec
from r2s2r_description.robot import ARM_JOINT_NAMES, HOME_POSITIONS, JOINT_LIMITS
from r2s2r_description.transforms import FloatArray, Vector


class IkError(RuntimeError):
    """The IK did not converge to the requested tolerance."""


class PalmIk:
    """Inverse kinematics of ``palm_link`` (or another link) over the arm joints.

    Args:
        layout: Cell placements (the robot base pose matters).
        link: The link to place.

    """

    def __init__(self, layout: CellLayout, link: str = PALM_LINK):
        self.model = to_mjspec(build_description(layout)).compile()
        self.data = mujoco.MjData(self.model)
        self.body_id = self.model.body(link).id
        self.qadr = np.array(
            [self.model.jnt_qposadr[self.model.joint(n).id] for n in ARM_JOINT_NAMES]
        )
        self.dadr = np.array(
            [self.model.jnt_dofadr[self.model.joint(n).id] for n in ARM_JOINT_NAMES]
        )
        self.lower = np.array([JOINT_LIMITS[n].lower_rad for n in ARM_JOINT_NAMES])
        self.upper = np.array([JOINT_LIMITS[n].upper_rad for n in ARM_JOINT_NAMES])

    def forward(self, arm_q: Vector) -> FloatArray:
        """4x4 world pose of the link at arm joint positions ``arm_q``."""
        self.data.qpos[self.qadr] = arm_q
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)  # the Jacobian needs cdof
        pose = np.eye(4)
        pose[:3, :3] = self.data.xmat[self.body_id].reshape(3, 3)
        pose[:3, 3] = self.data.xpos[self.body_id]
        return pose

    def solve(
        self,
        target: FloatArray,
        seed_q: Vector | None = None,
        tolerance_m: float = 1e-4,
        tolerance_rad: float = 1e-3,
        max_iterations: int = 200,
    ) -> FloatArray:
        """Arm joints placing the link at ``target`` (4x4 in world).

        Args:
            target: Desired pose.
            seed_q: Start configuration (home by default); the solution stays near it.
            tolerance_m: Position tolerance.
            tolerance_rad: Orientation tolerance.
            max_iterations: Iteration cap.

        Raises:
            IkError: If the tolerance is not reached.

        """
        q = np.array(
            [HOME_POSITIONS[n] for n in ARM_JOINT_NAMES] if seed_q is None else seed_q, dtype=float
        )
        jac_p = np.zeros((3, self.model.nv))
        jac_r = np.zeros((3, self.model.nv))
        damping = 1e-3
        for _ in range(max_iterations):
            current = self.forward(q)
            error_p = target[:3, 3] - current[:3, 3]
            rot_err = target[:3, :3] @ current[:3, :3].T
            quat = np.zeros(4)
            mujoco.mju_mat2Quat(quat, rot_err.ravel())
            error_r = np.zeros(3)
            mujoco.mju_quat2Vel(error_r, quat, 1.0)
            if np.linalg.norm(error_p) < tolerance_m and np.linalg.norm(error_r) < tolerance_rad:
                return q
            mujoco.mj_jacBody(self.model, self.data, jac_p, jac_r, self.body_id)
            jac = np.vstack([jac_p[:, self.dadr], jac_r[:, self.dadr]])
            error = np.concatenate([error_p, error_r])
            step = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), error)
            norm = float(np.linalg.norm(step))
            if norm > 0.3:  # keep steps small so the linearisation holds
                step *= 0.3 / norm
            q = np.clip(q + step, self.lower, self.upper)
        raise IkError(
            f"IK for {self.model.body(self.body_id).name} did not converge: position error "
            f"{np.linalg.norm(error_p):.2e} m, orientation error {np.linalg.norm(error_r):.2e} rad"
        )


def top_down_palm_pose(position_m: Vector, yaw_rad: float) -> FloatArray:
    """Return a palm pose facing straight down (palm z = world -z) at ``position_m``.

    ``yaw_rad`` turns the palm's x axis (the finger row) about the world vertical.
    """
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    x_axis = np.array([c, s, 0.0])
    z_axis = np.array([0.0, 0.0, -1.0])
    y_axis = np.cross(z_axis, x_axis)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([x_axis, y_axis, z_axis], axis=1)
    pose[:3, 3] = position_m
    return pose
