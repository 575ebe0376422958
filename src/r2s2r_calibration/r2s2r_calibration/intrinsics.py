"""Camera intrinsics and distortion from board views, with coverage guidance and refusal.

Two kinds of board, one frame convention (board frame at the top-left corner of the printed
chessboard, x along the squares to the right, y down the printed image, z into the board):

- a :class:`cv2.aruco.CharucoBoard` (OpenCV 5): ``CharucoDetector`` + ``board.matchImagePoints``;
  partial views work, but its markers need ~3 px per marker bit to decode;
- a plain chessboard (:class:`ChessboardConfig`): ``cv2.findChessboardCornersSB``, which finds
  the corners of squares only 6-8 px wide under 1-1.5 px of blur, where ChArUco markers are
  unreadable (small, low-resolution cameras such as the 128 px cell cameras). The whole board
  must be in view; with one odd and one even number of squares the colour of the first square
  (black) fixes the board's orientation, so every view gets the same board frame.

Calibration uses ``cv2.calibrateCameraExtended`` (pinhole, distortion ``k1, k2, p1, p2, k3``).

A calibration is refused (specific :mod:`r2s2r_calibration.errors`) rather than returned poor:
too few views detecting the board, too few *distinct* views, image regions or tilt directions
not covered, a reprojection RMS over ``max_rms_px`` or a focal length whose standard deviation
is over ``max_focal_rel_std``. The refusal message says what to capture next.

Views with known intrinsics, distortion, pose and blur for the tests and the benchmark are
rendered by :func:`r2s2r_calibration.synthetic.render_board_view`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigModel

from r2s2r_calibration.errors import (
    BoardNotDetectedError,
    PoorCoverageError,
    ResidualTooLargeError,
    TooFewViewsError,
)
from r2s2r_calibration.geometry import FloatArray, pose_from_rvec_tvec

# Names of the cells of a 3x3 image grid, row-major, used in guidance messages.
_CELL_NAMES_3X3 = (
    ("top-left corner", "top edge", "top-right corner"),
    ("left edge", "centre", "right edge"),
    ("bottom-left corner", "bottom edge", "bottom-right corner"),
)


class CharucoBoardConfig(ConfigModel):
    """Geometry of the printed ChArUco calibration board."""

    squares_x: int = Field(7, ge=3, le=64, description="Chessboard squares along the board x.")
    squares_y: int = Field(5, ge=3, le=64, description="Chessboard squares along the board y.")
    square_length_m: float = Field(
        0.04, gt=0.0, le=1.0, description="Printed side of one chessboard square (m)."
    )
    marker_length_m: float = Field(
        0.02, gt=0.0, le=1.0, description="Printed side of one ArUco marker (m)."
    )
    dictionary: str = Field(
        "DICT_4X4_50", description="cv2.aruco predefined dictionary name, e.g. DICT_4X4_50."
    )

    @field_validator("dictionary")
    @classmethod
    def _known_dictionary(cls, value: str) -> str:
        if not value.startswith("DICT_") or not hasattr(cv2.aruco, value):
            raise ValueError(f"unknown ArUco dictionary {value!r}; expected e.g. 'DICT_4X4_50'")
        return value

    @model_validator(mode="after")
    def _marker_fits(self) -> CharucoBoardConfig:
        if self.marker_length_m >= self.square_length_m:
            raise ValueError(
                f"marker_length_m = {self.marker_length_m} must be smaller than "
                f"square_length_m = {self.square_length_m}"
            )
        return self

    @property
    def margin_fraction(self) -> float:
        """White margin between a square edge and its marker, as a fraction of the square."""
        return (self.square_length_m - self.marker_length_m) / (2.0 * self.square_length_m)


class ChessboardConfig(ConfigModel):
    """Geometry of a printed plain chessboard (the first, top-left square is black)."""

    squares_x: int = Field(7, ge=3, le=64, description="Squares along the board x.")
    squares_y: int = Field(6, ge=3, le=64, description="Squares along the board y.")
    square_length_m: float = Field(
        0.04, gt=0.0, le=1.0, description="Printed side of one square (m)."
    )

    @model_validator(mode="after")
    def _orientation_fixed(self) -> ChessboardConfig:
        if (self.squares_x + self.squares_y) % 2 == 0:
            raise ValueError(
                f"squares_x = {self.squares_x}, squares_y = {self.squares_y}: expected one odd "
                "and one even count (otherwise the board's orientation is ambiguous)"
            )
        return self

    @property
    def pattern_size(self) -> tuple[int, int]:
        """Inner corners (columns, rows), as OpenCV's chessboard functions take them."""
        return (self.squares_x - 1, self.squares_y - 1)

    def object_points(self) -> FloatArray:
        """(N, 3) inner corners in the board frame, row-major (corner id = row * cols + col)."""
        cols, rows = self.pattern_size
        grid = np.mgrid[1 : rows + 1, 1 : cols + 1].reshape(2, -1).T[:, ::-1]
        return np.column_stack([grid * self.square_length_m, np.zeros(len(grid))])

    def getChessboardSize(self) -> tuple[int, int]:  # noqa: N802 (CharucoBoard's spelling)
        """(squares_x, squares_y), like :meth:`cv2.aruco.CharucoBoard.getChessboardSize`."""
        return (self.squares_x, self.squares_y)

    def getSquareLength(self) -> float:  # noqa: N802 (CharucoBoard's spelling)
        """Square side (m), like :meth:`cv2.aruco.CharucoBoard.getSquareLength`."""
        return self.square_length_m


CalibrationBoard = cv2.aruco.CharucoBoard | ChessboardConfig
"""A board the calibrations accept."""


def make_board(config: CharucoBoardConfig) -> cv2.aruco.CharucoBoard:
    """Build the OpenCV board object described by ``config``."""
    dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, config.dictionary))
    return cv2.aruco.CharucoBoard(
        (config.squares_x, config.squares_y),
        config.square_length_m,
        config.marker_length_m,
        dictionary,
    )


class IntrinsicsConfig(ConfigModel):
    """Acceptance thresholds of the intrinsics calibration."""

    min_views: int = Field(6, ge=3, le=500, description="Distinct detected views required.")
    min_corners_per_view: int = Field(
        8, ge=4, le=10000, description="ChArUco corners a view must show to be used."
    )
    duplicate_view_shift_px: float = Field(
        3.0,
        ge=0.0,
        le=100.0,
        description="Views whose shared corners moved less than this (mean, px) are duplicates.",
    )
    coverage_grid: int = Field(3, ge=2, le=8, description="Image split into grid x grid cells.")
    min_corners_per_cell: int = Field(
        4, ge=1, le=10000, description="Corners (all views) for a grid cell to count as covered."
    )
    min_covered_cell_fraction: float = Field(
        0.75, ge=0.0, le=1.0, description="Fraction of grid cells that must be covered."
    )
    min_tilt_rad: float = Field(
        0.26,
        ge=0.0,
        le=1.4,
        description="Some view must tilt the board at least this much about each image axis.",
    )
    max_rms_px: float = Field(
        0.5, gt=0.0, le=10.0, description="Refuse a calibration with a larger RMS residual (px)."
    )
    max_focal_rel_std: float = Field(
        0.005, gt=0.0, le=1.0, description="Refuse when std(fx)/fx or std(fy)/fy exceeds this."
    )
    max_principal_point_std_px: float = Field(
        1.0, gt=0.0, le=100.0, description="Refuse when std(cx) or std(cy) exceeds this (px)."
    )
    zero_tangential: bool = Field(
        False,
        description="Hold p1 = p2 = 0 (when tangential distortion moves corners by far less than "
        "their noise it only correlates with the principal point).",
    )
    reject_view_rms_factor: float = Field(
        0.0,
        ge=0.0,
        le=100.0,
        description="Drop views whose reprojection RMS exceeds this times the median view's and "
        "calibrate again (0: keep every view).",
    )
    fix_k3: bool = Field(
        False,
        description="Hold k3 at 0 (few corners per view or a narrow lens: k3 is then not "
        "observable and only inflates the focal length's uncertainty).",
    )


@dataclass(frozen=True)
class BoardDetection:
    """ChArUco corners found in one image.

    Attributes:
        charuco_ids: Corner ids, shape (N,).
        image_points_px: Sub-pixel corner positions in the (distorted) image, shape (N, 2).
        object_points_m: The same corners in the board frame (m), shape (N, 3).
        image_size_px: (width, height) of the image.

    """

    charuco_ids: npt.NDArray[np.int32]
    image_points_px: FloatArray
    object_points_m: FloatArray
    image_size_px: tuple[int, int]


@dataclass
class CoverageReport:
    """Which parts of the image and which board tilts the views cover.

    Attributes:
        cell_corner_counts: Corners detected per grid cell over all views, (grid, grid) row-major.
        missing_cells: Human names of the cells with too few corners.
        max_tilt_about_x_rad: Largest |tilt| of the board about the image x axis (top/bottom).
        max_tilt_about_y_rad: Largest |tilt| of the board about the image y axis (left/right).
        missing_tilts: Tilt directions not covered, phrased as instructions.

    """

    cell_corner_counts: npt.NDArray[np.int64]
    missing_cells: list[str]
    max_tilt_about_x_rad: float = float("nan")
    max_tilt_about_y_rad: float = float("nan")
    missing_tilts: list[str] = field(default_factory=list)

    def guidance(self) -> str:
        """One sentence per missing view kind (empty when coverage is complete)."""
        lines = []
        if self.missing_cells:
            lines.append("move the board to cover the image " + ", ".join(self.missing_cells))
        lines.extend(self.missing_tilts)
        return "; ".join(lines)


@dataclass
class IntrinsicsResult:
    """A calibrated pinhole camera with distortion.

    Attributes:
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        image_size_px: (width, height).
        rms_px: Overall reprojection RMS (px).
        per_view_rms_px: Reprojection RMS of each used view (px).
        intrinsics_std: Standard deviations of (fx, fy, cx, cy, k1, k2, p1, p2, k3).
        board_poses: ``T_camera_board`` of each used view.
        used_view_indices: Indices (into the input list) of the views used.
        detections: Board detections of the used views.
        n_views_total: Number of input views.
        coverage: Coverage of the used views.

    """

    camera_matrix: FloatArray
    distortion: FloatArray
    image_size_px: tuple[int, int]
    rms_px: float
    per_view_rms_px: FloatArray
    intrinsics_std: FloatArray
    board_poses: list[FloatArray]
    used_view_indices: list[int]
    detections: list[BoardDetection]
    n_views_total: int
    coverage: CoverageReport

    @property
    def fx_px(self) -> float:
        """Focal length along x (px)."""
        return float(self.camera_matrix[0, 0])

    @property
    def fy_px(self) -> float:
        """Focal length along y (px)."""
        return float(self.camera_matrix[1, 1])

    @property
    def cx_px(self) -> float:
        """Principal point x (px)."""
        return float(self.camera_matrix[0, 2])

    @property
    def cy_px(self) -> float:
        """Principal point y (px)."""
        return float(self.camera_matrix[1, 2])


def detect_board(
    board: CalibrationBoard, image: npt.NDArray[np.uint8], min_corners: int = 4
) -> BoardDetection | None:
    """Detect the board's corners in one image.

    Args:
        board: A ChArUco board or a plain chessboard (:class:`ChessboardConfig`).
        image: 8-bit grey or BGR image.
        min_corners: Fewer corners than this counts as "not detected".

    Returns:
        The detection, or None when the board is not seen (or seen with too few corners).

    Raises:
        ValueError: If the image is not an 8-bit 2-D grey or 3-channel image.

    """
    if image.dtype != np.uint8 or image.ndim not in (2, 3):
        raise ValueError(
            f"image has dtype {image.dtype} and shape {image.shape}; "
            "expected uint8 grey (H, W) or BGR (H, W, 3)"
        )
    grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    if isinstance(board, ChessboardConfig):
        return detect_chessboard(board, np.asarray(grey, dtype=np.uint8))
    detector = cv2.aruco.CharucoDetector(board)
    corners, ids, _, _ = detector.detectBoard(grey)
    if ids is None or corners is None or len(ids) < min_corners:
        return None
    object_points, image_points = board.matchImagePoints(corners, ids)  # type: ignore[call-overload]
    return BoardDetection(
        charuco_ids=np.asarray(ids, dtype=np.int32).reshape(-1),
        image_points_px=np.asarray(image_points, dtype=np.float64).reshape(-1, 2),
        object_points_m=np.asarray(object_points, dtype=np.float64).reshape(-1, 3),
        image_size_px=(grey.shape[1], grey.shape[0]),
    )


def detect_chessboard(
    board: ChessboardConfig, grey: npt.NDArray[np.uint8], max_homography_error_px: float = 2.0
) -> BoardDetection | None:
    """Find a whole plain chessboard in a grey image, in the board's own corner order.

    ``findChessboardCornersSB`` orders the corners from either end of the board; the square
    next to the first corner must be black (the board definition), else the order is reversed.
    A grid whose corners stray more than ``max_homography_error_px`` from a plane's projection
    (lens distortion stays well below it over a board) is a false detection and refused.
    Corners are then refined by :func:`refine_chessboard_corners`.

    Returns:
        The detection (every inner corner), or None when the board is not (wholly) seen.

    """
    flags = cv2.CALIB_CB_EXHAUSTIVE | cv2.CALIB_CB_ACCURACY | cv2.CALIB_CB_NORMALIZE_IMAGE
    found, corners = cv2.findChessboardCornersSB(grey, board.pattern_size, flags=flags)
    if not found or corners is None:
        return None
    points = np.asarray(corners, dtype=np.float64).reshape(-1, 2)
    objects = board.object_points()
    # A grid latched onto other edges (the board's outline, the scene) is not a plane's
    # projection: refuse views whose corners stray from the best homography.
    homography, _ = cv2.findHomography(objects[:, :2], points)
    if homography is None:
        return None
    mapped = cv2.perspectiveTransform(objects[:, :2].reshape(-1, 1, 2), homography).reshape(-1, 2)
    if float(np.max(np.linalg.norm(mapped - points, axis=1))) > max_homography_error_px:
        return None
    if _first_square_brightness(board, grey, points, objects) > 0:
        points = points[::-1].copy()
    points = refine_chessboard_corners(grey, points, board.pattern_size)
    return BoardDetection(
        charuco_ids=np.arange(len(points), dtype=np.int32),
        image_points_px=points,
        object_points_m=objects,
        image_size_px=(grey.shape[1], grey.shape[0]),
    )


def _corner_spacing_px(points: FloatArray, pattern_size: tuple[int, int]) -> FloatArray:
    """Distance (px) from each inner corner to its nearest grid neighbour, shape (N,)."""
    cols, rows = pattern_size
    grid = points.reshape(rows, cols, 2)
    spacing = np.full((rows, cols), np.inf)
    along_x = np.linalg.norm(np.diff(grid, axis=1), axis=2)
    along_y = np.linalg.norm(np.diff(grid, axis=0), axis=2)
    spacing[:, :-1] = np.minimum(spacing[:, :-1], along_x)
    spacing[:, 1:] = np.minimum(spacing[:, 1:], along_x)
    spacing[:-1, :] = np.minimum(spacing[:-1, :], along_y)
    spacing[1:, :] = np.minimum(spacing[1:, :], along_y)
    return spacing.reshape(-1)


def refine_chessboard_corners(
    grey: npt.NDArray[np.uint8],
    points: FloatArray,
    pattern_size: tuple[int, int],
    window_fraction: float = 0.5,
    max_shift_px: float = 1.0,
) -> FloatArray:
    """Refine chessboard corners with ``cv2.cornerSubPix`` in a window sized to each corner.

    ``findChessboardCornersSB`` leaves ~0.2 px of corner error (and a scale bias) on squares
    only 4-10 px wide; the gradient-orthogonality refinement halves it when its window spans
    about half the local square (never reaching a neighbouring corner's edges). A corner the
    refinement moves more than ``max_shift_px`` keeps its first position.

    Args:
        grey: The 8-bit grey image.
        points: (N, 2) corners, row-major over ``pattern_size`` (columns, rows).
        pattern_size: Inner corners (columns, rows).
        window_fraction: Half window = this fraction of the corner's nearest-neighbour spacing.
        max_shift_px: Largest accepted refinement step (px).

    Returns:
        The refined (N, 2) corners.

    """
    spacing = _corner_spacing_px(points, pattern_size)
    refined = points.copy()
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_COUNT, 50, 1e-4)
    for index, point in enumerate(points):
        half = int(np.clip(np.floor(window_fraction * spacing[index]), 2, 8))
        moved = cv2.cornerSubPix(
            grey, point.astype(np.float32).reshape(1, 1, 2), (half, half), (-1, -1), criteria
        ).reshape(2)
        if float(np.linalg.norm(moved - point)) <= max_shift_px:
            refined[index] = moved
    return refined


def _first_square_brightness(
    board: ChessboardConfig, grey: npt.NDArray[np.uint8], points: FloatArray, objects: FloatArray
) -> float:
    """Mean grey of square (0, 0) minus square (0, 1) under the corners' homography."""
    homography, _ = cv2.findHomography(objects[:, :2], points)
    side = board.square_length_m
    centres = np.array([[0.5 * side, 0.5 * side], [1.5 * side, 0.5 * side]])
    offsets = np.array([[dx, dy] for dx in (-0.2, 0.0, 0.2) for dy in (-0.2, 0.0, 0.2)]) * side
    samples = []
    for centre in centres:
        board_xy = (centre + offsets).reshape(-1, 1, 2)
        pixels = cv2.perspectiveTransform(board_xy, homography).reshape(-1, 2)
        cols = np.clip(np.rint(pixels[:, 0]).astype(int), 0, grey.shape[1] - 1)
        rows = np.clip(np.rint(pixels[:, 1]).astype(int), 0, grey.shape[0] - 1)
        samples.append(float(np.mean(grey[rows, cols])))
    return samples[0] - samples[1]


def _cell_counts(
    detections: list[BoardDetection], image_size_px: tuple[int, int], grid: int
) -> npt.NDArray[np.int64]:
    width, height = image_size_px
    counts = np.zeros((grid, grid), dtype=np.int64)
    for detection in detections:
        cols = np.clip((detection.image_points_px[:, 0] / width * grid).astype(int), 0, grid - 1)
        rows = np.clip((detection.image_points_px[:, 1] / height * grid).astype(int), 0, grid - 1)
        np.add.at(counts, (rows, cols), 1)
    return counts


def _cell_name(row: int, col: int, grid: int) -> str:
    if grid == 3:
        return _CELL_NAMES_3X3[row][col]
    return f"cell (row {row + 1}, column {col + 1} of {grid})"


def coverage_report(
    detections: list[BoardDetection],
    image_size_px: tuple[int, int],
    config: IntrinsicsConfig,
    board_poses: list[FloatArray] | None = None,
) -> CoverageReport:
    """Summarise which image regions and board tilts a set of views covers.

    Args:
        detections: Detections of the views.
        image_size_px: (width, height).
        config: Grid size and thresholds.
        board_poses: ``T_camera_board`` per view (after calibration) for the tilt check.

    Returns:
        The report; :meth:`CoverageReport.guidance` phrases what is missing.

    """
    counts = _cell_counts(detections, image_size_px, config.coverage_grid)
    missing = [
        _cell_name(row, col, config.coverage_grid)
        for row in range(config.coverage_grid)
        for col in range(config.coverage_grid)
        if counts[row, col] < config.min_corners_per_cell
    ]
    report = CoverageReport(cell_corner_counts=counts, missing_cells=missing)
    if board_poses:
        normals = np.array([pose[:3, 2] for pose in board_poses])
        tilt_x = np.arctan2(normals[:, 1], normals[:, 2])
        tilt_y = np.arctan2(normals[:, 0], normals[:, 2])
        report.max_tilt_about_x_rad = float(np.max(np.abs(tilt_x)))
        report.max_tilt_about_y_rad = float(np.max(np.abs(tilt_y)))
        limit_deg = np.degrees(config.min_tilt_rad)
        if report.max_tilt_about_x_rad < config.min_tilt_rad:
            report.missing_tilts.append(
                f"tilt the board top-away and bottom-away by >= {limit_deg:.0f} deg "
                f"(largest so far {np.degrees(report.max_tilt_about_x_rad):.1f} deg)"
            )
        if report.max_tilt_about_y_rad < config.min_tilt_rad:
            report.missing_tilts.append(
                f"tilt the board left-away and right-away by >= {limit_deg:.0f} deg "
                f"(largest so far {np.degrees(report.max_tilt_about_y_rad):.1f} deg)"
            )
    return report


def _is_duplicate(
    candidate: BoardDetection, kept: list[BoardDetection], threshold_px: float
) -> bool:
    for other in kept:
        shared, index_a, index_b = np.intersect1d(
            candidate.charuco_ids, other.charuco_ids, return_indices=True
        )
        if len(shared) < 0.5 * min(len(candidate.charuco_ids), len(other.charuco_ids)):
            continue
        shift = np.linalg.norm(
            candidate.image_points_px[index_a] - other.image_points_px[index_b], axis=1
        )
        if float(np.mean(shift)) < threshold_px:
            return True
    return False


def _calibrate(
    detections: list[BoardDetection], image_size: tuple[int, int], cfg: IntrinsicsConfig
) -> tuple[
    float, FloatArray, FloatArray, list[FloatArray], list[FloatArray], FloatArray, FloatArray
]:
    """``cv2.calibrateCameraExtended`` over the detections with the configured model."""
    object_points = [d.object_points_m.astype(np.float32).reshape(-1, 1, 3) for d in detections]
    image_points = [d.image_points_px.astype(np.float32).reshape(-1, 1, 2) for d in detections]
    criteria = (cv2.TERM_CRITERIA_COUNT + cv2.TERM_CRITERIA_EPS, 100, 1e-12)
    (rms, camera_matrix, distortion, rvecs, tvecs, std_intrinsics, _, per_view) = (
        cv2.calibrateCameraExtended(  # type: ignore[call-overload]
            object_points,
            image_points,
            image_size,
            None,
            None,
            flags=(cv2.CALIB_FIX_K3 if cfg.fix_k3 else 0)
            | (cv2.CALIB_ZERO_TANGENT_DIST if cfg.zero_tangential else 0),
            criteria=criteria,
        )
    )
    return (
        float(rms),
        np.asarray(camera_matrix, dtype=float),
        np.asarray(distortion, dtype=float),
        list(rvecs),
        list(tvecs),
        np.asarray(std_intrinsics, dtype=float),
        np.asarray(per_view, dtype=float).reshape(-1),
    )


def calibrate_intrinsics(
    board: CalibrationBoard,
    images: list[npt.NDArray[np.uint8]],
    config: IntrinsicsConfig | None = None,
) -> IntrinsicsResult:
    """Calibrate K and (k1, k2, p1, p2, k3) from board views.

    Args:
        board: The board shown in the views (ChArUco or :class:`ChessboardConfig`).
        images: 8-bit images, all of the same size.
        config: Thresholds; defaults to :class:`IntrinsicsConfig`.

    Returns:
        The calibration.

    Raises:
        ValueError: If ``images`` is empty or the sizes differ.
        BoardNotDetectedError: If no view shows the board.
        TooFewViewsError: If fewer than ``min_views`` views detect the board or are distinct.
        PoorCoverageError: If image regions or tilt directions are not covered.
        ResidualTooLargeError: If the RMS or the focal-length uncertainty is over its limit.

    """
    cfg = config or IntrinsicsConfig()
    if not images:
        raise ValueError("images is empty; expected at least one view of the board")
    sizes = {(image.shape[1], image.shape[0]) for image in images}
    if len(sizes) != 1:
        raise ValueError(f"images have different sizes {sorted(sizes)}; expected one size")
    image_size = sizes.pop()
    detected: list[tuple[int, BoardDetection]] = []
    for index, image in enumerate(images):
        detection = detect_board(board, image, cfg.min_corners_per_view)
        if detection is not None:
            detected.append((index, detection))
    total = len(images)
    if not detected:
        raise BoardNotDetectedError(
            f"0 of {total} views detected the board; check that the board definition "
            "(squares, dictionary) matches the print and that it is in focus and lit"
        )
    if len(detected) < cfg.min_views:
        coverage = coverage_report([d for _, d in detected], image_size, cfg)
        hint = coverage.guidance() or "show the whole board in more views"
        raise TooFewViewsError(
            f"{len(detected)} of {total} views detected the board (need {cfg.min_views}); {hint}"
        )
    kept: list[tuple[int, BoardDetection]] = []
    for index, detection in detected:
        if not _is_duplicate(detection, [d for _, d in kept], cfg.duplicate_view_shift_px):
            kept.append((index, detection))
    if len(kept) < cfg.min_views:
        raise TooFewViewsError(
            f"only {len(kept)} of {len(detected)} detected views are distinct (the others "
            f"repeat a view within {cfg.duplicate_view_shift_px} px; need {cfg.min_views}); "
            "move and tilt the board between captures"
        )
    detections = [d for _, d in kept]
    coverage = coverage_report(detections, image_size, cfg)
    n_cells = cfg.coverage_grid**2
    covered = n_cells - len(coverage.missing_cells)
    if covered < cfg.min_covered_cell_fraction * n_cells:
        raise PoorCoverageError(
            f"board corners cover {covered} of {n_cells} image regions (need "
            f"{int(np.ceil(cfg.min_covered_cell_fraction * n_cells))}); {coverage.guidance()}"
        )
    (rms, camera_matrix, distortion, rvecs, tvecs, std_intrinsics, per_view) = _calibrate(
        detections, image_size, cfg
    )
    if cfg.reject_view_rms_factor > 0:
        keep = per_view <= cfg.reject_view_rms_factor * float(np.median(per_view))
        if not keep.all() and np.count_nonzero(keep) >= cfg.min_views:
            kept = [view for view, ok in zip(kept, keep, strict=True) if ok]
            detections = [d for _, d in kept]
            (rms, camera_matrix, distortion, rvecs, tvecs, std_intrinsics, per_view) = _calibrate(
                detections, image_size, cfg
            )
    poses = [pose_from_rvec_tvec(r, t) for r, t in zip(rvecs, tvecs, strict=True)]
    coverage = coverage_report(detections, image_size, cfg, poses)
    if coverage.missing_tilts:
        raise PoorCoverageError(
            "the views do not tilt the board enough to fix the focal length; " + coverage.guidance()
        )
    std = np.asarray(std_intrinsics, dtype=float).reshape(-1)[:9]
    result = IntrinsicsResult(
        camera_matrix=np.asarray(camera_matrix, dtype=float),
        distortion=np.asarray(distortion, dtype=float).reshape(-1)[:5],
        image_size_px=image_size,
        rms_px=float(rms),
        per_view_rms_px=np.asarray(per_view, dtype=float).reshape(-1),
        intrinsics_std=std,
        board_poses=poses,
        used_view_indices=[index for index, _ in kept],
        detections=detections,
        n_views_total=total,
        coverage=coverage,
    )
    if result.rms_px > cfg.max_rms_px:
        worst = int(np.argmax(result.per_view_rms_px))
        raise ResidualTooLargeError(
            f"reprojection RMS {result.rms_px:.3f} px exceeds max_rms_px = {cfg.max_rms_px}; "
            f"worst view is #{result.used_view_indices[worst]} "
            f"({result.per_view_rms_px[worst]:.3f} px): check for motion blur or a bent board"
        )
    rel_std = max(std[0] / result.fx_px, std[1] / result.fy_px)
    if rel_std > cfg.max_focal_rel_std:
        raise ResidualTooLargeError(
            f"focal length relative std {rel_std:.4f} exceeds max_focal_rel_std = "
            f"{cfg.max_focal_rel_std}; add views closer to the camera and more tilted"
        )
    pp_std = max(std[2], std[3])
    if pp_std > cfg.max_principal_point_std_px:
        raise ResidualTooLargeError(
            f"principal point std {pp_std:.2f} px exceeds max_principal_point_std_px = "
            f"{cfg.max_principal_point_std_px}; add views with the board in the image corners"
        )
    return result


def jackknife_intrinsics(
    detections: list[BoardDetection],
    image_size: tuple[int, int],
    config: IntrinsicsConfig,
    groups: int,
) -> list[tuple[FloatArray, FloatArray]]:
    """Delete-a-group jackknife replicates of a calibration: ``(K, distortion)`` per group.

    View ``i`` belongs to group ``i % groups``; replicate ``g`` is the calibration of every view
    outside group ``g`` with the same model. Fewer than two groups, or fewer views than
    ``groups + config.min_views``, give no replicates (a replicate would not be a calibration).
    """
    if groups < 2 or len(detections) < groups + config.min_views:
        return []
    replicates = []
    for group in range(groups):
        kept = [d for index, d in enumerate(detections) if index % groups != group]
        _, camera_matrix, distortion, *_ = _calibrate(kept, image_size, config)
        replicates.append((camera_matrix, distortion.reshape(-1)[:5]))
    return replicates


def board_pose_in_camera(
    detection: BoardDetection, camera_matrix: FloatArray, distortion: FloatArray
) -> tuple[FloatArray, float]:
    """Estimate ``T_camera_board`` of one detection with known intrinsics (solvePnP).

    Returns:
        The pose and the view's reprojection RMS (px).

    Raises:
        BoardNotDetectedError: If the detection has fewer than 4 corners or PnP fails.

    """
    if len(detection.charuco_ids) < 4:
        raise BoardNotDetectedError(
            f"{len(detection.charuco_ids)} board corners detected; need at least 4 for a pose"
        )
    ok, rvec, tvec = cv2.solvePnP(
        detection.object_points_m, detection.image_points_px, camera_matrix, distortion
    )
    if not ok:
        raise BoardNotDetectedError("solvePnP failed for the board view; show more of the board")
    rvec, tvec = cv2.solvePnPRefineLM(
        detection.object_points_m, detection.image_points_px, camera_matrix, distortion, rvec, tvec
    )
    projected, _ = cv2.projectPoints(
        detection.object_points_m, rvec, tvec, camera_matrix, distortion
    )
    residual = projected.reshape(-1, 2) - detection.image_points_px
    rms = float(np.sqrt(np.mean(np.sum(residual**2, axis=1))))
    return pose_from_rvec_tvec(rvec, tvec), rms
