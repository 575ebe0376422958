"""Find catalogue objects on the belt in one RGB + registered depth frame and measure their pose.

Pipeline per frame:

1. Back-project every depth pixel with the camera model and express it in the belt frame the
   transform tree gives (``T_base_camera``, ``T_base_belt``).
2. Fit the belt plane robustly to points near the nominal belt surface, so heights are measured
   from the belt as the camera sees it (absorbs small camera tilt and belt height errors).
3. Points inside the belt footprint and above the plane form object candidates; connected
   components of them in the image are the object hypotheses.
4. Each component is classified by its hue (robust to brightness) and its top height against the
   catalogue; components that fit no type are rejected (robot links, hands, clutter).
5. The centre follows from the known size: boxes and cylinders from the top face (centroid of the
   points on it, height from the plane + half the height), spheres from a least-squares fit of a
   sphere of known radius; box yaw from the minimum-area rectangle of the top face.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np
from numpy.typing import NDArray
from r2s2r_common.camera_model import CameraModel
from r2s2r_description.transforms import invert_transform, make_transform, rot_z, wrap_angle

from r2s2r_belt.tracking.catalogue import Catalogue, ObjectModel
from r2s2r_belt.tracking.config import DetectionConfig
from r2s2r_belt.tracking.geometry import FloatArray

MIN_PLANE_POINTS = 50
"""Fewer belt points than this: no plane, no detections in that frame."""


class FrameError(ValueError):
    """An RGB/depth pair that does not fit the camera model (shape, dtype)."""


@dataclass(frozen=True)
class SceneGeometry:
    """What the tracker knows about the cell geometry (from camera_info and ``/tf_static``).

    Attributes:
        camera: Intrinsics and distortion of the head camera.
        base_from_camera: ``T_base_camera`` (4x4), optical frame in the base frame.
        base_from_belt: ``T_base_belt`` (4x4), belt frame (x = travel, z up) in the base frame.

    """

    camera: CameraModel
    base_from_camera: FloatArray
    base_from_belt: FloatArray


@dataclass(frozen=True)
class Detection:
    """One object found in one frame.

    Attributes:
        type_name: Catalogue type.
        position_m: (3,) centre in the base frame.
        yaw_rad: Rotation about the belt normal of the object's x axis relative to the belt
            plane frame's x (belt travel), wrapped to the type's symmetry; 0 for round shapes.
        rotation: 3x3 orientation in the base frame (belt normal, yaw).
        type_cost: Squared normalised hue + height residual of the chosen type.
        type_costs: That cost for every catalogue type.
        on_belt: Top height matches the type (resting on the belt).
        pixel_count: Pixels of the component.
        centroid_px: (u, v) mean pixel of the component.

    """

    type_name: str
    position_m: FloatArray
    yaw_rad: float
    rotation: FloatArray
    type_cost: float
    type_costs: dict[str, float]
    on_belt: bool
    pixel_count: int
    centroid_px: tuple[float, float]


@dataclass
class FrameResult:
    """Detections of one frame plus what was learned on the way.

    Attributes:
        detections: Accepted detections.
        rejected: Components that fit no catalogue type (count).
        plane_ok: Whether the belt plane could be fitted.
        base_from_plane: ``T_base_plane`` of the fitted belt plane (x along travel, z normal).
        plane_rms_m: RMS residual of the plane fit.

    """

    detections: list[Detection] = field(default_factory=list)
    rejected: int = 0
    plane_ok: bool = False
    base_from_plane: FloatArray | None = None
    plane_rms_m: float = float("nan")


def _circular_mean_deg(angles_deg: FloatArray) -> float:
    radians = np.deg2rad(angles_deg)
    return float(np.rad2deg(math.atan2(np.mean(np.sin(radians)), np.mean(np.cos(radians)))) % 360)


def _hue_difference_deg(a_deg: float, b_deg: float) -> float:
    return abs((a_deg - b_deg + 180.0) % 360.0 - 180.0)


def _fit_sphere_centre(
    points: FloatArray, radius_m: float, start: FloatArray, fixed_height_m: float | None
) -> FloatArray:
    """Least-squares centre of a sphere of known radius through ``points`` (Gauss-Newton)."""
    centre = start.astype(float).copy()
    if fixed_height_m is not None:
        centre[2] = fixed_height_m
    free = [0, 1] if fixed_height_m is not None else [0, 1, 2]
    for _ in range(15):
        offsets = points - centre
        distances = np.linalg.norm(offsets, axis=1)
        distances = np.maximum(distances, 1e-9)
        residuals = distances - radius_m
        jacobian = -(offsets / distances[:, None])[:, free]
        step, *_ = np.linalg.lstsq(jacobian, -residuals, rcond=None)
        centre[free] += step
        if float(np.linalg.norm(step)) < 1e-6:
            break
    return centre


def height_plane(points: FloatArray) -> FloatArray:
    """Least-squares ``(a, b, c)`` of ``z = a x + b y + c`` through ``points`` (N x 3).

    The normal equations on centred coordinates (a 2 x 2 solve: a frame's plane fit is run
    three times on thousands of points); points that span no plane (all on one line) fall back
    to the minimum-norm solution of ``numpy.linalg.lstsq``.
    """
    centroid = points.mean(axis=0)
    centred = points - centroid
    xy = centred[:, :2]
    normal = xy.T @ xy
    determinant = normal[0, 0] * normal[1, 1] - normal[0, 1] * normal[1, 0]
    if not determinant > 1e-12 * normal[0, 0] * normal[1, 1]:
        design = np.column_stack([points[:, 0], points[:, 1], np.ones(len(points))])
        return np.asarray(np.linalg.lstsq(design, points[:, 2], rcond=None)[0], dtype=np.float64)
    a, b = np.linalg.solve(normal, xy.T @ centred[:, 2])
    return np.array([a, b, centroid[2] - a * centroid[0] - b * centroid[1]], dtype=np.float64)


def rotation_between(from_unit: FloatArray, to_unit: FloatArray) -> FloatArray:
    """Smallest rotation taking unit vector ``from_unit`` onto ``to_unit``."""
    axis = np.cross(from_unit, to_unit)
    sine = float(np.linalg.norm(axis))
    cosine = float(np.dot(from_unit, to_unit))
    if sine < 1e-12:
        if cosine > 0.0:
            return np.eye(3)
        raise ValueError("rotation_between: opposite vectors (a plane seen from below)")
    axis /= sine
    angle = math.atan2(sine, cosine)
    skew = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + math.sin(angle) * skew + (1.0 - math.cos(angle)) * (skew @ skew)


def plane_alignment(
    base_from_fitted: FloatArray, base_from_belt: FloatArray, base_from_camera: FloatArray
) -> FloatArray:
    """Correction (4x4, base to base) that puts the fitted belt plane onto the belt frame's plane.

    The measured belt plane differs from the one ``/tf_static`` states when the camera's
    extrinsics or intrinsics are off (a tilt of the camera tilts the plane it sees). Rotating the
    measurements about the camera centre so that the fitted normal becomes the belt normal, then
    shifting along it to the belt height, removes the two tilt and the height components of that
    error; errors in yaw and along the plane remain (they need world grounding).
    """
    fitted_normal = base_from_fitted[:3, 2]
    belt_normal = base_from_belt[:3, 2]
    rotation = rotation_between(fitted_normal, belt_normal)
    centre = base_from_camera[:3, 3]
    moved_origin = rotation @ (base_from_fitted[:3, 3] - centre) + centre
    shift = float(belt_normal @ (base_from_belt[:3, 3] - moved_origin))
    correction = np.eye(4)
    correction[:3, :3] = rotation
    correction[:3, 3] = centre - rotation @ centre + shift * belt_normal
    return correction


class ObjectDetector:
    """Detect and measure catalogue objects on the belt (see the module docstring).

    Args:
        config: Detection parameters.
        catalogue: The object types to look for.

    """

    def __init__(self, config: DetectionConfig, catalogue: Catalogue) -> None:
        self.config = config
        self.catalogue = catalogue
        self._rays_key: tuple[float, ...] | None = None
        self._rays: FloatArray | None = None

    def _pixel_rays(self, camera: CameraModel) -> FloatArray:
        key = camera.key()
        if self._rays is None or key != self._rays_key:
            self._rays = camera.pixel_rays()
            self._rays_key = key
        return self._rays

    def _check_frame(
        self, rgb: NDArray[np.uint8], depth_m: NDArray[np.float32], camera: CameraModel
    ) -> None:
        size = (camera.height_px, camera.width_px)
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise FrameError(f"rgb: dtype {rgb.dtype}, shape {rgb.shape}: expected uint8 HxWx3")
        if depth_m.ndim != 2:
            raise FrameError(f"depth: shape {depth_m.shape}: expected HxW (metres)")
        if rgb.shape[:2] != size or depth_m.shape != size:
            raise FrameError(
                f"rgb {rgb.shape[:2]} / depth {depth_m.shape}: expected the camera_info size "
                f"{size} (height, width)"
            )

    def _fit_plane(
        self, points_belt: FloatArray, valid: NDArray[np.bool_]
    ) -> tuple[FloatArray, float] | None:
        """Fit ``z = a x + b y + c`` to belt points; return ``T_belt_plane`` and the RMS."""
        config = self.config
        x, y, z = points_belt[..., 0], points_belt[..., 1], points_belt[..., 2]
        seed = (
            valid
            & (np.abs(x) < config.belt_length_m / 2.0 - config.belt_margin_m)
            & (np.abs(y) < config.belt_width_m / 2.0 - config.belt_margin_m)
            & (np.abs(z) < config.plane_band_m)
        )
        pts = points_belt[seed]
        if len(pts) < MIN_PLANE_POINTS:
            return None
        inliers = np.abs(pts[:, 2] - np.median(pts[:, 2])) < 2.0 * config.plane_inlier_m
        coeffs = np.zeros(3)
        for _ in range(3):
            chosen = pts[inliers]
            if len(chosen) < MIN_PLANE_POINTS:
                return None
            coeffs = height_plane(chosen)
            predicted = pts[:, 0] * coeffs[0] + pts[:, 1] * coeffs[1] + coeffs[2]
            inliers = np.abs(pts[:, 2] - predicted) < config.plane_inlier_m
        a, b, c = (float(v) for v in coeffs)
        normal = np.array([-a, -b, 1.0]) / math.sqrt(a * a + b * b + 1.0)
        x_axis = np.array([1.0, 0.0, a])
        x_axis -= normal * float(normal @ x_axis)
        x_axis /= np.linalg.norm(x_axis)
        y_axis = np.cross(normal, x_axis)
        rotation = np.column_stack([x_axis, y_axis, normal])
        chosen = pts[inliers]
        residuals = chosen[:, 2] - (chosen[:, 0] * a + chosen[:, 1] * b + c)
        rms = float(np.sqrt(np.mean(residuals**2))) if len(residuals) else float("nan")
        return make_transform((0.0, 0.0, c), rotation), rms

    def _classify(
        self, hue_deg: float | None, top_height_m: float
    ) -> tuple[ObjectModel | None, float, dict[str, float]]:
        config = self.config
        costs: dict[str, float] = {}
        for model in self.catalogue.models:
            if hue_deg is None:
                costs[model.name] = math.inf
                continue
            hue_term = (_hue_difference_deg(hue_deg, model.hue_deg) / config.hue_sigma_deg) ** 2
            height_term = ((top_height_m - model.height_m) / config.height_sigma_m) ** 2
            costs[model.name] = hue_term + height_term
        best = min(costs, key=lambda name: costs[name])
        if costs[best] > config.max_type_cost:
            return None, costs[best], costs
        return self.catalogue[best], costs[best], costs

    def _measure(
        self, model: ObjectModel, points: FloatArray, top_height_m: float
    ) -> tuple[FloatArray, float, bool] | None:
        """Centre (plane frame), yaw and whether it rests on the belt, from its points."""
        config = self.config
        height = model.height_m
        on_belt = abs(top_height_m - height) <= config.on_belt_tolerance_m
        if model.shape == "sphere":
            radius = model.size_m[0] / 2.0
            start = points.mean(axis=0)
            start[2] = top_height_m - radius
            centre = _fit_sphere_centre(points, radius, start, radius if on_belt else None)
            return centre, 0.0, on_belt
        top = points[points[:, 2] >= top_height_m - config.top_band_m]
        if len(top) < 3:
            return None
        centre = np.array(
            [
                float(np.mean(top[:, 0])),
                float(np.mean(top[:, 1])),
                height / 2.0 if on_belt else top_height_m - height / 2.0,
            ]
        )
        yaw = 0.0
        if model.shape == "box":
            rect_points = (top[:, :2] * 1000.0).astype(np.float32)  # mm: minAreaRect rounds
            (_, _), (side_a, side_b), angle_deg = cv2.minAreaRect(rect_points)
            side_a_angle = math.radians(angle_deg)
            long_axis = side_a_angle if side_a >= side_b else side_a_angle + math.pi / 2.0
            sx, sy = model.size_m[0], model.size_m[1]
            yaw = long_axis if sx >= sy else long_axis - math.pi / 2.0
            yaw = wrap_angle(yaw, model.yaw_period_rad)
        return centre, yaw, on_belt

    def detect(
        self, rgb: NDArray[np.uint8], depth_m: NDArray[np.float32], geometry: SceneGeometry
    ) -> FrameResult:
        """Detect the catalogue objects on the belt in one frame.

        Args:
            rgb: H x W x 3 uint8 RGB image.
            depth_m: H x W float32 depth along the optical axis, metres, registered to ``rgb``
                (0, NaN or inf: no reading).
            geometry: Camera model and frames.

        Returns:
            The detections (positions in the base frame) and the fitted belt plane.

        Raises:
            FrameError: If the images do not match the camera model.

        """
        config = self.config
        camera = geometry.camera
        self._check_frame(rgb, depth_m, camera)
        rays = self._pixel_rays(camera)
        depth = depth_m.astype(np.float64)
        valid = np.isfinite(depth) & (depth > 0.0)
        depth = np.where(valid, depth, 0.0)
        points_cam = np.stack([rays[..., 0] * depth, rays[..., 1] * depth, depth], axis=-1)
        belt_from_camera = invert_transform(geometry.base_from_belt) @ geometry.base_from_camera
        points_belt = points_cam @ belt_from_camera[:3, :3].T + belt_from_camera[:3, 3]
        result = FrameResult()
        plane = self._fit_plane(points_belt, valid)
        if plane is None:
            return result
        belt_from_plane, result.plane_rms_m = plane
        result.plane_ok = True
        base_from_plane = geometry.base_from_belt @ belt_from_plane
        if config.anchor_to_belt_plane:
            base_from_plane = (
                plane_alignment(base_from_plane, geometry.base_from_belt, geometry.base_from_camera)
                @ base_from_plane
            )
        result.base_from_plane = base_from_plane
        plane_from_belt = invert_transform(belt_from_plane)
        points = points_belt @ plane_from_belt[:3, :3].T + plane_from_belt[:3, 3]
        heights = points[..., 2]
        candidates = (
            valid
            & (np.abs(points[..., 0]) < config.belt_length_m / 2.0)
            & (np.abs(points[..., 1]) < config.belt_width_m / 2.0)
            & (heights > config.min_height_m)
            & (heights < config.max_height_m)
        )
        if not np.any(candidates):
            return result
        count, labels, stats, _ = cv2.connectedComponentsWithStats(
            candidates.astype(np.uint8), connectivity=8
        )
        hsv = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV_FULL)  # hue 0..255 for the full circle
        for label in range(1, count):
            if stats[label, cv2.CC_STAT_AREA] < config.min_pixels:
                continue
            mask = labels == label
            component = points[mask]
            top_height = float(np.percentile(component[:, 2], 95))
            pixels_hsv = hsv[mask]
            saturated = pixels_hsv[:, 1] >= config.min_saturation
            hue = (
                _circular_mean_deg(pixels_hsv[saturated, 0].astype(float) * (360.0 / 256.0))
                if np.any(saturated)
                else None
            )
            model, cost, costs = self._classify(hue, top_height)
            if model is None:
                result.rejected += 1
                continue
            measured = self._measure(model, component, top_height)
            if measured is None:
                result.rejected += 1
                continue
            centre_plane, yaw, on_belt = measured
            position = base_from_plane[:3, :3] @ centre_plane + base_from_plane[:3, 3]
            rotation = base_from_plane[:3, :3] @ rot_z(yaw)
            vs, us = np.nonzero(mask)
            result.detections.append(
                Detection(
                    type_name=model.name,
                    position_m=position,
                    yaw_rad=yaw,
                    rotation=rotation,
                    type_cost=cost,
                    type_costs=costs,
                    on_belt=on_belt,
                    pixel_count=int(stats[label, cv2.CC_STAT_AREA]),
                    centroid_px=(float(us.mean()), float(vs.mean())),
                )
            )
        return result
