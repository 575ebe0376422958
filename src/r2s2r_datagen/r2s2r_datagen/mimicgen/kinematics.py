"""Palm kinematics in ``base_link`` (forward and inverse), over ``r2s2r_sim``'s ``PalmIk``.

The arm's kinematics relative to its base do not depend on where the base stands, so poses
are exchanged in ``base_link``; the cell layout only fixes the world frame PalmIk works in.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from r2s2r_world.kinematics import PalmIk
from r2s2r_world.world import WorldParams

FloatArray = NDArray[np.float64]


class BaseLinkArm:
    """Forward/inverse kinematics of ``palm_link`` expressed in ``base_link``.

    Args:
        world: The cell (its layout builds the kinematic model; its base pose maps frames).

    """

    def __init__(self, world: WorldParams) -> None:
        self.ik = PalmIk(world.layout())
        self.base = world.robot.base_pose.to_pose().matrix()
        self.base_inverse = np.linalg.inv(self.base)

    def forward(self, arm_q: FloatArray) -> FloatArray:
        """4x4 palm pose in base_link at arm joints ``arm_q`` (6,)."""
        return self.base_inverse @ self.ik.forward(np.asarray(arm_q, dtype=float))  # type: ignore[no-any-return]

    def forward_many(self, arm_q: FloatArray) -> FloatArray:
        """``(N, 4, 4)`` palm poses for ``(N, 6)`` joint rows."""
        return np.stack([self.forward(q) for q in np.asarray(arm_q, dtype=float)])

    def solve(
        self,
        pose_base: FloatArray,
        seed_q: FloatArray,
        tolerance_m: float = 1e-4,
        tolerance_rad: float = 2e-3,
        max_iterations: int = 200,
    ) -> FloatArray:
        """Arm joints placing the palm at ``pose_base`` (base_link), near ``seed_q``.

        Raises:
            r2s2r_world.kinematics.IkError: If the tolerance is not reached.

        """
        return self.ik.solve(
            self.base @ pose_base, seed_q, tolerance_m, tolerance_rad, max_iterations
        )
