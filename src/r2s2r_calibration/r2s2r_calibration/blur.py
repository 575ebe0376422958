"""Gaussian blur sigma of a camera from the edges of a ChArUco board (edge-spread fitting).

Model: the sensor image is the scene convolved with an isotropic Gaussian of ``sigma_px``
(optics, defocus) and then integrated over the square pixel. Across a straight edge this gives
an edge-spread function whose variance is ``sigma_px**2 + 1/12`` (the pixel box contributes
1/12 px^2 along any direction), which is what :func:`estimate_blur` inverts.

Edges are the interior chessboard edges. Each separates a black square from a white square
that holds a marker; perpendicular to the middle part of the edge the printed profile is
black | white margin | black marker border, so each edge is fitted with a two-step model
``a + b * (Phi((d - d0) / s) - Phi((d - d0 - m) / s))`` which stays valid for blur larger than
the white margin. Pixels are located on the board exactly through the calibrated camera model
(undistortion of pixel *coordinates*, never a resampling of the image, which would add blur),
and board distances are converted to sensor pixels by the local projection scale of each edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from pydantic import Field
from r2s2r_common.config import ConfigModel
from scipy.optimize import least_squares
from scipy.special import ndtr

from r2s2r_calibration.errors import BlurEstimationError
from r2s2r_calibration.geometry import FloatArray, rvec_tvec_from_pose
from r2s2r_calibration.intrinsics import CalibrationBoard, ChessboardConfig

PIXEL_BOX_VARIANCE_PX2 = 1.0 / 12.0
BILINEAR_VARIANCE_PX2 = 1.0 / 6.0
"""Mean edge-spread variance of linear interpolation (t (1 - t) over uniform phases t)."""


class BlurConfig(ConfigModel):
    """Acceptance thresholds of the blur estimate."""

    min_edges: int = Field(12, ge=1, le=100000, description="Usable board edges required.")
    min_pixels_per_edge: int = Field(
        40, ge=10, le=100000, description="Pixels an edge profile must have to be fitted."
    )
    min_margin_px: float = Field(
        2.0, gt=0.0, le=100.0, description="Skip edges whose white margin images smaller (px)."
    )
    max_relative_spread: float = Field(
        0.25,
        gt=0.0,
        le=10.0,
        description="Refuse when the robust spread of the per-edge measured edge spreads / their "
        "median exceeds this.",
    )
    max_edges_per_view: int = Field(
        24, ge=1, le=10000, description="Edges fitted per view (spread over the board)."
    )
    max_sigma_px: float = Field(8.0, gt=0.0, le=50.0, description="Largest sigma fitted (px).")
    pixel_integration: bool = Field(
        True, description="Remove the pixel-box variance (1/12 px^2) from the fitted spread."
    )


@dataclass
class BlurResult:
    """Estimated Gaussian blur.

    Attributes:
        sigma_px: Blur sigma (sensor px), median over edges.
        sigma_std_px: Standard error of the median (robust).
        relative_spread: Robust std of the per-edge measured edge spreads divided by their
            median (what the edges disagree on).
        per_edge_sigma_px: Blur sigma of each fitted edge.
        n_edges: Number of fitted edges.
        n_views: Number of views that contributed edges.

    """

    sigma_px: float
    sigma_std_px: float
    relative_spread: float
    per_edge_sigma_px: FloatArray
    n_edges: int
    n_views: int


def simulator_render_variance_px2(
    camera_matrix: FloatArray, distortion: FloatArray, image_size_px: tuple[int, int]
) -> float:
    """Edge-spread variance (sensor px^2) the cell simulator's rendering adds before its blur.

    The simulator (:class:`r2s2r_sim.camera_model.ImageWarp`) renders an ideal pinhole image
    (pixel area sampling: a box of one render pixel), resamples it bilinearly into the camera
    (on average 1/6 render px^2 across an edge), and only then applies its Gaussian blur. The
    blur *parameter* that makes the simulator reproduce a camera is therefore the camera's edge
    spread less this variance; it is computed for the calibrated camera model here.
    """
    from r2s2r_sim.camera_model import ImageWarp, Intrinsics

    K = np.asarray(camera_matrix, dtype=float)
    width, height = image_size_px
    warp = ImageWarp(
        Intrinsics(width, height, K[0, 0], K[1, 1], K[0, 2], K[1, 2]),
        [float(v) for v in np.asarray(distortion, dtype=float).reshape(-1)[:5]],
    )
    render_px2 = 0.5 * (
        (K[0, 0] / warp.render_focal_px) ** 2 + (K[1, 1] / warp.render_focal_px) ** 2
    )
    if warp.identity:  # the render is the image: no resampling
        return float(render_px2 * PIXEL_BOX_VARIANCE_PX2)
    return float(render_px2 * (PIXEL_BOX_VARIANCE_PX2 + BILINEAR_VARIANCE_PX2))


def _black_squares(board: CalibrationBoard) -> npt.NDArray[np.bool_]:
    """Which chessboard squares are printed black, (rows, cols), read from the board image."""
    squares_x, squares_y = board.getChessboardSize()
    if isinstance(board, ChessboardConfig):
        rows, cols = np.mgrid[0:squares_y, 0:squares_x]
        return np.asarray((rows + cols) % 2 == 0)
    texels = 20
    image = board.generateImage((squares_x * texels, squares_y * texels), marginSize=0)
    # Sample next to a square's corner: inside the white margin of marker squares.
    samples = image[1::texels, 1::texels][:squares_y, :squares_x]
    return np.asarray(samples < 128)


EDGE_LOSS_SCALE = 5.0
"""Grey levels at which an edge pixel's residual stops counting in full (soft-L1 loss)."""

_BATCH_ITERATIONS = 40
"""Damped Gauss-Newton iterations of the batched edge fit before an edge falls back to scipy."""


def _edge_jacobians(params: FloatArray, distance_px: FloatArray) -> FloatArray:
    """``(E, N, 5)`` Jacobians of :func:`_edge_model` for ``(E, 5)`` parameters."""
    contrast, offset, margin, sigma = (params[:, i : i + 1] for i in range(1, 5))
    z_rise = (distance_px - offset) / sigma
    z_fall = (distance_px - offset - margin) / sigma
    pdf_rise = np.exp(-0.5 * z_rise**2) / np.sqrt(2.0 * np.pi)
    pdf_fall = np.exp(-0.5 * z_fall**2) / np.sqrt(2.0 * np.pi)
    return np.stack(
        [
            np.ones_like(z_rise),
            ndtr(z_rise) - ndtr(z_fall),
            contrast * (pdf_fall - pdf_rise) / sigma,
            contrast * pdf_fall / sigma,
            contrast * (pdf_fall * z_fall - pdf_rise * z_rise) / sigma,
        ],
        axis=-1,
    )


def _edge_residuals(
    params: FloatArray, distance_px: FloatArray, intensity: FloatArray
) -> FloatArray:
    """``(E, N)`` residuals of :func:`_edge_model` for ``(E, 5)`` parameters."""
    level, contrast, offset, margin, sigma = (params[:, i : i + 1] for i in range(5))
    rising = ndtr((distance_px - offset) / sigma)
    falling = ndtr((distance_px - offset - margin) / sigma)
    return np.asarray(level + contrast * (rising - falling) - intensity)


def _edge_model(params: FloatArray, distance_px: FloatArray) -> FloatArray:
    """Grey levels of one edge's two-step profile at ``distance_px``."""
    return _edge_residuals(np.asarray(params)[None], distance_px[None], np.zeros(1))[0]


def _edge_jacobian(params: FloatArray, distance_px: FloatArray) -> FloatArray:
    """``(N, 5)`` Jacobian of :func:`_edge_model` for one edge."""
    return _edge_jacobians(np.asarray(params)[None], distance_px[None])[0]


def _edge_costs(residual: FloatArray, used: FloatArray) -> FloatArray:
    """Soft-L1 cost of each edge (``least_squares``' ``cost`` with ``f_scale``)."""
    scaled = (residual / EDGE_LOSS_SCALE) ** 2
    return np.asarray(EDGE_LOSS_SCALE**2 * np.sum(used * (np.sqrt(1.0 + scaled) - 1.0), axis=1))


def _fit_edge_scipy(
    distance_px: FloatArray,
    intensity: FloatArray,
    start: FloatArray,
    lower: FloatArray,
    upper: FloatArray,
) -> tuple[float, float] | None:
    """One edge by ``scipy.optimize.least_squares`` (trust region reflective, soft-L1)."""
    try:
        solution = least_squares(
            lambda p: _edge_model(p, distance_px) - intensity,
            start,
            jac=lambda p: _edge_jacobian(p, distance_px),
            bounds=(lower, upper),
            loss="soft_l1",
            f_scale=EDGE_LOSS_SCALE,
        )
    except ValueError:
        return None
    if not solution.success:
        return None
    return float(solution.x[4]), float(solution.x[3])


def _fit_edges(
    profiles: list[tuple[FloatArray, FloatArray, float]], max_sigma_px: float
) -> list[tuple[float, float] | None]:
    """Fit the two-step profile of many edges: (spread sigma px, fitted margin px) or None each.

    Each edge (distances px, grey levels, nominal white margin px) minimises the soft-L1 cost
    ``sum C^2 (sqrt(1 + (r / C)^2) - 1)`` of its residuals r (C = :data:`EDGE_LOSS_SCALE`)
    within its bounds (offset within 3 px, margin within 50 % of nominal, sigma 0.05 px to
    ``max_sigma_px``). All edges take damped Gauss-Newton steps together, in arrays (robust
    weights as scipy's, Levenberg-Marquardt damping), until each step is below scipy's
    tolerance; an edge that has not converged after :data:`_BATCH_ITERATIONS` or whose solution
    touches a bound is fitted by ``scipy.optimize.least_squares`` instead (one call per edge
    cost ~10 ms of Python overhead: 15 s for a camera's ~1,500 edges). An edge without
    contrast (5-95 % range < 10 grey levels) gives None.
    """
    count = len(profiles)
    if count == 0:
        return []
    length = max(len(d) for d, _, _ in profiles)
    distance, intensity, used = (
        np.zeros((count, length)),
        np.zeros((count, length)),
        np.zeros((count, length)),
    )
    start, lower, upper = np.zeros((count, 5)), np.zeros((count, 5)), np.zeros((count, 5))
    contrasted = np.zeros(count, dtype=bool)
    for k, (d, values, margin_px) in enumerate(profiles):
        distance[k, : len(d)], intensity[k, : len(d)], used[k, : len(d)] = d, values, 1.0
        low, high = np.percentile(values, [5, 95])
        contrasted[k] = high - low >= 10.0
        start[k] = [low, high - low, 0.0, margin_px, 1.0]
        lower[k] = [-np.inf, 0.0, -3.0, 0.5 * margin_px, 0.05]
        upper[k] = [np.inf, np.inf, 3.0, 1.5 * margin_px, max_sigma_px]
    params = start.copy()
    cost = _edge_costs(_edge_residuals(params, distance, intensity), used)
    damping = np.full(count, 1e-3)
    active = contrasted.copy()
    converged = np.zeros(count, dtype=bool)
    eye = np.eye(5)
    for _ in range(_BATCH_ITERATIONS):
        if not active.any():
            break
        idx = np.flatnonzero(active)
        p, d, y, u = params[idx], distance[idx], intensity[idx], used[idx]
        residual = _edge_residuals(p, d, y)
        # Soft-L1 (z = (r / C)^2): the gradient weighs a residual by rho' = (1 + z)^-1/2, the
        # Gauss-Newton Hessian by rho' + 2 rho'' z = (1 + z)^-3/2 (as scipy's robust losses).
        z = (residual / EDGE_LOSS_SCALE) ** 2
        jacobian = _edge_jacobians(p, d)
        gradient = np.einsum("eni,en->ei", jacobian, u * residual / np.sqrt(1.0 + z))
        normal = np.einsum("eni,enj->eij", jacobian * (u * (1.0 + z) ** -1.5)[..., None], jacobian)
        diagonal = np.einsum("eii->ei", normal) + 1e-12
        damped = normal + damping[idx, None, None] * diagonal[:, :, None] * eye
        try:
            step = np.linalg.solve(damped, -gradient[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = -gradient / diagonal
        trial = p + step
        inside = np.all((trial > lower[idx]) & (trial < upper[idx]), axis=1)
        trial_cost = _edge_costs(_edge_residuals(trial, d, y), u)
        better = inside & np.isfinite(trial_cost) & (trial_cost <= cost[idx])
        # scipy's default tolerances (xtol, ftol 1e-8) on an accepted step.
        # Only an undamped step tells a minimum (a damped one is small anywhere).
        small = (
            better
            & (damping[idx] <= 1e-2)
            & (
                (np.linalg.norm(step, axis=1) <= 1e-8 * (1e-8 + np.linalg.norm(p, axis=1)))
                | (cost[idx] - trial_cost <= 1e-8 * cost[idx])
            )
        )
        accepted = idx[better]
        params[accepted] = trial[better]
        cost[accepted] = trial_cost[better]
        damping[accepted] = np.maximum(damping[accepted] * 0.3, 1e-12)
        damping[idx[~better]] *= 10.0
        converged[idx[small]] = True
        active[idx[small | (damping[idx] > 1e10)]] = False
    fits: list[tuple[float, float] | None] = []
    for k, (d, values, _) in enumerate(profiles):
        if not contrasted[k]:
            fits.append(None)
        elif converged[k]:
            fits.append((float(params[k, 4]), float(params[k, 3])))
        else:  # a solution on a bound, or slow: the reference solver from the same start
            fits.append(_fit_edge_scipy(d, values, start[k], lower[k], upper[k]))
    return fits


def _fit_edge(
    distance_px: FloatArray, intensity: FloatArray, margin_px: float, max_sigma_px: float
) -> tuple[float, float] | None:
    """Fit one edge's two-step profile (see :func:`_fit_edges`)."""
    return _fit_edges([(distance_px, intensity, margin_px)], max_sigma_px)[0]


def _board_coordinates(
    pixels: FloatArray, camera_matrix: FloatArray, distortion: FloatArray, pose: FloatArray
) -> FloatArray:
    """Board-plane coordinates (m) of pixel centres, through the distortion model."""
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 1e-9)
    normalized = cv2.undistortPoints(
        pixels.reshape(-1, 1, 2), camera_matrix, distortion, None, None, None, criteria
    ).reshape(-1, 2)
    inverse = np.linalg.inv(np.column_stack([pose[:3, 0], pose[:3, 1], pose[:3, 3]]))
    homogeneous = normalized @ inverse[:, :2].T + inverse[:, 2]
    return np.asarray(homogeneous[:, :2] / homogeneous[:, 2:3])


def estimate_blur(
    board: CalibrationBoard,
    images: list[npt.NDArray[np.uint8]],
    board_poses: list[FloatArray],
    camera_matrix: FloatArray,
    distortion: FloatArray,
    config: BlurConfig | None = None,
    removed_variance_px2: float | None = None,
) -> BlurResult:
    """Estimate the Gaussian blur sigma from board edges in calibrated views.

    Args:
        board: The board shown in the views (ChArUco, or a plain chessboard: its edges are
            black | white square | black, fitted within 0.45 squares of the edge).
        images: 8-bit grey (or BGR) views of the board.
        board_poses: ``T_camera_board`` of each view (e.g. from the intrinsics calibration).
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        config: Thresholds; defaults to :class:`BlurConfig`.
        removed_variance_px2: Edge-spread variance not due to the blur, removed from each
            fit when ``config.pixel_integration``; default the sensor pixel box (1/12 px^2),
            e.g. :func:`simulator_render_variance_px2` for a simulator's blur parameter.

    Returns:
        The blur estimate.

    Raises:
        ValueError: If images and poses differ in number.
        BlurEstimationError: If too few edges are usable or per-edge estimates disagree.

    """
    cfg = config or BlurConfig()
    if len(images) != len(board_poses):
        raise ValueError(
            f"{len(images)} images but {len(board_poses)} board poses; expected one pose a view"
        )
    K = np.asarray(camera_matrix, dtype=float)
    dist = np.asarray(distortion, dtype=float).reshape(-1)
    squares_x, squares_y = board.getChessboardSize()
    square_m = float(board.getSquareLength())
    if isinstance(board, ChessboardConfig):
        # The "margin" is the whole white square; fit the middle of the edge, up to 0.45
        # squares away from it (the next edge, a square away, stays out of the profile).
        margin_m = square_m
        along_lo_m = 0.2 * square_m
        across_max_m = 0.45 * square_m
    else:
        marker_m = float(board.getMarkerLength())
        margin_m = 0.5 * (square_m - marker_m)
        bit_m = marker_m / (board.getDictionary().markerSize + 2)
        along_lo_m = margin_m + 0.2 * (square_m - 2 * margin_m)
        across_max_m = margin_m + 0.5 * bit_m
    black = _black_squares(board)
    sigmas: list[float] = []
    views_used = 0
    for image, pose in zip(images, board_poses, strict=True):
        grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        edge_sigmas = _view_edge_sigmas(
            grey.astype(np.float64),
            np.asarray(pose, dtype=float),
            K,
            dist,
            (squares_x, squares_y, square_m, margin_m, along_lo_m, across_max_m),
            black,
            cfg,
        )
        if edge_sigmas:
            views_used += 1
            sigmas.extend(edge_sigmas)
    if len(sigmas) < cfg.min_edges:
        raise BlurEstimationError(
            f"{len(sigmas)} board edges could be fitted (need {cfg.min_edges}); show the board "
            "larger in the image (closer), so its white square margins span "
            f">= {cfg.min_margin_px} px"
        )
    measured = np.asarray(sigmas)
    spread = measured
    if cfg.pixel_integration:
        removed = PIXEL_BOX_VARIANCE_PX2 if removed_variance_px2 is None else removed_variance_px2
        if removed < 0:
            raise ValueError(f"removed_variance_px2 = {removed}: expected >= 0")
        spread = np.sqrt(np.maximum(measured**2 - removed, 0.0))
    median = float(np.median(spread))
    robust_std = float(1.4826 * np.median(np.abs(spread - median)))
    # The edges must agree on what was measured, their edge spread: the blur left after the
    # pixel (and render) spread is removed has a relative noise that grows without bound as
    # the blur goes to zero (a sharp 0.45 px camera showed 27 % there, 12 % in edge spread).
    measured_median = float(np.median(measured))
    relative = float(1.4826 * np.median(np.abs(measured - measured_median))) / max(
        measured_median, 1e-9
    )
    if relative > cfg.max_relative_spread:
        raise BlurEstimationError(
            f"per-edge blur disagrees: robust spread {relative:.2f} of the median edge spread "
            f"{measured_median:.2f} px exceeds max_relative_spread = {cfg.max_relative_spread}; "
            "check for motion blur (hold the board still) or uneven focus"
        )
    return BlurResult(
        sigma_px=median,
        sigma_std_px=1.2533 * robust_std / np.sqrt(len(spread)),
        relative_spread=relative,
        per_edge_sigma_px=spread,
        n_edges=len(spread),
        n_views=views_used,
    )


def _is_black_white(edge: tuple[int, int, int], black: npt.NDArray[np.bool_]) -> bool:
    axis, line_index, cell = edge
    if axis == 0:
        return bool(black[cell, line_index - 1] != black[cell, line_index])
    return bool(black[line_index - 1, cell] != black[line_index, cell])


def _view_edge_sigmas(
    grey: FloatArray,
    pose: FloatArray,
    camera_matrix: FloatArray,
    distortion: FloatArray,
    geometry: tuple[int, int, float, float, float, float],
    black: npt.NDArray[np.bool_],
    cfg: BlurConfig,
) -> list[float]:
    squares_x, squares_y, square_m, margin_m, along_lo, across_max = geometry
    height, width = grey.shape
    outline = np.array(
        [[0, 0, 0], [squares_x, 0, 0], [0, squares_y, 0], [squares_x, squares_y, 0]], float
    )
    rvec, tvec = rvec_tvec_from_pose(pose)
    projected, _ = cv2.projectPoints(outline * square_m, rvec, tvec, camera_matrix, distortion)
    corners_px = projected.reshape(-1, 2)
    u0, v0 = np.clip(np.floor(corners_px.min(axis=0)).astype(int) - 2, 0, [width, height])
    u1, v1 = np.clip(np.ceil(corners_px.max(axis=0)).astype(int) + 2, 0, [width, height])
    if u1 - u0 < 4 or v1 - v0 < 4:
        return []
    grid_u, grid_v = np.meshgrid(np.arange(u0, u1, dtype=float), np.arange(v0, v1, dtype=float))
    pixels = np.column_stack([grid_u.ravel(), grid_v.ravel()])
    board_xy = _board_coordinates(pixels, camera_matrix, distortion, pose)
    values = grey[v0:v1, u0:u1].ravel()
    along_hi = square_m - along_lo
    sigmas: list[float] = []
    profiles: list[tuple[FloatArray, FloatArray, float]] = []
    # Vertical edges x = j*sq between columns j-1 and j; horizontal edges y = i*sq.
    edges = [(0, j, i) for j in range(1, squares_x) for i in range(squares_y)]
    edges += [(1, i, j) for i in range(1, squares_y) for j in range(squares_x)]
    edges = [edge for edge in edges if _is_black_white(edge, black)]
    if len(edges) > cfg.max_edges_per_view:
        chosen = np.linspace(0, len(edges) - 1, cfg.max_edges_per_view).round().astype(int)
        edges = [edges[index] for index in chosen]
    for axis, line_index, cell in edges:
        before_black = black[cell, line_index - 1] if axis == 0 else black[line_index - 1, cell]
        normal_sign = 1.0 if before_black else -1.0  # d > 0 inside the white square
        across = (board_xy[:, axis] - line_index * square_m) * normal_sign
        along = board_xy[:, 1 - axis] - cell * square_m
        mask = (
            (along > along_lo)
            & (along < along_hi)
            & (across > -0.45 * square_m)
            & (across < across_max)
        )
        if np.count_nonzero(mask) < cfg.min_pixels_per_edge:
            continue
        middle = np.zeros((2, 3))
        middle[:, axis] = line_index * square_m
        middle[:, 1 - axis] = (cell + 0.5) * square_m
        middle[1, axis] += normal_sign * 1e-3
        ends, _ = cv2.projectPoints(middle, rvec, tvec, camera_matrix, distortion)
        ends = ends.reshape(2, 2)
        if np.any(ends < 0) or np.any(ends[:, 0] >= width) or np.any(ends[:, 1] >= height):
            continue
        px_per_m = float(np.linalg.norm(ends[1] - ends[0])) / 1e-3
        margin_px = margin_m * px_per_m
        if margin_px < cfg.min_margin_px:
            continue
        profiles.append((across[mask] * px_per_m, values[mask], margin_px))
    for fit in _fit_edges(profiles, cfg.max_sigma_px):
        if fit is not None and fit[0] < cfg.max_sigma_px * 0.99:
            sigmas.append(fit[0])
    return sigmas
