"""Bin poses from hand-camera views of their rims (x, y and yaw to a millimetre / 0.1 deg).

The head depth camera sees each bin from 2-3 m through ~150 depth pixels: enough to find it
within a few mm and ~0.5 deg, which is what the registration step gives. The robot can do better
by looking: it moves the hand camera ``camera_height_m`` above each bin, looking straight down,
once per entry of ``rolls_rad`` (two opposite camera rolls by default, so that a hand-eye
translation error shifts the two views in opposite directions and cancels in the fit). From
above, the outer edge of a bin's rim is a sharp boundary between the bin's colour and the table's;
:func:`rim_edge_points` finds it to a fraction of a pixel along profiles across the predicted
edges, and :func:`fit_bin_pose` intersects the edge rays with the rim's plane and fits x, y and
yaw so that the points lie on the rim's outer rectangle. Height, roll and pitch stay as the
registration left them (a bin stands on the table).

Everything comes from images, ``/joint_states`` (through the nominal arm kinematics) and the
calibrated hand camera (intrinsics and hand-eye from the board steps); the description gives the
bin's shape. The procedure's step ``bins`` that takes the views is
:func:`r2s2r_calibration.steps.scene.run_bin_views`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np
import numpy.typing as npt
from r2s2r_description.transforms import invert_transform
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation
from scipy.special import ndtr

from r2s2r_calibration.bin_config import BinViewsConfig
from r2s2r_calibration.blur import BILINEAR_VARIANCE_PX2, PIXEL_BOX_VARIANCE_PX2
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray, look_at_pose
from r2s2r_calibration.registration.elements import SceneElement
from r2s2r_calibration.registration.faces import element_bounds
from r2s2r_calibration.uncertainty import CameraReplicate, UncertaintyConfig, pose_intervals

EDGE_NAMES = ("+x", "-x", "+y", "-y")
"""The rim's outer edges, by the bin-frame side they lie on."""


@dataclass(frozen=True)
class RimGeometry:
    """A bin's rim in its own frame: outer rectangle ``|x| <= half_x``, ``|y| <= half_y``.

    Attributes:
        centre_xy_m: Rectangle centre in the bin frame (m).
        half_x_m: Half the outer size along bin x (m).
        half_y_m: Half the outer size along bin y (m).
        height_m: Rim (wall top) height above the bin frame's origin (m).
        width_m: Width of the rim's top face (the wall thickness, m): its inner edge is this
            far inside the outer one.

    """

    centre_xy_m: tuple[float, float]
    half_x_m: float
    half_y_m: float
    height_m: float
    width_m: float = 0.01

    @classmethod
    def from_bounds(
        cls, lower: FloatArray, upper: FloatArray, width_m: float = 0.01
    ) -> RimGeometry:
        """Rim of an element whose boxes span ``lower``..``upper`` (bin frame, m)."""
        centre = 0.5 * (np.asarray(lower) + np.asarray(upper))
        half = 0.5 * (np.asarray(upper) - np.asarray(lower))
        return cls((float(centre[0]), float(centre[1])), float(half[0]), float(half[1]),
                   float(upper[2]), float(width_m))  # fmt: skip

    @classmethod
    def from_element(cls, element: SceneElement) -> RimGeometry:
        """Rim of a bin element: outer bounds of its boxes; width of its thinnest wall top.

        Raises:
            CalibrationError: No box reaches the element's top (no rim to look at).

        """
        lower, upper = element_bounds(element)
        tops = [
            min(box.size_m[0], box.size_m[1])
            for box in element.boxes
            if abs(box.xyz_m[2] + 0.5 * box.size_m[2] - upper[2]) < 1e-6
        ]
        if not tops:
            raise CalibrationError(f"{element.name}: no box reaches its top; not a bin with a rim")
        return cls.from_bounds(lower, upper, min(tops))

    def edge_points(self, edge: str, fraction: float, count: int) -> FloatArray:
        """``count`` points (bin frame) spread over the central ``fraction`` of an edge."""
        cx, cy = self.centre_xy_m
        s = np.linspace(-0.5 * fraction, 0.5 * fraction, count)
        z = np.full(count, self.height_m)
        if edge in ("+x", "-x"):
            x = cx + (self.half_x_m if edge == "+x" else -self.half_x_m)
            return np.column_stack([np.full(count, x), cy + 2.0 * self.half_y_m * s, z])
        y = cy + (self.half_y_m if edge == "+y" else -self.half_y_m)
        return np.column_stack([cx + 2.0 * self.half_x_m * s, np.full(count, y), z])


@dataclass
class RimView:
    """One hand-camera image of a bin.

    Attributes:
        image: RGB image (H, W, 3) uint8.
        camera_matrix: 3x3 K of the hand camera (px).
        distortion: (k1, k2, p1, p2, k3).
        T_base_optical: Hand camera optical frame in ``base_link`` when the image was taken.
        stamp_s: Image stamp (s).

    """

    image: npt.NDArray[np.uint8]
    camera_matrix: FloatArray
    distortion: FloatArray
    T_base_optical: FloatArray
    stamp_s: float


@dataclass
class RimEdges:
    """Sub-pixel rim edge points found in one view.

    Attributes:
        pixels: (N, 2) edge points (px, distorted image).
        edges: (N,) index into :data:`EDGE_NAMES` of the edge each point lies on.
        profiles: Profiles tried.

    """

    pixels: FloatArray
    edges: npt.NDArray[np.int_]
    profiles: int


@dataclass
class BinFit:
    """Refined bin pose.

    Attributes:
        T_base_bin: Bin pose in ``base_link`` (x, y, yaw refined; the rest as given).
        rms_m: In-plane RMS distance of the edge points to the rim (m).
        n_points: Edge points used, per edge name.
        coverage: Fraction of profiles that found an edge.
        std_xy_yaw: 1-sigma of x, y (m) and yaw (rad) from the fit's Jacobian.
        correction_m: Distance moved in x, y from the initial pose (m).
        observability: Weakest / strongest eigenvalue of the fit's information (yaw scaled by
            the rim size).
        height_change_m: Height fitted above the initial pose (m; 0 without ``fit_height``).
        height_std_m: 1-sigma of the height (m; NaN without ``fit_height``).

    """

    T_base_bin: FloatArray
    rms_m: float
    n_points: dict[str, int]
    coverage: float
    std_xy_yaw: tuple[float, float, float]
    correction_m: float
    observability: float
    height_change_m: float = 0.0
    height_std_m: float = math.nan


def view_poses(T_world_bin: FloatArray, rim: RimGeometry, cfg: BinViewsConfig) -> list[FloatArray]:
    """``T_world_optical`` of each view: straight down at the rim's centre, one per roll."""
    centre = T_world_bin @ np.array([*rim.centre_xy_m, rim.height_m, 1.0])
    eye = centre[:3] + np.array([0.0, 0.0, cfg.camera_height_m])
    yaw = float(np.arctan2(T_world_bin[1, 0], T_world_bin[0, 0]))
    return [
        look_at_pose(eye, centre[:3], [np.cos(yaw + roll), np.sin(yaw + roll), 0.0])
        for roll in cfg.rolls_rad
    ]


def _signal(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """Bin-vs-table signal: green minus red (0..1).

    It is linear in the pixel colours, so a blurred edge crosses halfway between the plateaus
    where the edge is.
    """
    rgb = image.astype(np.float32) / 255.0
    return np.ascontiguousarray(rgb[..., 1] - rgb[..., 0])


def _profile_fits(
    t: FloatArray, values: FloatArray, edges: FloatArray, sigma: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Least-squares levels of blurred piecewise-constant profiles for candidate edges.

    Args:
        t: (N,) sample offsets (px).
        values: (P, N) profiles.
        edges: (P, G, K) candidate edge offsets per profile.
        sigma: (P, G) blur sigma per candidate (px).

    Returns:
        ``(levels, costs)``: (P, G, K + 1) coefficients of ``1, Phi((t - e_k) / sigma)`` and
        (P, G) sums of squared residuals.

    """
    steps = ndtr((t - edges[..., None]) / sigma[..., None, None])  # (P, G, K, N)
    design = np.concatenate([np.ones((*steps.shape[:2], 1, t.size)), steps], axis=2)
    gram = np.einsum("pgkn,pgln->pgkl", design, design) + 1e-9 * np.eye(design.shape[2])
    rhs = np.einsum("pgkn,pn->pgk", design, values)
    coef = np.linalg.solve(gram, rhs[..., None])[..., 0]
    residual = np.einsum("pgkn,pgk->pgn", design, coef) - values[:, None, :]
    return coef, np.einsum("pgn,pgn->pg", residual, residual)


def _candidate_grid(
    offsets: FloatArray, gaps: FloatArray, sigmas: FloatArray, n_profiles: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Every (offset, gap, sigma) combination, sigma fastest, as three (P, G) arrays."""
    axes = np.meshgrid(offsets, gaps, sigmas, indexing="ij")
    tile = np.ones((n_profiles, 1))
    e, g, s = (axis.reshape(1, -1) * tile for axis in axes)
    return e, g, s


def fit_edge_profiles(
    t_px: FloatArray,
    values: FloatArray,
    rim_width_px: FloatArray,
    sigma_px: float | None,
    search_px: float,
    min_contrast: float = 0.0,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Locate a rim's outer edge on profiles that run from inside the bin to outside.

    Model: a profile is piecewise constant, blurred by a Gaussian of ``sigma_px`` (the camera's
    calibrated blur with the sampling's own spread; fitted when None): an inside level (the
    bin's inner wall), the rim top between its inner edge at ``e - rim_width_px`` and its outer
    edge at ``e``, then whatever lies outside (the table; next to another bin, only a sliver of
    table before that bin's wall, at a free ``e + gap``). The levels are linear least squares
    for given edges; ``e`` and ``gap`` (and sigma) are searched on a coarse grid, then on a fine
    grid about the best candidate, and ``e`` is interpolated by a parabola through the costs.

    A half-level crossing of the same profile is biased outward when the blur is wider than the
    rim top (the blurred rim never reaches its level) and lands on a neighbouring bin's wall when
    the table strip in between is narrower than the blur; this model has neither bias.

    Args:
        t_px: (N,) increasing sample offsets along the profiles (px); 0 is the predicted edge.
        values: (P, N) bin-vs-table signal of each profile at those offsets.
        rim_width_px: (P,) predicted width of the rim top along each profile (px).
        sigma_px: Edge-spread sigma of the samples (px), or None to fit it (one sigma for all
            the profiles: the median of their best sigmas on a first pass).
        search_px: The edge is searched within +-search_px of 0.
        min_contrast: Only candidates whose rim top is at least this much above the outside
            are considered (otherwise the rim's inner edge, seen with the far edge standing in
            for the outer one, fits as well).

    Returns:
        ``(offset_px, contrast, rms)``, each (P,): the outer edge's offset (NaN when the best
        fit is at the end of the search range), the rim level minus the outside level, and the
        model's RMS residual.

    """
    values = np.asarray(values, dtype=float).reshape(-1, np.asarray(t_px).size)
    width = np.asarray(rim_width_px, dtype=float).reshape(-1, 1)
    n_profiles = values.shape[0]

    def search(e: FloatArray, g: FloatArray, s: FloatArray) -> tuple[FloatArray, ...]:
        """Fit every (e, g, s) candidate (each (P, G)); return the fits and the best index."""
        edges = np.stack([e - width, e, e + g], axis=-1)
        coef, costs = _profile_fits(t_px, values, edges, s)
        allowed = np.where(-coef[..., 2] >= min_contrast, costs, np.inf)
        return coef, costs, np.argmin(allowed, axis=1)

    rows = np.arange(n_profiles)
    coarse_offsets = np.arange(-search_px, search_px + 1e-9, 0.5)
    if sigma_px is None:
        trial = np.arange(0.4, 3.01, 0.2)
        grid = _candidate_grid(coarse_offsets, np.array([0.6, 2.5, 10.0]), trial, n_profiles)
        _, _, first = search(*grid)
        sigma_px = float(np.median(trial[first % trial.size]))  # sigma varies fastest
    grid = _candidate_grid(
        coarse_offsets, np.array([0.6, 1.2, 2.5, 5.0, 10.0]), np.array([sigma_px]), n_profiles
    )
    _, _, best = search(*grid)
    e0, g0, s0 = (grid[k][rows, best][:, None] for k in range(3))
    step = 0.025
    fine_offsets = step * np.arange(-12, 13, dtype=float)
    fine_gaps = np.array([0.7, 0.85, 1.0, 1.2, 1.4])
    fine = _candidate_grid(fine_offsets, fine_gaps, np.array([1.0]), n_profiles)
    coef, costs, best = search(e0 + fine[0], g0 * fine[1], s0 * fine[2])
    # The cost along e at the best gap and sigma, for a parabolic refinement.
    n_e = fine_offsets.size
    per_e = costs.reshape(n_profiles, n_e, -1)
    k_best, j_best = np.divmod(best, per_e.shape[2])
    line = per_e[rows, :, j_best]  # (P, n_e)
    k = np.clip(k_best, 1, n_e - 2)
    left, middle, right = line[rows, k - 1], line[rows, k], line[rows, k + 1]
    curvature = left - 2.0 * middle + right
    shift = np.where(
        curvature > 0.0, 0.5 * (left - right) / np.where(curvature > 0.0, curvature, 1.0), 0.0
    )
    shift = np.where((k_best == k), np.clip(shift, -1.0, 1.0), 0.0)
    offset = e0[:, 0] + fine_offsets[k] + step * shift
    offset = np.where(np.abs(offset) < search_px - 1e-6, offset, np.nan)
    levels = np.cumsum(coef[rows, best], axis=1)  # inside, rim top, outside, beyond
    contrast = levels[:, 1] - levels[:, 2]
    rms = np.sqrt(costs[rows, best] / values.shape[1])
    return offset, contrast, rms


def rim_edge_points(
    view: RimView,
    T_base_bin: FloatArray,
    rim: RimGeometry,
    cfg: BinViewsConfig,
    blur_sigma_px: float | None = None,
) -> RimEdges:
    """Find the rim's outer edges in one view, along profiles across the predicted edges.

    Each profile runs from inside the rim to outside through the edge predicted from
    ``T_base_bin``; :func:`fit_edge_profile` locates the edge on it, with the camera's
    calibrated blur (``blur_sigma_px``; fitted per profile when None). Profiles that leave the
    image, without a clear rim-to-outside step (``min_contrast``) or whose model does not fit
    (RMS above ``max_profile_rms``) give no point.
    """
    signal = _signal(view.image)
    height, width = signal.shape
    T_optical_bin = invert_transform(view.T_base_optical) @ T_base_bin
    rvec = cv2.Rodrigues(T_optical_bin[:3, :3])[0]
    tvec = T_optical_bin[:3, 3]
    offsets = np.arange(
        -cfg.profile_half_length_px, cfg.profile_half_length_px + 1e-9, cfg.profile_step_px
    )
    # The profile is sampled by bilinear interpolation, which spreads an edge by 1/6 px^2 on
    # average on top of the image's own blur and pixel box (1/12 px^2).
    sigma = (
        None
        if blur_sigma_px is None
        else math.sqrt(blur_sigma_px**2 + PIXEL_BOX_VARIANCE_PX2 + BILINEAR_VARIANCE_PX2)
    )
    search = cfg.profile_half_length_px - cfg.profile_margin_px
    points, normals, widths, profiles, edge_index = [], [], [], [], []
    tried = 0
    centre_local = np.array([*rim.centre_xy_m, rim.height_m])
    for index, edge in enumerate(EDGE_NAMES):
        local = rim.edge_points(edge, cfg.edge_fraction, cfg.profiles_per_edge)
        direction = np.sign(local[0] - centre_local) * (np.array([1, 0, 0]) if "x" in edge else
                                                        np.array([0, 1, 0]))  # fmt: skip
        both = np.vstack([local, local + 0.005 * direction, local - rim.width_m * direction])
        projected = cv2.projectPoints(both, rvec, tvec, view.camera_matrix, view.distortion)[0]
        for point, out, inner in zip(*projected.reshape(3, -1, 2), strict=True):
            tried += 1
            normal = out - point
            norm = float(np.linalg.norm(normal))
            if norm < 1e-9:
                continue
            normal /= norm
            samples = point[None, :] + offsets[:, None] * normal[None, :]
            rim_width_px = float(np.dot(point - inner, normal))
            if (
                samples.min() < 1.0
                or samples[:, 0].max() > width - 2.0
                or samples[:, 1].max() > height - 2.0
                or rim_width_px <= 0.1
            ):
                continue
            profiles.append(samples)
            points.append(point)
            normals.append(normal)
            widths.append(rim_width_px)
            edge_index.append(index)
    pixels: list[FloatArray] = []
    edges: list[int] = []
    if profiles:
        stacked = np.vstack(profiles).astype(np.float32)
        values = cv2.remap(
            signal, stacked[:, 0].reshape(1, -1), stacked[:, 1].reshape(1, -1), cv2.INTER_LINEAR
        ).reshape(len(profiles), offsets.size)
        found, contrast, rms = fit_edge_profiles(
            offsets, values.astype(float), np.asarray(widths), sigma, search, cfg.min_contrast
        )
        good = (
            np.isfinite(found)
            & (contrast >= cfg.min_contrast)
            & (rms <= cfg.max_profile_rms * np.maximum(contrast, 1e-9))
        )
        for k in np.flatnonzero(good):
            pixels.append(points[k] + found[k] * normals[k])
            edges.append(edge_index[k])
    return RimEdges(
        np.asarray(pixels, dtype=float).reshape(-1, 2), np.asarray(edges, dtype=int), tried
    )


def _rays_base(view: RimView, pixels: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Ray origins and unit directions in ``base_link`` through distorted pixels."""
    normalised = cv2.undistortPoints(
        pixels.reshape(-1, 1, 2).astype(np.float64), view.camera_matrix, view.distortion
    ).reshape(-1, 2)
    rays = np.column_stack([normalised, np.ones(len(normalised))]).astype(float)
    directions = rays / np.linalg.norm(rays, axis=1, keepdims=True)
    R, t = view.T_base_optical[:3, :3], view.T_base_optical[:3, 3]
    return np.tile(t, (len(directions), 1)), directions @ R.T


def _with_xy_yaw(T_base_bin: FloatArray, params: FloatArray) -> FloatArray:
    """``T_base_bin`` moved by (dx, dy) in base_link and turned by dyaw about its own z."""
    T = T_base_bin.copy()
    T[:3, :3] = T_base_bin[:3, :3] @ Rotation.from_rotvec([0.0, 0.0, params[2]]).as_matrix()
    T[:2, 3] += params[:2]
    if len(params) > 3:
        T[2, 3] += params[3]
    return T


def fit_bin_pose(
    views: list[RimView],
    found: list[RimEdges],
    T_base_bin: FloatArray,
    rim: RimGeometry,
    cfg: BinViewsConfig,
    every_edge: bool = True,
) -> BinFit:
    """Fit the bin's x, y and yaw to the rim edge points of every view.

    Each edge point's ray is intersected with the rim's plane (at the bin's current height and
    tilt); the residual is the intersection's distance from its edge line, in the rim plane.

    Args:
        views: The images and camera poses.
        found: Edge points of each view (:func:`rim_edge_points`).
        T_base_bin: The pose the fit starts from (and measures its correction from).
        rim: The rim's geometry.
        cfg: Thresholds.
        every_edge: Require ``min_points_per_edge`` on all four edges (the final fit); when
            False one edge per axis is enough (a first estimate to predict the edges again).

    Raises:
        CalibrationError: Too few points on an edge, an RMS above ``max_rms_m`` or a
            correction above ``max_correction_m``.

    """
    origins, directions, edge_index = [], [], []
    for view, edges in zip(views, found, strict=True):
        if len(edges.pixels) == 0:
            continue
        o, d = _rays_base(view, edges.pixels)
        origins.append(o)
        directions.append(d)
        edge_index.append(edges.edges)
    counts = {name: 0 for name in EDGE_NAMES}
    if edge_index:
        stacked = np.concatenate(edge_index)
        counts = {name: int(np.sum(stacked == k)) for k, name in enumerate(EDGE_NAMES)}
    short = [f"{name} {n}" for name, n in counts.items() if n < cfg.min_points_per_edge]
    if not every_edge:
        per_axis = [
            max(counts["+x"], counts["-x"]) >= cfg.min_points_per_edge,
            max(counts["+y"], counts["-y"]) >= cfg.min_points_per_edge,
        ]
        short = [] if all(per_axis) else short
    if short:
        raise CalibrationError(
            f"rim edges found on too few profiles ({', '.join(short)}; need "
            f"{cfg.min_points_per_edge} per edge): the rim is not fully in view, or the bin is "
            "far from where the registration put it; check the hand camera calibration"
        )
    ray_origins, ray_directions = np.vstack(origins), np.vstack(directions)
    E = np.concatenate(edge_index)
    axis = np.where(E < 2, 0, 1)
    sign = np.where(E % 2 == 0, 1.0, -1.0)
    half = np.where(axis == 0, rim.half_x_m, rim.half_y_m)
    centre = np.asarray(rim.centre_xy_m)[axis]

    def residuals(params: FloatArray) -> FloatArray:
        T = _with_xy_yaw(T_base_bin, params)
        normal, point = T[:3, 2], T[:3, :3] @ np.array([0.0, 0.0, rim.height_m]) + T[:3, 3]
        lam = ((point - ray_origins) @ normal) / (ray_directions @ normal)
        hits = ray_origins + lam[:, None] * ray_directions
        local = (hits - T[:3, 3]) @ T[:3, :3]
        return np.asarray(sign * (local[np.arange(len(local)), axis] - centre) - half)

    keep = np.ones(len(E), dtype=bool)
    params = np.zeros(4 if cfg.fit_height else 3)
    for _ in range(4):  # robust fit, then drop points far off the rim (a mis-detected edge)
        result = least_squares(
            lambda p, kept=keep: residuals(p)[kept],
            params,
            loss="soft_l1",
            f_scale=cfg.residual_scale_m,
            x_scale=[1e-3, 1e-3, 1e-2, 1e-3][: len(params)],
        )
        params = result.x
        everything = np.abs(residuals(params))
        scale = max(1.4826 * float(np.median(everything[keep])), 0.1 * cfg.residual_scale_m)
        new_keep = everything < cfg.outlier_sigmas * scale
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    final = residuals(result.x)[keep]
    rms = float(np.sqrt(np.mean(final**2)))
    T_fit = _with_xy_yaw(T_base_bin, result.x)
    correction = float(np.linalg.norm(result.x[:2]))
    if rms > cfg.max_rms_m:
        raise CalibrationError(
            f"rim fit RMS {1000 * rms:.2f} mm exceeds max_rms_m = {cfg.max_rms_m}: the edges "
            "found do not form the rim's rectangle (another object in view, or a wrong bin size "
            "in the description)"
        )
    if correction > cfg.max_correction_m:
        raise CalibrationError(
            f"the rim fit moves the bin {1000 * correction:.1f} mm from the registration (more "
            f"than max_correction_m = {cfg.max_correction_m}); the views may show another bin"
        )
    jacobian = result.jac
    try:
        covariance = np.linalg.inv(jacobian.T @ jacobian) * rms**2
        std = [float(v) for v in np.sqrt(np.clip(np.diag(covariance), 0.0, None))]
    except np.linalg.LinAlgError:
        std = [float("inf")] * len(result.x)
    tried = sum(edges.profiles for edges in found)
    return BinFit(
        T_base_bin=T_fit,
        rms_m=rms,
        n_points=counts,
        coverage=float(np.count_nonzero(keep) / max(tried, 1)),
        std_xy_yaw=(std[0], std[1], std[2]),
        correction_m=correction,
        observability=_observability(jacobian, rim),
        height_change_m=float(result.x[3]) if len(result.x) > 3 else 0.0,
        height_std_m=std[3] if len(std) > 3 else math.nan,
    )


def _observability(jacobian: FloatArray, rim: RimGeometry) -> float:
    """Weakest / strongest eigenvalue of the fit's information, yaw scaled to the rim size."""
    scale = np.array([1.0, 1.0, 1.0 / max(rim.half_x_m, rim.half_y_m), 1.0])
    scaled = jacobian * scale[: jacobian.shape[1]]
    eigenvalues = np.linalg.eigvalsh(scaled.T @ scaled)
    return float(eigenvalues[0] / eigenvalues[-1]) if eigenvalues[-1] > 0.0 else 0.0


def refine_bin_pose(
    views: list[RimView],
    T_base_bin: FloatArray,
    rim: RimGeometry,
    cfg: BinViewsConfig,
    blur_sigma_px: float | None,
) -> tuple[BinFit, list[RimEdges]]:
    """Find the rim edges and fit the bin pose, predicting the edges again from each fit.

    The registration can leave a bin several millimetres off, i.e. a few pixels in these views:
    enough for an edge profile to miss the edge or, next to another bin, to take that bin's wall
    for the table. Each pass finds the edges along profiles through where the previous fit puts
    them (one edge per axis suffices for an intermediate fit); the last pass is the final fit,
    with every edge and every refusal of :func:`fit_bin_pose`.

    Raises:
        CalibrationError: See :func:`fit_bin_pose` (from the last pass).

    """
    T_predicted = T_base_bin
    found: list[RimEdges] = []
    for _ in range(cfg.prediction_passes):
        found = [rim_edge_points(view, T_predicted, rim, cfg, blur_sigma_px) for view in views]
        try:
            estimate = fit_bin_pose(views, found, T_base_bin, rim, cfg, every_edge=False)
        except CalibrationError:
            break
        moved = float(np.linalg.norm(estimate.T_base_bin[:3, 3] - T_predicted[:3, 3]))
        turned = abs(yaw_change(T_predicted, estimate.T_base_bin))
        T_predicted = estimate.T_base_bin
        if moved < 1e-4 and turned < 1e-3:
            break
    found = [rim_edge_points(view, T_predicted, rim, cfg, blur_sigma_px) for view in views]
    return fit_bin_pose(views, found, T_base_bin, rim, cfg), found


def rim_intervals(
    views: list[RimView],
    found: list[RimEdges],
    T_base_bin: FloatArray,
    rim: RimGeometry,
    cfg: BinViewsConfig,
    fit: BinFit,
    replicates: list[CameraReplicate],
    T_palm_optical: FloatArray,
    mount_translation_std_m: tuple[float, float, float],
    mount_rotation_std_rad: tuple[float, float, float],
    unc: UncertaintyConfig,
) -> tuple[float, float]:
    """95 % bounds on a rim fit's position and rotation (see :mod:`.uncertainty`).

    The same edge pixels are fitted again with each jackknife replicate of the hand camera
    (intrinsics and the mount solved with them); the fit's own standard errors, the mount fit's
    (its rotation times the viewing distance), a held height's uncertainty and the model floors
    are added.
    """
    T_optical_palm = invert_transform(T_palm_optical)
    refits = []
    for replicate in replicates:
        if replicate.T_parent_optical is None:
            continue
        moved = [
            RimView(
                view.image,
                replicate.camera_matrix,
                replicate.distortion,
                view.T_base_optical @ T_optical_palm @ replicate.T_parent_optical,
                view.stamp_s,
            )
            for view in views
        ]
        try:
            refits.append(fit_bin_pose(moved, found, T_base_bin, rim, cfg).T_base_bin)
        except CalibrationError:
            continue
    std_x, std_y, std_yaw = fit.std_xy_yaw
    std_z = fit.height_std_m if cfg.fit_height else unc.held_height_std_m
    mount_rotation = np.asarray(mount_rotation_std_rad, dtype=float)
    mount = np.hypot(np.asarray(mount_translation_std_m), mount_rotation * cfg.camera_height_m)
    translation_std = np.hypot([std_x, std_y, std_z], mount)
    rotation_std = np.hypot([0.0, 0.0, std_yaw], mount_rotation)
    return pose_intervals(
        fit.T_base_bin,
        refits,
        translation_std,
        rotation_std,
        unc.bin_position_floor_m,
        unc.bin_rotation_floor_rad,
    )


def yaw_change(T_from: FloatArray, T_to: FloatArray) -> float:
    """Yaw (rad) of ``T_to`` relative to ``T_from``, about ``T_from``'s z axis."""
    relative = T_from[:3, :3].T @ T_to[:3, :3]
    return float(np.arctan2(relative[1, 0], relative[0, 0]))


RMS_REFUSAL = "rim fit RMS"
"""How :func:`fit_bin_pose`'s refusal for a high RMS begins."""


def refine_bin_pose_or_soft_edges(
    views: list[RimView],
    T_base_bin: FloatArray,
    rim: RimGeometry,
    cfg: BinViewsConfig,
    blur_sigma_px: float | None,
) -> tuple[BinFit, list[RimEdges], BinViewsConfig, str]:
    """Run :func:`refine_bin_pose`; if refused for its RMS, again with soft edges.

    A camera that compresses colour (MJPEG: the chroma planes at half resolution) spreads the
    bin-vs-table colour edges more than the calibrated (luma) blur, and blockily: the edge
    points scatter by several millimetres and the rim's apparent size, from which its height is
    measured, grows. Refused for its RMS, the fit is made again within ``soft_edge_max_rms_m``
    and its height is not used (the registration's is kept): the blocky chroma scatters the
    edge points about the true edge, which the robust fit of x, y and yaw averages over a few
    hundred points (on the default twin with a real camera's look, x and y within 1 mm and yaw
    within 1.2 deg of the fit on the same cell without MJPEG), while the height, fitted from
    the rim's apparent size, takes up the chroma's spread (7 mm there).

    Returns:
        The fit, its edges, the settings it was made with, and a note ('' for the first try).

    Raises:
        CalibrationError: Refused both ways (the second refusal), or refused for another reason.

    """
    try:
        fit, found = refine_bin_pose(views, T_base_bin, rim, cfg, blur_sigma_px)
        return fit, found, cfg, ""
    except CalibrationError as error:
        if blur_sigma_px is None or not str(error).startswith(RMS_REFUSAL):
            raise
        first = str(error).split(":", 1)[0]
    # The intermediate fits only predict where the edges are: no RMS limit on them; the final
    # fit's is checked here.
    loose = cfg.model_copy(update={"max_rms_m": 0.05})
    fit, found = refine_bin_pose(views, T_base_bin, rim, loose, blur_sigma_px)
    if fit.rms_m > cfg.soft_edge_max_rms_m:
        raise CalibrationError(
            f"{RMS_REFUSAL} {1000 * fit.rms_m:.2f} mm exceeds soft_edge_max_rms_m = "
            f"{cfg.soft_edge_max_rms_m} (after {first} with the calibrated blur): the edges found "
            "do not form the rim's rectangle (another object in view, or a wrong bin size in the "
            "description)"
        )
    soft = cfg.model_copy(update={"max_rms_m": cfg.soft_edge_max_rms_m})
    # The fitted height takes up the chroma's spread of the rim's apparent size: it is not
    # the rim's height, so the registration's is kept.
    T_fit = fit.T_base_bin.copy()
    T_fit[2, 3] = T_base_bin[2, 3]
    fit = replace(fit, T_base_bin=T_fit, height_change_m=0.0, height_std_m=math.nan)
    note = (
        f"the rim's colour edges scatter more than the calibrated blur allows ({first}; "
        f"compressed colour?): x, y, yaw fitted within soft_edge_max_rms_m, height held"
    )
    return fit, found, soft.model_copy(update={"fit_height": False}), note
