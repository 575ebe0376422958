"""Degeneracy of point-to-plane registration: information, unobservable directions, their names.

Zhang, Kaess & Singh 2016, "On degeneracy of optimization-based state estimation problems":
directions whose eigenvalue ratio of the normalised information is below ``min_observability``
are unobservable. Pose directions are (rx, ry, rz, tx, ty, tz) in the element frame, rotations
scaled by a length so that they compare with translations.
"""

from __future__ import annotations

import numpy as np

from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.registration.elements import AXES, PoseAxis


def point_to_plane_jacobian(
    nearest: FloatArray, normal: FloatArray, pivot: FloatArray, length_m: float
) -> FloatArray:
    """d(residual)/d(scaled rotation about ``pivot``, translation) of point-to-plane residuals.

    The model moves by ``q -> q + w x (q - pivot) + t`` with ``w = rotation / length_m``; the
    residual ``n . (p - q)`` then changes by ``-((q - pivot) x n) . w - n . t``.
    """
    return np.hstack([-np.cross(nearest - pivot, normal) / length_m, -normal])


def normalised_information(jacobian: FloatArray, weights: FloatArray) -> FloatArray:
    """Weighted information ``J^T W J`` divided by the sum of the weights."""
    return np.asarray((jacobian * weights[:, None]).T @ jacobian / max(float(weights.sum()), 1e-12))


def degenerate_split(
    information: FloatArray, min_observability: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Eigenvalue ratios, observable eigenvectors and unobservable eigenvectors (columns)."""
    eigenvalues, eigenvectors = np.linalg.eigh(information)
    ratios = np.maximum(eigenvalues, 0.0) / max(float(eigenvalues[-1]), 1e-300)
    weak = ratios < min_observability
    return ratios, eigenvectors[:, ~weak], eigenvectors[:, weak]


def axis_names(element: str) -> dict[PoseAxis, str]:
    """Readable name per pose axis, e.g. ``"translation along belt x"``."""
    return {
        axis: (
            f"rotation about {element} {axis[1]}"
            if axis[0] == "r"
            else f"translation along {element} {axis[1]}"
        )
        for axis in AXES
    }


def describe_directions(basis: FloatArray, element: str, alignment: float) -> list[str]:
    """Human-readable names of the subspace spanned by ``basis`` (6 x k, orthonormal columns).

    Element axes lying in the subspace are named ("translation along belt x"); what is left is
    given as unit vectors over (rx, ry, rz, tx, ty, tz).
    """
    names = axis_names(element)
    named = [axis for k, axis in enumerate(AXES) if np.linalg.norm(basis[k]) >= alignment]
    described = [names[axis] for axis in named]
    remaining = basis.shape[1] - len(named)
    if remaining > 0:
        covered = np.zeros((6, len(named)))
        for column, axis in enumerate(named):
            covered[AXES.index(axis), column] = 1.0
        rest = basis - covered @ (covered.T @ basis)
        left, _, _ = np.linalg.svd(rest, full_matrices=False)
        for k in range(remaining):
            vector = left[:, k] * np.sign(left[np.argmax(np.abs(left[:, k])), k])
            terms = ", ".join(
                f"{value:+.2f} {axis}" for axis, value in zip(AXES, vector, strict=True)
            )
            described.append(f"direction ({terms}) of {element}")
    return described


def directions_allowed(basis: FloatArray, allowed: list[PoseAxis], alignment: float) -> bool:
    """Tell whether every direction of ``basis`` (6 x k) lies within the allowed axes."""
    if basis.shape[1] == 0:
        return True
    rows = [AXES.index(axis) for axis in allowed]
    if not rows:
        return False
    singular = np.linalg.svd(basis[rows], compute_uv=False)
    return bool(len(singular) >= basis.shape[1] and singular[basis.shape[1] - 1] >= alignment)


def free_basis(held: list[PoseAxis]) -> FloatArray:
    """(6, k) basis of the pose directions that are solved (every axis not in ``held``).

    The held rotations and translations are axis-aligned in the element frame; rotations about
    z through any pivot only move x and y, so with ``rx``, ``ry`` and ``tz`` held the solved
    motions never change height, roll or pitch.
    """
    return np.eye(6)[:, [k for k, axis in enumerate(AXES) if axis not in held]]
