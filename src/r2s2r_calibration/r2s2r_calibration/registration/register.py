"""Registering scene elements to a depth image: crops, coarse-to-fine stages, acceptance.

Each element is registered from its nominal pose, the crop shrinking with each stage so that
neighbouring elements stop contributing; too few points, a low fitness, a high inlier RMSE or
a direction unobservable without the element's allowance refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.transforms import invert_transform

from r2s2r_calibration.errors import RegistrationError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.registration.depth import depth_to_points
from r2s2r_calibration.registration.elements import AXES, SceneElement
from r2s2r_calibration.registration.faces import (
    Faces,
    closest_faces,
    element_bounds,
    element_faces,
    facing_faces,
)
from r2s2r_calibration.registration.observability import (
    axis_names,
    degenerate_split,
    describe_directions,
    directions_allowed,
    free_basis,
    normalised_information,
    point_to_plane_jacobian,
)
from r2s2r_calibration.registration.point_to_plane import PixelNoise, gauss_newton_step


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
    all_faces = element_faces(element)
    free = free_basis(element.held)
    lower, upper = element_bounds(element)
    T_nominal = element.nominal_pose()
    T_estimate = T_nominal.copy()

    def noise(T: FloatArray) -> PixelNoise | None:
        if camera is None or pixel_angle_rad is None or not cfg.pixel_weighting:
            return None
        camera_local = (camera - T[:3, 3]) @ T[:3, :3]
        return PixelNoise(camera_local, float(pixel_angle_rad), cfg.depth_noise_m)

    def facing(T: FloatArray) -> Faces:
        camera_local = None if camera is None else (camera - T[:3, 3]) @ T[:3, :3]
        return facing_faces(all_faces, camera_local)

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
            step, moved = gauss_newton_step(
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
    distances, _, normals, nearest = closest_faces(local, facing(T_estimate))
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
    information = normalised_information(
        point_to_plane_jacobian(nearest[inliers], normals[inliers], pivot, length) @ free,
        np.ones(int(inliers.sum())),
    )
    ratios, _, unobservable = degenerate_split(information, cfg.min_observability)
    unobservable = free @ unobservable
    solved = ratios[ratios >= cfg.min_observability]
    observability = float(solved.min()) if solved.size else 0.0
    names = axis_names(element.name)
    held = [f"{names[axis]} (known)" for axis in AXES if axis in element.held]
    held += describe_directions(unobservable, element.name, cfg.axis_alignment)
    if not directions_allowed(unobservable, element.unobservable_ok, cfg.axis_alignment):
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
        T_correction=T_estimate @ invert_transform(T_nominal),
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
        distances, *_ = closest_faces(local, element_faces(element))
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
