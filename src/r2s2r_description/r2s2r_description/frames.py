"""The cell's frame names that other packages address: the one home of their spelling.

The description builds these links (:mod:`r2s2r_description.robot`,
:mod:`r2s2r_description.cell`); tf, the planner, calibration, tracking and the simulator look
them up by these names. A camera's frames (``<camera>_link``, ``<camera>_optical_frame``) are
its descriptor's (:mod:`r2s2r_description.cameras`).
"""

from __future__ import annotations

WORLD_FRAME = "world"
"""The root of the cell, on the floor (the description's root link)."""
BASE_LINK = "base_link"
"""The arm's base, on the table: object tracks and belt measurements are expressed in it."""
PALM_LINK = "palm_link"
"""The hand frame, on the palm surface (``+z`` the approach direction); the hand camera's mount."""
