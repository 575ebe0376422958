"""Joint positions for tests."""

from __future__ import annotations

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES, JOINT_LIMITS


def random_positions(seed: int) -> dict[str, float]:
    """Return a position per joint (:data:`ALL_JOINT_NAMES` order), uniform within its limits.

    Each range is also clipped to ±2.5 rad, so that no joint sits at a full turn.
    """
    rng = np.random.default_rng(seed)
    return {
        name: float(
            rng.uniform(
                max(JOINT_LIMITS[name].lower_rad, -2.5), min(JOINT_LIMITS[name].upper_rad, 2.5)
            )
        )
        for name in ALL_JOINT_NAMES
    }
