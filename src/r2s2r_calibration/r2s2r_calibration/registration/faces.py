"""An element's model surfaces: sampled points, bounds, face rectangles and closest points.

Correspondences are exact closest points on the face rectangles; faces turned away from the
camera are culled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from r2s2r_calibration.geometry import FloatArray, pose_from_xyz_rpy
from r2s2r_calibration.registration.elements import FACES, FaceName, SceneElement


def _visible_faces(element: SceneElement) -> Iterator[tuple[FloatArray, FloatArray, FaceName]]:
    """Yield ``(T_element_box, box size m, face)`` of every box face of the element not hidden."""
    for box in element.boxes:
        T_box = pose_from_xyz_rpy(box.xyz_m, box.rpy_rad)
        size = np.asarray(box.size_m, dtype=float)
        for face in FACES:
            if face not in box.hidden_faces:
                yield T_box, size, face


def _face_axes(face: FaceName) -> tuple[int, float, list[int]]:
    """Return the face's normal axis (0-2), its sign along it and the two in-plane axes."""
    axis = "xyz".index(face[1])
    sign = 1.0 if face[0] == "+" else -1.0
    return axis, sign, [index for index in range(3) if index != axis]


def _face_points(size_m: FloatArray, face: FaceName, spacing_m: float) -> tuple[FloatArray, ...]:
    axis, sign, others = _face_axes(face)
    counts = [max(2, int(np.ceil(size_m[index] / spacing_m)) + 1) for index in others]
    a, b = np.meshgrid(
        np.linspace(-0.5, 0.5, counts[0]) * size_m[others[0]],
        np.linspace(-0.5, 0.5, counts[1]) * size_m[others[1]],
    )
    points = np.zeros((a.size, 3))
    points[:, others[0]] = a.ravel()
    points[:, others[1]] = b.ravel()
    points[:, axis] = sign * 0.5 * size_m[axis]
    normals = np.zeros_like(points)
    normals[:, axis] = sign
    return points, normals


def element_model_points(element: SceneElement, spacing_m: float) -> tuple[FloatArray, ...]:
    """Points and outward normals sampled on the visible faces of an element (element frame)."""
    all_points, all_normals = [], []
    for T_box, size, face in _visible_faces(element):
        points, normals = _face_points(size, face, spacing_m)
        all_points.append(points @ T_box[:3, :3].T + T_box[:3, 3])
        all_normals.append(normals @ T_box[:3, :3].T)
    return np.vstack(all_points), np.vstack(all_normals)


def element_bounds(element: SceneElement) -> tuple[FloatArray, FloatArray]:
    """Lower and upper corners of the element's boxes in its own frame (m)."""
    corners = []
    for box in element.boxes:
        T_box = pose_from_xyz_rpy(box.xyz_m, box.rpy_rad)
        half = 0.5 * np.asarray(box.size_m)
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        corners.append((signs * half) @ T_box[:3, :3].T + T_box[:3, 3])
    stacked = np.vstack(corners)
    return stacked.min(axis=0), stacked.max(axis=0)


@dataclass
class Faces:
    """Rectangular model faces in the element frame (one row per face)."""

    centre: FloatArray  # (F, 3)
    normal: FloatArray  # (F, 3), outward
    axis_a: FloatArray  # (F, 3), in-plane unit axes
    axis_b: FloatArray
    half: FloatArray  # (F, 2), half extents along axis_a, axis_b

    def subset(self, keep: npt.NDArray[np.bool_]) -> Faces:
        """Return the faces where ``keep`` is true."""
        return Faces(
            self.centre[keep],
            self.normal[keep],
            self.axis_a[keep],
            self.axis_b[keep],
            self.half[keep],
        )


def element_faces(element: SceneElement) -> Faces:
    """Rectangles of the element's visible faces (every box face not hidden), element frame."""
    rows = []
    for T_box, size, face in _visible_faces(element):
        axis, sign, others = _face_axes(face)
        columns = T_box[:3, :3]
        rows.append(
            (
                T_box[:3, 3] + columns[:, axis] * sign * 0.5 * size[axis],
                columns[:, axis] * sign,
                columns[:, others[0]],
                columns[:, others[1]],
                0.5 * size[others],
            )
        )
    stacked = [np.array([row[i] for row in rows]) for i in range(5)]
    return Faces(*stacked)


def facing_faces(faces: Faces, camera_local: FloatArray | None) -> Faces:
    """Faces turned towards the camera (back-face culling).

    Culling keeps a thin wall's inner and outer faces from competing for the same points.
    """
    if camera_local is None:
        return faces
    return faces.subset(np.einsum("fi,fi->f", camera_local - faces.centre, faces.normal) > 0)


def closest_faces(
    points: FloatArray, faces: Faces
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Closest point on any face rectangle for each point (element frame).

    Returns:
        Distance to the closest point, signed distance to that face's plane, the face normal
        and the closest point, per point.

    """
    offset = points[:, None, :] - faces.centre[None]
    along_a = np.clip(
        np.einsum("nfi,fi->nf", offset, faces.axis_a), -faces.half[:, 0], faces.half[:, 0]
    )
    along_b = np.clip(
        np.einsum("nfi,fi->nf", offset, faces.axis_b), -faces.half[:, 1], faces.half[:, 1]
    )
    closest = (
        faces.centre[None] + along_a[..., None] * faces.axis_a + along_b[..., None] * faces.axis_b
    )
    distance = np.linalg.norm(points[:, None, :] - closest, axis=2)
    best = np.argmin(distance, axis=1)
    rows = np.arange(len(points))
    normal = faces.normal[best]
    nearest = closest[rows, best]
    signed = np.einsum("ni,ni->n", points - nearest, normal)
    return distance[rows, best], signed, normal, nearest
