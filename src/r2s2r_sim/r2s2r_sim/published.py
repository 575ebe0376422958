"""What a cell publishes about itself: camera calibrations (``camera_info``) and fixed mounts.

A real cell's drivers publish the datasheet (or a calibration file) and the CAD mounts, not the
truth; a simulated cell does the same from the world it is given as *published* (the real twin
gives the NOMINAL world, see :class:`r2s2r_sim.cell_runtime.SimCell`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from r2s2r_common.camera_info import CameraCalibration, YamlMatrix
from r2s2r_description.cell import build_description
from r2s2r_description.transforms import matrix_to_quat
from r2s2r_world.world import CameraParams, WorldParams


def camera_calibration(params: CameraParams, camera_name: str) -> CameraCalibration:
    """Return the ``camera_info`` calibration of a camera (plumb_bob, with its distortion).

    For the real twin this is called with the NOMINAL world's cameras: what a datasheet says.
    """
    k = np.array(
        [[params.fx_px, 0.0, params.cx_px], [0.0, params.fy_px, params.cy_px], [0.0, 0.0, 1.0]]
    )
    return CameraCalibration(
        image_width=params.width_px,
        image_height=params.height_px,
        camera_name=camera_name,
        camera_matrix=YamlMatrix.from_array(k),
        distortion_model="plumb_bob",
        distortion_coefficients=YamlMatrix.from_array(np.array([params.distortion.as_array()])),
        projection_matrix=YamlMatrix.from_array(np.hstack([k, np.zeros((3, 1))])),
    )


@dataclass(frozen=True)
class StaticTransform:
    """A fixed mount: ``child`` in ``parent`` (translation m, quaternion w, x, y, z)."""

    parent: str
    child: str
    translation_m: tuple[float, float, float]
    quat_wxyz: tuple[float, float, float, float]


def static_transforms(world: WorldParams) -> list[StaticTransform]:
    """Every fixed joint of the cell description of ``world``, as a URDF would give them.

    For the real twin this is called with the NOMINAL world (CAD mounts), never the truth.
    """
    transforms = []
    for joint in build_description(world.layout()).joints:
        if joint.joint_type != "fixed":
            continue
        matrix = joint.origin.matrix()
        quat = matrix_to_quat(matrix[:3, :3])
        transforms.append(
            StaticTransform(
                joint.parent,
                joint.child,
                (float(matrix[0, 3]), float(matrix[1, 3]), float(matrix[2, 3])),
                (float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
            )
        )
    return transforms
