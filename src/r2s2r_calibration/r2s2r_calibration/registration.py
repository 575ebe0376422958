"""Scene registration: poses of the table, belt and bins from a depth image (Open3D ICP).

Each scene element is a rigid set of boxes (the description's collision geometry) with a
nominal pose in ``base_link``. The observed cloud (depth image + intrinsics + camera pose) is
cropped around the element's current pose estimate and registered to points sampled on the
element's visible faces with point-to-plane ICP, coarse to fine, starting from the nominal pose
(the description is within a few centimetres of the truth; a global feature match would be
ambiguous on these symmetric boxes). The crop shrinks with each stage so that neighbouring
elements stop contributing. The result is refused when too few points fall on the element,
when the fitness (inlier fraction) is low or the inlier RMSE is high, or when the visible
surfaces do not constrain every degree of freedom (e.g. only one plane visible).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt
import open3d as o3d
from pydantic import Field, field_validator
from r2s2r_common.config import ConfigModel
from scipy.spatial import cKDTree

from r2s2r_calibration.errors import DepthImageError, RegistrationError
from r2s2r_calibration.geometry import FloatArray, invert_pose, pose_from_xyz_rpy

FaceName = Literal["+x", "-x", "+y", "-y", "+z", "-z"]
_FACES: tuple[FaceName, ...] = ("+x", "-x", "+y", "-y", "+z", "-z")


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
        0.003, gt=0.0, le=0.1, description="Spacing of the points sampled on the model (m)."
    )
    icp_distances_m: list[float] = Field(
        default_factory=lambda: [0.04, 0.02, 0.01, 0.005],
        min_length=1,
        description="Max correspondence distance of each coarse-to-fine ICP stage (m).",
    )
    icp_iterations: int = Field(40, ge=1, le=1000, description="ICP iterations per stage.")
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
        description="Refuse when the weakest pose direction holds less than this fraction of "
        "the strongest one's information (1 plane alone gives 0).",
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
        observability: Weakest / strongest eigenvalue of the point-to-plane information.
        n_points: Observed points used.

    """

    name: str
    T_base_element: FloatArray
    T_correction: FloatArray
    fitness: float
    inlier_rmse_m: float
    observability: float
    n_points: int


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


def _element_bounds(element: SceneElement) -> tuple[FloatArray, FloatArray]:
    corners = []
    for box in element.boxes:
        T_box = pose_from_xyz_rpy(box.xyz_m, box.rpy_rad)
        half = 0.5 * np.asarray(box.size_m)
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        corners.append((signs * half) @ T_box[:3, :3].T + T_box[:3, 3])
    stacked = np.vstack(corners)
    return stacked.min(axis=0), stacked.max(axis=0)


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


def _observability(points: FloatArray, normals: FloatArray, length_m: float) -> float:
    centred = points - points.mean(axis=0)
    jacobian = np.hstack([np.cross(centred, normals) / length_m, normals])
    eigenvalues = np.linalg.eigvalsh(jacobian.T @ jacobian / len(points))
    return float(max(eigenvalues[0], 0.0) / max(eigenvalues[-1], 1e-12))


def _facing_target(
    model_points: FloatArray,
    model_normals: FloatArray,
    T_base_element: FloatArray,
    camera_position_base_m: FloatArray | None,
) -> o3d.geometry.PointCloud:
    """Model cloud, without the faces turned away from the camera (back-face culling).

    Culling keeps a thin wall's inner and outer faces from competing for the same points.
    """
    keep = np.ones(len(model_points), dtype=bool)
    if camera_position_base_m is not None:
        camera_local = (camera_position_base_m - T_base_element[:3, 3]) @ T_base_element[:3, :3]
        keep = np.einsum("ij,ij->i", camera_local - model_points, model_normals) > 0
    target = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(model_points[keep]))
    target.normals = o3d.utility.Vector3dVector(model_normals[keep])
    return target


def register_element(
    points_base: FloatArray,
    element: SceneElement,
    config: RegistrationConfig | None = None,
    camera_position_base_m: npt.ArrayLike | None = None,
) -> ElementRegistration:
    """Register one element to the observed cloud, starting from its nominal pose.

    Args:
        points_base: (N, 3) observed points in ``base_link`` (m).
        element: The element with its geometry and nominal pose.
        config: Parameters; defaults to :class:`RegistrationConfig`.
        camera_position_base_m: Depth camera position in ``base_link``; when given, model faces
            turned away from the camera are left out.

    Returns:
        The registered pose with fitness, RMSE and observability.

    Raises:
        RegistrationError: Too few points near the element, low fitness, high RMSE or an
            unobservable pose.

    """
    cfg = config or RegistrationConfig()
    model_points, model_normals = element_model_points(element, cfg.model_spacing_m)
    camera = (
        None
        if camera_position_base_m is None
        else np.asarray(camera_position_base_m, dtype=float).reshape(3)
    )
    lower, upper = _element_bounds(element)
    T_nominal = element.nominal_pose()
    T_estimate = T_nominal.copy()
    criteria = o3d.pipelines.registration.ICPConvergenceCriteria(
        relative_fitness=1e-7, relative_rmse=1e-7, max_iteration=cfg.icp_iterations
    )
    for distance in cfg.icp_distances_m:
        local = _crop(points_base, T_estimate, lower, upper, cfg.crop_margin_factor * distance)
        if len(local) < cfg.min_points:
            raise RegistrationError(
                f"{len(local)} observed points near '{element.name}' (need {cfg.min_points}); "
                "check that it is in the depth camera's view and the camera pose is calibrated"
            )
        target = _facing_target(model_points, model_normals, T_estimate, camera)
        source = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(local))
        source = source.voxel_down_sample(max(cfg.voxel_size_m, 0.25 * distance))
        # Tukey kernel: points of neighbouring surfaces inside the crop get zero weight.
        estimation = o3d.pipelines.registration.TransformationEstimationPointToPlane(
            o3d.pipelines.registration.TukeyLoss(k=0.5 * distance)
        )
        result = o3d.pipelines.registration.registration_icp(
            source, target, distance, np.eye(4), estimation, criteria
        )
        # The ICP maps element-local observations onto the model: T_true = T_est @ inv(M).
        T_estimate = T_estimate @ invert_pose(np.asarray(result.transformation))
    local = _crop(points_base, T_estimate, lower, upper, 2.0 * cfg.inlier_distance_m)
    if len(local) < cfg.min_points:
        raise RegistrationError(
            f"{len(local)} observed points on '{element.name}' after registration (need "
            f"{cfg.min_points}); the element may be occluded or far from its nominal pose"
        )
    target = _facing_target(model_points, model_normals, T_estimate, camera)
    visible_points = np.asarray(target.points)
    visible_normals = np.asarray(target.normals)
    distances, nearest = cKDTree(visible_points).query(local)
    inliers = distances < cfg.inlier_distance_m
    fitness = float(np.mean(inliers))
    rmse = float(np.sqrt(np.mean(distances[inliers] ** 2))) if np.any(inliers) else float("inf")
    length = float(np.linalg.norm(upper - lower))
    observability = (
        _observability(local[inliers], visible_normals[nearest[inliers]], length)
        if np.count_nonzero(inliers) >= 6
        else 0.0
    )
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
    if observability < cfg.min_observability:
        raise RegistrationError(
            f"'{element.name}' pose is not constrained in every direction (observability "
            f"{observability:.2e} < {cfg.min_observability}); only a plane is visible: bring "
            "its edges or sides into the depth camera's view"
        )
    return ElementRegistration(
        name=element.name,
        T_base_element=T_estimate,
        T_correction=T_estimate @ invert_pose(T_nominal),
        fitness=fitness,
        inlier_rmse_m=rmse,
        observability=observability,
        n_points=len(local),
    )


def register_scene(
    depth_m: npt.NDArray[np.float32],
    camera_matrix: npt.ArrayLike,
    T_base_camera: FloatArray,
    elements: list[SceneElement],
    config: RegistrationConfig | None = None,
    distortion: npt.ArrayLike | None = None,
) -> dict[str, ElementRegistration]:
    """Register every element from one depth image of the head camera.

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
        Registration per element name.

    Raises:
        DepthImageError: Bad depth image.
        RegistrationError: An element failed (see :func:`register_element`).

    """
    cfg = config or RegistrationConfig()
    points_camera = depth_to_points(
        depth_m, camera_matrix, distortion, cfg.min_depth_m, cfg.max_depth_m
    )
    T = np.asarray(T_base_camera, dtype=float)
    points_base = points_camera @ T[:3, :3].T + T[:3, 3]
    results: dict[str, ElementRegistration] = {}
    for element in elements:
        registration = register_element(points_base, element, cfg, T[:3, 3])
        results[element.name] = registration
        # Explain away: points on this element do not take part in the later registrations.
        model_points, _ = element_model_points(element, cfg.model_spacing_m)
        pose = registration.T_base_element
        distances, _ = cKDTree(model_points @ pose[:3, :3].T + pose[:3, 3]).query(points_base)
        points_base = points_base[distances > cfg.inlier_distance_m]
    return results
