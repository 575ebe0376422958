"""One robust (Tukey-weighted) point-to-plane Gauss-Newton step in the observable subspace.

Points may be weighted by their expected off-surface scatter (:class:`PixelNoise`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from r2s2r_calibration.geometry import FloatArray, make_pose
from r2s2r_calibration.registration.faces import Faces, closest_faces
from r2s2r_calibration.registration.observability import (
    degenerate_split,
    normalised_information,
    point_to_plane_jacobian,
)


def _model_motion(
    update: FloatArray, pivot: FloatArray, length_m: float
) -> tuple[FloatArray, FloatArray]:
    """Rotation vector and origin translation of the model motion of an update (element frame)."""
    rotation = update[:3] / length_m
    return rotation, update[3:] - np.cross(rotation, pivot)


@dataclass
class PixelNoise:
    """Expected off-surface scatter of depth points (element frame), for point weights."""

    camera_local: FloatArray  # camera position in the element frame
    pixel_angle_rad: float  # 1 / focal length
    depth_noise_m: float

    def weights(self, local: FloatArray, normal: FloatArray) -> FloatArray:
        """Inverse variances along ``normal``, scaled so that a face-on point weighs 1."""
        rays = local - self.camera_local
        ranges = np.linalg.norm(rays, axis=1)
        cosine = np.einsum("ni,ni->n", rays, normal) / np.maximum(ranges, 1e-9)
        footprint = (ranges * self.pixel_angle_rad) ** 2 / 12.0
        variance = self.depth_noise_m**2 + footprint * np.clip(1.0 - cosine**2, 0.0, 1.0)
        return np.asarray((self.depth_noise_m**2 + 1e-12) / (variance + 1e-12))


def gauss_newton_step(
    local: FloatArray,
    faces: Faces,
    distance_m: float,
    length_m: float,
    min_observability: float,
    free: FloatArray,
    noise: PixelNoise | None = None,
    on_support: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """One robust point-to-plane step restricted to the observable subspace.

    Args:
        local: Observed points in the element frame of the current estimate.
        faces: Camera-facing model faces.
        distance_m: Tukey width: points farther from the model get no weight.
        length_m: Rotation scale (m).
        min_observability: Eigenvalue ratio below which a direction is held.
        free: (6, k) orthonormal basis of the solved directions (``free_basis``); the rest
            is held.
        noise: Pixel noise model for per-point weights (None: equal weights).
        on_support: Leave out points nearer to the support plane z = 0 than to the faces.

    Returns:
        The model motion ``M`` (4x4, element frame; ``T_new = T @ M``) and the largest point
        displacement it causes (m).

    """
    distance, signed, normal, nearest = closest_faces(local, faces)
    weights = np.where(distance < distance_m, (1.0 - (distance / distance_m) ** 2) ** 2, 0.0)
    if on_support:
        weights[np.abs(local[:, 2]) < distance] = 0.0
    if noise is not None:
        weights = weights * noise.weights(local, normal)
    if np.count_nonzero(weights) < 6:
        return np.eye(4), np.zeros(1)
    pivot = np.average(nearest, axis=0, weights=weights)
    jacobian = point_to_plane_jacobian(nearest, normal, pivot, length_m) @ free
    information = normalised_information(jacobian, weights)
    gradient = -(jacobian * weights[:, None]).T @ signed / weights.sum()
    ratios, observable, unobservable = degenerate_split(information, min_observability)
    eigenvalues = ratios * max(float(np.linalg.eigvalsh(information)[-1]), 1e-300)
    strong = ratios >= min_observability
    # Truncated solve: only the observable eigen-directions move.
    update = free @ (observable @ ((observable.T @ gradient) / eigenvalues[strong]))
    unobservable = free @ unobservable
    rotation, translation = _model_motion(update, pivot, length_m)
    if unobservable.shape[1] > 0:
        # The unobservable directions do not change the cost: use that freedom to keep the
        # element origin's motion free of them, so that they stay at the nominal value.
        origin_basis = np.column_stack(
            [np.concatenate(_model_motion(v, pivot, length_m)) for v in unobservable.T]
        )
        origin_basis[:3] *= length_m
        motion = np.concatenate([rotation * length_m, translation])
        coefficients, *_ = np.linalg.lstsq(origin_basis, motion, rcond=None)
        motion = motion - origin_basis @ coefficients
        rotation, translation = motion[:3] / length_m, motion[3:]
    step = make_pose(Rotation.from_rotvec(rotation).as_matrix(), translation)
    moved = local @ step[:3, :3].T + step[:3, 3] - local
    return step, np.linalg.norm(moved, axis=1)
