"""Scene registration: poses of the table, belt and bins from a depth image.

Each scene element is a rigid set of boxes (the description's collision geometry) with a
nominal pose in ``base_link``. The observed cloud (depth image + intrinsics + camera pose) is
cropped around the element's current pose estimate and registered to the element's faces that
turn towards the camera, by robust (Tukey-weighted) point-to-plane Gauss-Newton, coarse to
fine, starting from the nominal pose (the description is within a few centimetres of the truth;
a global feature match would be ambiguous on these symmetric boxes). Correspondences are exact
closest points on the face rectangles. The crop shrinks with each stage so that neighbouring
elements stop contributing.

Degeneracy (Zhang, Kaess & Singh 2016, "On degeneracy of optimization-based state estimation
problems"): every update is solved only in the observable subspace of the normalised
point-to-plane information matrix; directions whose eigenvalue ratio is below
``min_observability`` are held at the current (initially nominal) estimate. An element may
declare directions that are allowed to be unobservable (:attr:`SceneElement.unobservable_ok`,
e.g. the belt's travel axis, whose ends are out of view); these are held at nominal and
reported. Any other unobservable direction refuses the registration, as do too few points, a
low fitness (inlier fraction) or a high inlier RMSE.

Directions known from physics rather than from the image (:attr:`SceneElement.held`) are not
solved at all: a bin standing on the table has the table's height, roll and pitch, so only x, y
and yaw are registered. At 2-3 m a 128 px depth image puts ~2 cm between points, so a bin's thin
wall tops and the strip of floor behind its front wall carry few points, and its height, roll and
pitch come out of the fit several mm / ~1 deg off; holding them at the nominal (description)
values also removes their coupling into x, y and yaw.

At this range a 128 px depth image places a bin to a few mm and ~0.5 deg (its pixels sample the
walls on a 2 cm grid); the procedure's ``bins`` step (:mod:`r2s2r_calibration.bin_views`) then
refines x, y and yaw from hand-camera views of the rims.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator
from r2s2r_common.config import ConfigModel
from scipy.spatial.transform import Rotation

from r2s2r_calibration.errors import DepthImageError, RegistrationError
from r2s2r_calibration.geometry import FloatArray, invert_pose, make_pose, pose_from_xyz_rpy

FaceName = Literal["+x", "-x", "+y", "-y", "+z", "-z"]
_FACES: tuple[FaceName, ...] = ("+x", "-x", "+y", "-y", "+z", "-z")

PoseAxis = Literal["rx", "ry", "rz", "tx", "ty", "tz"]
"""A pose direction in the element frame: rotation about / translation along x, y or z."""
_AXES: tuple[PoseAxis, ...] = ("rx", "ry", "rz", "tx", "ty", "tz")


class BoxPrimitive(ConfigModel):
    """One box of an element, in the element frame."""

    size_m: tuple[float, float, float] = Field(description="Box extent along x, y, z (m).")
    xyz_m: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="Box centre in the element frame (m)."
    )
    rpy_rad: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="Box orientation in the element frame (rad)."
    )
    hidden_faces: list[FaceName] = Field(
        default_factory=lambda: list[FaceName](["-z"]),
        description="Faces never seen (resting on something); left out of the model cloud.",
    )

    @field_validator("size_m")
    @classmethod
    def _positive(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if min(value) <= 0:
            raise ValueError(f"size_m = {value}; every extent must be > 0 m")
        return value


class SceneElement(ConfigModel):
    """A rigid scene element (table, belt, bin) with its nominal pose in ``base_link``."""

    name: str = Field(description="Element name, e.g. 'table', 'belt', 'bin_0'.")
    boxes: list[BoxPrimitive] = Field(min_length=1, description="Boxes making up the element.")
    xyz_m: tuple[float, float, float] = Field(description="Nominal position in base_link (m).")
    rpy_rad: tuple[float, float, float] = Field(
        (0.0, 0.0, 0.0), description="Nominal orientation in base_link (rad)."
    )
    unobservable_ok: list[PoseAxis] = Field(
        default_factory=list,
        description="Pose directions (element frame; rotations about axes through the observed "
        "points) that may be unobservable from the camera: they are held at the nominal pose "
        "and reported instead of refusing the registration. E.g. ['tx'] for a belt whose ends "
        "(x = travel direction) are out of view.",
    )
    held: list[PoseAxis] = Field(
        default_factory=list,
        description="Pose directions (element frame) known from physics, not registered: they "
        "stay at the nominal pose and are reported as held. E.g. ['rx', 'ry', 'tz'] for a bin "
        "standing on the table (its height, roll and pitch are the table top's), which leaves "
        "x, y and yaw to the registration.",
    )

    on_support: bool = Field(
        False,
        description="The element stands on a plane at z = 0 of its frame (a bin on the table "
        "top). Observed points nearer to that plane than to the element are the support's and "
        "are left out; otherwise the table next to a wall's bottom edge drags the wall "
        "sideways.",
    )

    @field_validator("held")
    @classmethod
    def _not_all_held(cls, value: list[PoseAxis]) -> list[PoseAxis]:
        if len(set(value)) == len(_AXES):
            raise ValueError(
                f"held = {value} holds every pose direction; leave at least one to register"
            )
        return value

    def nominal_pose(self) -> FloatArray:
        """``T_base_element`` at the nominal pose."""
        return pose_from_xyz_rpy(self.xyz_m, self.rpy_rad)


class RegistrationConfig(ConfigModel):
    """Parameters and acceptance thresholds of the scene registration."""

    min_depth_m: float = Field(0.05, ge=0.0, le=100.0, description="Ignore nearer depth (m).")
    max_depth_m: float = Field(5.0, gt=0.0, le=100.0, description="Ignore farther depth (m).")
    voxel_size_m: float = Field(
        0.003, gt=0.0, le=0.1, description="Voxel size of the observed cloud (m)."
    )
    model_spacing_m: float = Field(
        0.003,
        gt=0.0,
        le=0.1,
        description="Spacing of the points sampled on the model (m; element_model_points).",
    )
    icp_distances_m: list[float] = Field(
        default_factory=lambda: [0.04, 0.02, 0.01, 0.005],
        min_length=1,
        description="Correspondence distance (Tukey width) of each coarse-to-fine stage (m).",
    )
    icp_iterations: int = Field(
        40, ge=1, le=1000, description="Gauss-Newton iterations per stage (at most)."
    )
    crop_margin_factor: float = Field(
        1.5, ge=0.5, le=10.0, description="Crop margin around the element = factor x distance."
    )
    inlier_distance_m: float = Field(
        0.005, gt=0.0, le=0.1, description="Point-to-model distance counted as inlier (m)."
    )
    min_points: int = Field(200, ge=10, le=10**7, description="Cropped points required.")
    min_fitness: float = Field(
        0.6, ge=0.0, le=1.0, description="Refuse below this inlier fraction of cropped points."
    )
    max_rmse_m: float = Field(
        0.004, gt=0.0, le=0.1, description="Refuse above this inlier RMSE (m)."
    )
    min_observability: float = Field(
        1e-3,
        ge=0.0,
        le=1.0,
        description="A pose direction whose information is below this fraction of the "
        "strongest one's is unobservable (1 plane alone gives 0): it is held at nominal, and "
        "the registration is refused unless the element allows it (unobservable_ok).",
    )
    axis_alignment: float = Field(
        0.95,
        gt=0.5,
        le=1.0,
        description="An unobservable direction counts as an element axis (for unobservable_ok "
        "and for naming it) when its unit vector has at least this component along the axes.",
    )
    depth_noise_m: float = Field(
        0.001,
        ge=0.0,
        le=0.1,
        description="Standard deviation of a depth reading along its ray (m), for the point "
        "weights (pixel_weighting).",
    )
    pixel_weighting: bool = Field(
        True,
        description="Weight each point by its expected off-surface error: a depth pixel stands "
        "for a footprint of range / f metres across the ray, which lies along the normal of a "
        "surface seen at a grazing angle (sigma^2 = depth_noise^2 + (range / f)^2 / 12 * "
        "(1 - (ray . normal)^2)). Without it, steep side walls (a few mm of scatter per pixel) "
        "pull the pose as hard as surfaces seen face-on. Needs the camera position and focal "
        "length (register_scene_elements passes them).",
    )
    convergence_step: float = Field(
        1e-6,
        gt=0.0,
        le=1e-2,
        description="Stop a stage when an update moves the observed points less than this (m).",
    )


@dataclass
class ElementRegistration:
    """Registered pose of one scene element.

    Attributes:
        name: Element name.
        T_base_element: Registered pose in ``base_link``.
        T_correction: ``T_base_element @ inv(T_base_nominal)`` (base frame correction).
        fitness: Inlier fraction of the cropped observed points.
        inlier_rmse_m: RMS point-to-model distance of the inliers (m).
        observability: Weakest / strongest eigenvalue of the point-to-plane information over
            the solved directions (the held ones excluded).
        n_points: Observed points used.
        held_at_nominal: Directions held at the nominal pose: the known ones
            (:attr:`SceneElement.held`, e.g. ``"rotation about bin_0 x (known)"``) and the
            unobservable ones (allowed by :attr:`SceneElement.unobservable_ok`), e.g.
            ``"translation along belt x"``.

    """

    name: str
    T_base_element: FloatArray
    T_correction: FloatArray
    fitness: float
    inlier_rmse_m: float
    observability: float
    n_points: int
    held_at_nominal: list[str] = field(default_factory=list)


@dataclass
class SceneRegistration:
    """Outcome of registering several elements: the ones that succeeded and the refusals.

    Attributes:
        registered: Registration per element name (in registration order).
        failures: Error message per element name that was refused.

    """

    registered: dict[str, ElementRegistration] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def depth_to_points(
    depth_m: npt.NDArray[np.float32],
    camera_matrix: npt.ArrayLike,
    distortion: npt.ArrayLike | None = None,
    min_depth_m: float = 0.05,
    max_depth_m: float = 5.0,
    stride: int = 1,
) -> FloatArray:
    """Back-project a depth image (32FC1, metres along the optical axis) to 3-D points.

    Args:
        depth_m: (H, W) float32 depth in metres; NaN, inf and 0 mean "no return".
        camera_matrix: 3x3 K of the depth image (px).
        distortion: Optional (k1, k2, p1, p2, k3) of the depth image.
        min_depth_m: Nearer values are dropped.
        max_depth_m: Farther values are dropped.
        stride: Use every ``stride``-th pixel in both directions.

    Returns:
        (N, 3) points in the camera optical frame (m).

    Raises:
        DepthImageError: On a wrong dtype/shape (e.g. 16UC1 millimetres) or no valid depth.

    """
    if not isinstance(depth_m, np.ndarray):
        raise DepthImageError(f"depth is a {type(depth_m).__name__}; expected a numpy array")
    if depth_m.dtype != np.float32:
        hint = (
            " (looks like 16UC1 millimetres: convert with depth.astype(np.float32) / 1000)"
            if depth_m.dtype == np.uint16
            else ""
        )
        raise DepthImageError(
            f"depth has dtype {depth_m.dtype}; expected float32 metres (32FC1){hint}"
        )
    if depth_m.ndim != 2:
        raise DepthImageError(
            f"depth has shape {depth_m.shape}; expected a single-channel (H, W) image"
        )
    K = np.asarray(camera_matrix, dtype=float)
    height, width = depth_m.shape
    if not (0 <= K[0, 2] < width and 0 <= K[1, 2] < height):
        raise DepthImageError(
            f"principal point ({K[0, 2]:.1f}, {K[1, 2]:.1f}) px lies outside the {width}x"
            f"{height} depth image; the intrinsics belong to another image size"
        )
    v, u = np.mgrid[0:height:stride, 0:width:stride]
    z = depth_m[::stride, ::stride].astype(np.float64)
    valid = np.isfinite(z) & (z > min_depth_m) & (z < max_depth_m)
    if not np.any(valid):
        raise DepthImageError(
            f"depth image has no valid values in ({min_depth_m}, {max_depth_m}) m (all NaN, "
            "inf, zero or out of range); check that the depth stream is the head camera's"
        )
    pixels = np.column_stack([u[valid], v[valid]]).astype(np.float64)
    if distortion is not None and np.any(np.asarray(distortion, dtype=float) != 0):
        normalized = cv2.undistortPoints(
            pixels.reshape(-1, 1, 2), K, np.asarray(distortion, dtype=float)
        ).reshape(-1, 2)
    else:
        normalized = np.column_stack(
            [(pixels[:, 0] - K[0, 2]) / K[0, 0], (pixels[:, 1] - K[1, 2]) / K[1, 1]]
        )
    depth = z[valid]
    return np.column_stack([normalized * depth[:, None], depth])


def _face_points(size_m: FloatArray, face: FaceName, spacing_m: float) -> tuple[FloatArray, ...]:
    axis = "xyz".index(face[1])
    sign = 1.0 if face[0] == "+" else -1.0
    others = [index for index in range(3) if index != axis]
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
    for box in element.boxes:
        T_box = pose_from_xyz_rpy(box.xyz_m, box.rpy_rad)
        size = np.asarray(box.size_m, dtype=float)
        for face in _FACES:
            if face in box.hidden_faces:
                continue
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
class _Faces:
    """Rectangular model faces in the element frame (one row per face)."""

    centre: FloatArray  # (F, 3)
    normal: FloatArray  # (F, 3), outward
    axis_a: FloatArray  # (F, 3), in-plane unit axes
    axis_b: FloatArray
    half: FloatArray  # (F, 2), half extents along axis_a, axis_b

    def subset(self, keep: npt.NDArray[np.bool_]) -> _Faces:
        """Return the faces where ``keep`` is true."""
        return _Faces(
            self.centre[keep],
            self.normal[keep],
            self.axis_a[keep],
            self.axis_b[keep],
            self.half[keep],
        )


def _element_faces(element: SceneElement) -> _Faces:
    rows = []
    for box in element.boxes:
        T_box = pose_from_xyz_rpy(box.xyz_m, box.rpy_rad)
        size = np.asarray(box.size_m, dtype=float)
        for face in _FACES:
            if face in box.hidden_faces:
                continue
            axis = "xyz".index(face[1])
            sign = 1.0 if face[0] == "+" else -1.0
            others = [index for index in range(3) if index != axis]
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
    return _Faces(*stacked)


def _facing_faces(faces: _Faces, camera_local: FloatArray | None) -> _Faces:
    """Faces turned towards the camera (back-face culling).

    Culling keeps a thin wall's inner and outer faces from competing for the same points.
    """
    if camera_local is None:
        return faces
    return faces.subset(np.einsum("fi,fi->f", camera_local - faces.centre, faces.normal) > 0)


def _closest_faces(
    points: FloatArray, faces: _Faces
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


def _crop(
    points_base: FloatArray,
    T_base_element: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
    margin_m: float,
) -> FloatArray:
    local = (points_base - T_base_element[:3, 3]) @ T_base_element[:3, :3]
    keep = np.all((local > lower - margin_m) & (local < upper + margin_m), axis=1)
    return np.asarray(local[keep])


def _voxel_down_sample(points: FloatArray, voxel_m: float) -> FloatArray:
    """Mean point per occupied voxel (evens out the density of near and far surfaces)."""
    if len(points) == 0:
        return points
    keys = np.floor(points / voxel_m).astype(np.int64)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    sums = np.zeros((len(counts), 3))
    np.add.at(sums, inverse, points)
    return np.asarray(sums / counts[:, None])


def _jacobian(
    nearest: FloatArray, normal: FloatArray, pivot: FloatArray, length_m: float
) -> FloatArray:
    """d(residual)/d(scaled rotation about ``pivot``, translation) of point-to-plane residuals.

    The model moves by ``q -> q + w x (q - pivot) + t`` with ``w = rotation / length_m``; the
    residual ``n . (p - q)`` then changes by ``-((q - pivot) x n) . w - n . t``.
    """
    return np.hstack([-np.cross(nearest - pivot, normal) / length_m, -normal])


def _normalised_information(jacobian: FloatArray, weights: FloatArray) -> FloatArray:
    return np.asarray((jacobian * weights[:, None]).T @ jacobian / max(float(weights.sum()), 1e-12))


def _degenerate_split(
    information: FloatArray, min_observability: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Eigenvalue ratios, observable eigenvectors and unobservable eigenvectors (columns)."""
    eigenvalues, eigenvectors = np.linalg.eigh(information)
    ratios = np.maximum(eigenvalues, 0.0) / max(float(eigenvalues[-1]), 1e-300)
    weak = ratios < min_observability
    return ratios, eigenvectors[:, ~weak], eigenvectors[:, weak]


def _axis_names(element: str) -> dict[PoseAxis, str]:
    return {
        axis: (
            f"rotation about {element} {axis[1]}"
            if axis[0] == "r"
            else f"translation along {element} {axis[1]}"
        )
        for axis in _AXES
    }


def _describe_directions(basis: FloatArray, element: str, alignment: float) -> list[str]:
    """Human-readable names of the subspace spanned by ``basis`` (6 x k, orthonormal columns).

    Element axes lying in the subspace are named ("translation along belt x"); what is left is
    given as unit vectors over (rx, ry, rz, tx, ty, tz).
    """
    names = _axis_names(element)
    named = [axis for k, axis in enumerate(_AXES) if np.linalg.norm(basis[k]) >= alignment]
    described = [names[axis] for axis in named]
    remaining = basis.shape[1] - len(named)
    if remaining > 0:
        covered = np.zeros((6, len(named)))
        for column, axis in enumerate(named):
            covered[_AXES.index(axis), column] = 1.0
        rest = basis - covered @ (covered.T @ basis)
        left, _, _ = np.linalg.svd(rest, full_matrices=False)
        for k in range(remaining):
            vector = left[:, k] * np.sign(left[np.argmax(np.abs(left[:, k])), k])
            terms = ", ".join(
                f"{value:+.2f} {axis}" for axis, value in zip(_AXES, vector, strict=True)
            )
            described.append(f"direction ({terms}) of {element}")
    return described


def _allowed(basis: FloatArray, allowed: list[PoseAxis], alignment: float) -> bool:
    """Tell whether every direction of ``basis`` (6 x k) lies within the allowed axes."""
    if basis.shape[1] == 0:
        return True
    rows = [_AXES.index(axis) for axis in allowed]
    if not rows:
        return False
    singular = np.linalg.svd(basis[rows], compute_uv=False)
    return bool(len(singular) >= basis.shape[1] and singular[basis.shape[1] - 1] >= alignment)


def _free_basis(held: list[PoseAxis]) -> FloatArray:
    """(6, k) basis of the pose directions that are solved (every axis not in ``held``).

    The held rotations and translations are axis-aligned in the element frame; rotations about
    z through any pivot only move x and y, so with ``rx``, ``ry`` and ``tz`` held the solved
    motions never change height, roll or pitch.
    """
    return np.eye(6)[:, [k for k, axis in enumerate(_AXES) if axis not in held]]


def _model_motion(
    update: FloatArray, pivot: FloatArray, length_m: float
) -> tuple[FloatArray, FloatArray]:
    """Rotation vector and origin translation of the model motion of an update (element frame)."""
    rotation = update[:3] / length_m
    return rotation, update[3:] - np.cross(rotation, pivot)


@dataclass
class _PixelNoise:
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


def _gauss_newton_step(
    local: FloatArray,
    faces: _Faces,
    distance_m: float,
    length_m: float,
    min_observability: float,
    free: FloatArray,
    noise: _PixelNoise | None = None,
    on_support: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """One robust point-to-plane step restricted to the observable subspace.

    Args:
        local: Observed points in the element frame of the current estimate.
        faces: Camera-facing model faces.
        distance_m: Tukey width: points farther from the model get no weight.
        length_m: Rotation scale (m).
        min_observability: Eigenvalue ratio below which a direction is held.
        free: (6, k) orthonormal basis of the solved directions (``_free_basis``); the rest
            is held.
        noise: Pixel noise model for per-point weights (None: equal weights).
        on_support: Leave out points nearer to the support plane z = 0 than to the faces.

    Returns:
        The model motion ``M`` (4x4, element frame; ``T_new = T @ M``) and the largest point
        displacement it causes (m).

    """
    distance, signed, normal, nearest = _closest_faces(local, faces)
    weights = np.where(distance < distance_m, (1.0 - (distance / distance_m) ** 2) ** 2, 0.0)
    if on_support:
        weights[np.abs(local[:, 2]) < distance] = 0.0
    if noise is not None:
        weights = weights * noise.weights(local, normal)
    if np.count_nonzero(weights) < 6:
        return np.eye(4), np.zeros(1)
    pivot = np.average(nearest, axis=0, weights=weights)
    jacobian = _jacobian(nearest, normal, pivot, length_m) @ free
    information = _normalised_information(jacobian, weights)
    gradient = -(jacobian * weights[:, None]).T @ signed / weights.sum()
    ratios, observable, unobservable = _degenerate_split(information, min_observability)
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


def register_element(
    points_base: FloatArray,
    element: SceneElement,
    config: RegistrationConfig | None = None,
    camera_position_base_m: npt.ArrayLike | None = None,
    pixel_angle_rad: float | None = None,
) -> ElementRegistration:
    """Register one element to the observed cloud, starting from its nominal pose.

    Directions that the visible faces do not constrain are held at nominal; they must be among
    :attr:`SceneElement.unobservable_ok`.

    Args:
        points_base: (N, 3) observed points in ``base_link`` (m).
        element: The element with its geometry and nominal pose.
        config: Parameters; defaults to :class:`RegistrationConfig`.
        camera_position_base_m: Depth camera position in ``base_link``; when given, model faces
            turned away from the camera are left out.
        pixel_angle_rad: Angle of one depth pixel (1 / focal length in px); with the camera
            position it weights the points by their expected scatter
            (:attr:`RegistrationConfig.pixel_weighting`).

    Returns:
        The registered pose with fitness, RMSE, observability and the held directions.

    Raises:
        RegistrationError: Too few points near the element, low fitness, high RMSE or a
            direction that is unobservable and not allowed to be.

    """
    cfg = config or RegistrationConfig()
    camera = (
        None
        if camera_position_base_m is None
        else np.asarray(camera_position_base_m, dtype=float).reshape(3)
    )
    all_faces = _element_faces(element)
    free = _free_basis(element.held)
    lower, upper = element_bounds(element)
    T_nominal = element.nominal_pose()
    T_estimate = T_nominal.copy()

    def noise(T: FloatArray) -> _PixelNoise | None:
        if camera is None or pixel_angle_rad is None or not cfg.pixel_weighting:
            return None
        camera_local = (camera - T[:3, 3]) @ T[:3, :3]
        return _PixelNoise(camera_local, float(pixel_angle_rad), cfg.depth_noise_m)

    def facing(T: FloatArray) -> _Faces:
        camera_local = None if camera is None else (camera - T[:3, 3]) @ T[:3, :3]
        return _facing_faces(all_faces, camera_local)

    for distance in cfg.icp_distances_m:
        cropped = _crop(points_base, T_estimate, lower, upper, cfg.crop_margin_factor * distance)
        if len(cropped) < cfg.min_points:
            raise RegistrationError(
                f"{len(cropped)} observed points near '{element.name}' (need {cfg.min_points}); "
                "check that it is in the depth camera's view and the camera pose is calibrated"
            )
        # Back to base_link so that every iteration re-expresses them in the new estimate.
        sample = _voxel_down_sample(cropped, max(cfg.voxel_size_m, 0.25 * distance))
        sample_base = sample @ T_estimate[:3, :3].T + T_estimate[:3, 3]
        length = max(float(np.sqrt(np.mean(np.sum((sample - sample.mean(0)) ** 2, 1)))), 1e-3)
        for _ in range(cfg.icp_iterations):
            local = (sample_base - T_estimate[:3, 3]) @ T_estimate[:3, :3]
            step, moved = _gauss_newton_step(
                local,
                facing(T_estimate),
                distance,
                length,
                cfg.min_observability,
                free,
                noise(T_estimate),
                element.on_support,
            )
            T_estimate = T_estimate @ step
            if float(np.max(moved)) < cfg.convergence_step:
                break
    local = _crop(points_base, T_estimate, lower, upper, 2.0 * cfg.inlier_distance_m)
    if len(local) < cfg.min_points:
        raise RegistrationError(
            f"{len(local)} observed points on '{element.name}' after registration (need "
            f"{cfg.min_points}); the element may be occluded or far from its nominal pose"
        )
    distances, _, normals, nearest = _closest_faces(local, facing(T_estimate))
    if element.on_support:
        on_element = np.abs(local[:, 2]) >= distances
        local, distances = local[on_element], distances[on_element]
        normals, nearest = normals[on_element], nearest[on_element]
    inliers = distances < cfg.inlier_distance_m
    fitness = float(np.mean(inliers))
    rmse = float(np.sqrt(np.mean(distances[inliers] ** 2))) if np.any(inliers) else float("inf")
    if fitness < cfg.min_fitness:
        raise RegistrationError(
            f"'{element.name}' registered with fitness {fitness:.2f} < min_fitness = "
            f"{cfg.min_fitness}; the observed shape does not match the description (wrong "
            "element geometry, occlusion, or nominal pose off by more than "
            f"{cfg.icp_distances_m[0]} m)"
        )
    if rmse > cfg.max_rmse_m:
        raise RegistrationError(
            f"'{element.name}' inlier RMSE {rmse * 1000:.2f} mm exceeds max_rmse_m = "
            f"{cfg.max_rmse_m}; the depth is noisy or the geometry differs"
        )
    if np.count_nonzero(inliers) < 6:
        raise RegistrationError(
            f"'{element.name}' has {np.count_nonzero(inliers)} inlier points; 6 are needed to "
            "constrain a pose"
        )
    pivot = nearest[inliers].mean(axis=0)
    length = max(float(np.sqrt(np.mean(np.sum((local[inliers] - pivot) ** 2, 1)))), 1e-3)
    information = _normalised_information(
        _jacobian(nearest[inliers], normals[inliers], pivot, length) @ free,
        np.ones(int(inliers.sum())),
    )
    ratios, _, unobservable = _degenerate_split(information, cfg.min_observability)
    unobservable = free @ unobservable
    solved = ratios[ratios >= cfg.min_observability]
    observability = float(solved.min()) if solved.size else 0.0
    names = _axis_names(element.name)
    held = [f"{names[axis]} (known)" for axis in _AXES if axis in element.held]
    held += _describe_directions(unobservable, element.name, cfg.axis_alignment)
    if not _allowed(unobservable, element.unobservable_ok, cfg.axis_alignment):
        allowed = ", ".join(element.unobservable_ok) or "none"
        raise RegistrationError(
            f"'{element.name}' pose is not constrained in every direction (observability "
            f"{float(ratios.min()):.2e} < {cfg.min_observability}); unobservable: "
            f"{'; '.join(held)} (allowed: {allowed}); only a plane is visible or the view "
            "misses its edges: bring its edges or sides into the depth camera's view"
        )
    return ElementRegistration(
        name=element.name,
        T_base_element=T_estimate,
        T_correction=T_estimate @ invert_pose(T_nominal),
        fitness=fitness,
        inlier_rmse_m=rmse,
        observability=observability,
        n_points=len(local),
        held_at_nominal=held,
    )


def register_scene_elements(
    depth_m: npt.NDArray[np.float32],
    camera_matrix: npt.ArrayLike,
    T_base_camera: FloatArray,
    elements: list[SceneElement],
    config: RegistrationConfig | None = None,
    distortion: npt.ArrayLike | None = None,
) -> SceneRegistration:
    """Register every element from one depth image; collect the refusals instead of stopping.

    Elements are registered in the given order (list large supporting elements such as the
    table first); the points explained by each registered element are removed before the next.

    Args:
        depth_m: (H, W) float32 depth (m, 32FC1).
        camera_matrix: 3x3 K of the depth image (px).
        T_base_camera: Depth camera optical frame in ``base_link`` (from extrinsics).
        elements: Elements to register.
        config: Parameters; defaults to :class:`RegistrationConfig`.
        distortion: Optional distortion of the depth image.

    Returns:
        The registered elements and the error message of each refused one.

    Raises:
        DepthImageError: Bad depth image (nothing can be registered).

    """
    cfg = config or RegistrationConfig()
    points_camera = depth_to_points(
        depth_m, camera_matrix, distortion, cfg.min_depth_m, cfg.max_depth_m
    )
    K = np.asarray(camera_matrix, dtype=float)
    pixel_angle = 2.0 / float(K[0, 0] + K[1, 1])
    T = np.asarray(T_base_camera, dtype=float)
    points_base = points_camera @ T[:3, :3].T + T[:3, 3]
    outcome = SceneRegistration()
    for element in elements:
        try:
            registration = register_element(points_base, element, cfg, T[:3, 3], pixel_angle)
        except RegistrationError as error:
            outcome.failures[element.name] = str(error)
            continue
        outcome.registered[element.name] = registration
        # Explain away: points on this element do not take part in the later registrations.
        pose = registration.T_base_element
        local = (points_base - pose[:3, 3]) @ pose[:3, :3]
        distances, *_ = _closest_faces(local, _element_faces(element))
        points_base = points_base[distances > cfg.inlier_distance_m]
    return outcome


def register_scene(
    depth_m: npt.NDArray[np.float32],
    camera_matrix: npt.ArrayLike,
    T_base_camera: FloatArray,
    elements: list[SceneElement],
    config: RegistrationConfig | None = None,
    distortion: npt.ArrayLike | None = None,
) -> dict[str, ElementRegistration]:
    """Register every element from one depth image; refuse if any element fails.

    Same as :func:`register_scene_elements`, for callers that need every element.

    Returns:
        Registration per element name.

    Raises:
        DepthImageError: Bad depth image.
        RegistrationError: One or more elements failed; the message names each with its reason
            (see :func:`register_element`).

    """
    outcome = register_scene_elements(
        depth_m, camera_matrix, T_base_camera, elements, config, distortion
    )
    if outcome.failures:
        reasons = "; ".join(f"{name}: {message}" for name, message in outcome.failures.items())
        raise RegistrationError(
            f"scene registration refused {len(outcome.failures)} of {len(elements)} elements "
            f"({', '.join(outcome.failures)}): {reasons}"
        )
    return outcome.registered
