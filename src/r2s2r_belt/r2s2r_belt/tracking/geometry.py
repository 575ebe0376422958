"""The tracker's array type and geometric conventions (NumPy, no ROS).

Conventions: 4x4 homogeneous transforms ``T_a_b`` map points of frame ``b`` into frame ``a``;
rotations and quaternions (``(w, x, y, z)``, the workspace's one order) come from
:mod:`r2s2r_description.transforms`; the optical frame is REP 103 (z forward, x right, y down);
pixel centres at integer coordinates (OpenCV). The camera model is
:class:`r2s2r_common.camera_model.CameraModel`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
