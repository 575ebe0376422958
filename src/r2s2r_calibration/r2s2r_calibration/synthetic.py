"""Synthetic calibration data with known answers, for the tests and the accuracy benchmark.

Nothing here is used by the solvers themselves: it plans board poses that cover the image and
the tilt directions the way an operator following the coverage guidance would, renders board
views (:func:`render_board_view`: known intrinsics, distortion, pose and blur) and scene depth
images of boxes by ray casting.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt
import open3d as o3d
from scipy.spatial.transform import Rotation

from r2s2r_calibration.geometry import (
    FloatArray,
    make_pose,
    pose_from_xyz_rpy,
    rvec_tvec_from_pose,
)
from r2s2r_calibration.intrinsics import BoardDetection
from r2s2r_calibration.registration.elements import BoxPrimitive, SceneElement

ImageArray = npt.NDArray[np.uint8]

TEST_CAMERA_MATRIX = np.array([[520.0, 0.0, 322.0], [0.0, 518.0, 243.0], [0.0, 0.0, 1.0]])
"""A 640x480 camera with a slightly off-centre principal point (px)."""
TEST_DISTORTION = np.array([-0.12, 0.05, 0.001, -0.0005, 0.0])
"""Moderate barrel distortion (k1, k2, p1, p2, k3)."""
TEST_IMAGE_SIZE = (640, 480)
"""(width, height) px."""


def cell_elements(n_bins: int = 2) -> list[SceneElement]:
    """Build a small work cell: table top, belt on it and open bins, with nominal poses.

    ``base_link`` is on the table top surface; x forward, z up.
    """
    table = SceneElement(
        name="table",
        boxes=[BoxPrimitive(size_m=(0.9, 0.7, 0.04), xyz_m=(0.0, 0.0, -0.02))],
        xyz_m=(0.45, 0.0, 0.0),
    )
    belt = SceneElement(
        name="belt",
        boxes=[BoxPrimitive(size_m=(0.7, 0.16, 0.05), xyz_m=(0.0, 0.0, 0.025))],
        xyz_m=(0.5, 0.18, 0.0),
    )
    wall = 0.006
    size_x, size_y, size_z = 0.16, 0.12, 0.08
    bin_boxes = [
        BoxPrimitive(size_m=(size_x, size_y, wall), xyz_m=(0.0, 0.0, wall / 2)),
        BoxPrimitive(size_m=(wall, size_y, size_z), xyz_m=((size_x - wall) / 2, 0.0, size_z / 2)),
        BoxPrimitive(size_m=(wall, size_y, size_z), xyz_m=(-(size_x - wall) / 2, 0.0, size_z / 2)),
        BoxPrimitive(size_m=(size_x, wall, size_z), xyz_m=(0.0, (size_y - wall) / 2, size_z / 2)),
        BoxPrimitive(size_m=(size_x, wall, size_z), xyz_m=(0.0, -(size_y - wall) / 2, size_z / 2)),
    ]
    bins = [
        SceneElement(name=f"bin_{index}", boxes=bin_boxes, xyz_m=(0.3 + 0.25 * index, -0.18, 0.0))
        for index in range(n_bins)
    ]
    return [table, belt, *bins]


def charuco_view_poses(
    board_size_m: tuple[float, float],
    camera_matrix: npt.ArrayLike,
    image_size: tuple[int, int],
    n_views: int,
    distance_m: float,
    max_tilt_rad: float = 0.5,
    seed: int = 0,
) -> list[FloatArray]:
    """Plan ``T_camera_board`` poses that cover the image grid and tilt about both axes.

    View ``i`` puts the board centre on the ray through cell ``i % 9`` of a 3x3 grid of image
    positions and tilts it alternately about the image x and y axes (both signs), with a small
    random roll and distance jitter.

    Args:
        board_size_m: (width, height) of the chessboard (m).
        camera_matrix: 3x3 K used to aim at image positions.
        image_size: (width, height) px.
        n_views: Number of poses.
        distance_m: Nominal camera-to-board distance (m).
        max_tilt_rad: Tilt magnitude (rad).
        seed: Jitter seed.

    Returns:
        The poses.

    """
    K = np.asarray(camera_matrix, dtype=float)
    width, height = image_size
    rng = np.random.default_rng(seed)
    half_board = 0.5 * np.array([board_size_m[0], board_size_m[1], 0.0])
    # Image positions the board centre aims at: inset so the board stays mostly in view.
    reach_u = max(0.0, 0.5 * width - 0.55 * board_size_m[0] * K[0, 0] / distance_m)
    reach_v = max(0.0, 0.5 * height - 0.55 * board_size_m[1] * K[1, 1] / distance_m)
    targets = [
        (K[0, 2] + col * reach_u, K[1, 2] + row * reach_v)
        for row in (-1, 0, 1)
        for col in (-1, 0, 1)
    ]
    tilts = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    poses = []
    for index in range(n_views):
        u, v = targets[index % len(targets)]
        tilt_x, tilt_y = tilts[index % len(tilts)]
        distance = distance_m * rng.uniform(0.9, 1.1)
        ray = np.array([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], 1.0])
        centre = ray / np.linalg.norm(ray) * distance
        angles = [
            tilt_x * max_tilt_rad * rng.uniform(0.8, 1.0),
            tilt_y * max_tilt_rad * rng.uniform(0.8, 1.0),
            rng.uniform(-0.15, 0.15),
        ]
        rotation = Rotation.from_euler("xyz", angles).as_matrix()
        poses.append(make_pose(rotation, centre - rotation @ half_board))
    return poses


def project_board_detection(
    board: cv2.aruco.CharucoBoard,
    camera_matrix: npt.ArrayLike,
    distortion: npt.ArrayLike,
    T_camera_board: npt.ArrayLike,
    image_size: tuple[int, int],
    noise_px: float = 0.0,
    seed: int = 0,
) -> BoardDetection:
    """Make a board detection by projecting the board corners (no image), with pixel noise.

    Corners behind the camera or outside the image are left out, as a detector would.
    """
    corners = np.asarray(board.getChessboardCorners(), dtype=float)
    pose = np.asarray(T_camera_board, dtype=float)
    in_camera = corners @ pose[:3, :3].T + pose[:3, 3]
    rvec, tvec = rvec_tvec_from_pose(pose)
    projected, _ = cv2.projectPoints(
        corners, rvec, tvec, np.asarray(camera_matrix, float), np.asarray(distortion, float)
    )
    pixels = projected.reshape(-1, 2)
    pixels = pixels + np.random.default_rng(seed).normal(0.0, noise_px, pixels.shape)
    width, height = image_size
    keep = (
        (in_camera[:, 2] > 0)
        & (pixels[:, 0] >= 0)
        & (pixels[:, 0] <= width - 1)
        & (pixels[:, 1] >= 0)
        & (pixels[:, 1] <= height - 1)
    )
    return BoardDetection(
        charuco_ids=np.flatnonzero(keep).astype(np.int32),
        image_points_px=pixels[keep],
        object_points_m=corners[keep],
        image_size_px=image_size,
    )


def render_depth(
    elements: list[tuple[SceneElement, FloatArray]],
    camera_matrix: npt.ArrayLike,
    image_size: tuple[int, int],
    T_base_camera: FloatArray,
    noise_std_m: float = 0.0,
    seed: int = 0,
) -> npt.NDArray[np.float32]:
    """Ray-cast a 32FC1 depth image (m along the optical axis; NaN where nothing is hit).

    Args:
        elements: Scene elements with their *true* ``T_base_element``.
        camera_matrix: 3x3 K of the depth camera (pinhole).
        image_size: (width, height) px.
        T_base_camera: Depth camera optical frame in ``base_link``.
        noise_std_m: Additive Gaussian depth noise (m).
        seed: Noise seed.

    """
    scene = o3d.t.geometry.RaycastingScene()
    for element, T_base_element in elements:
        for box in element.boxes:
            mesh = o3d.geometry.TriangleMesh.create_box(*box.size_m)
            mesh.translate(-0.5 * np.asarray(box.size_m))
            mesh.transform(T_base_element @ pose_from_xyz_rpy(box.xyz_m, box.rpy_rad))
            scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(mesh))
    K = np.asarray(camera_matrix, dtype=float)
    width, height = image_size
    u, v = np.meshgrid(np.arange(width, dtype=float), np.arange(height, dtype=float))
    directions_camera = np.stack(
        [(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], axis=-1
    )
    T = np.asarray(T_base_camera, dtype=float)
    directions = directions_camera @ T[:3, :3].T
    origins = np.broadcast_to(T[:3, 3], directions.shape)
    rays = np.concatenate([origins, directions], axis=-1).astype(np.float32)
    hit = scene.cast_rays(o3d.core.Tensor.from_numpy(rays))["t_hit"].numpy()
    # Ray direction has unit z in the camera frame, so the ray parameter is the depth.
    depth = np.where(np.isfinite(hit), hit, np.nan).astype(np.float32)
    if noise_std_m > 0:
        noise = np.random.default_rng(seed).normal(0.0, noise_std_m, depth.shape)
        depth = (depth + noise).astype(np.float32)
    return depth


def render_board_view(
    board: cv2.aruco.CharucoBoard,
    camera_matrix: npt.ArrayLike,
    distortion: npt.ArrayLike,
    pose: npt.ArrayLike,
    image_size: tuple[int, int],
    blur_sigma: float,
    *,
    noise_std: float = 0.0,
    seed: int = 0,
    supersample: int = 3,
    background: int = 110,
    paper_margin_squares: float = 0.5,
) -> ImageArray:
    """Synthesize a grey camera image of the board.

    The printed side faces the board's -z direction (a camera sees it when it is on the board's
    -z side); the back renders as blank paper. The board plane is ray-cast exactly through the
    distortion model (each sensor pixel is undistorted, intersected with the board plane and the
    board texture is sampled there), rendered at ``supersample`` x resolution, blurred with a
    Gaussian of ``blur_sigma`` (sensor px), and area-averaged down to the sensor grid, which
    models pixel integration.

    Args:
        board: The board.
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        pose: ``T_camera_board`` (4x4, m).
        image_size: (width, height) in px.
        blur_sigma: Gaussian optical blur sigma (px); 0 for none.
        noise_std: Additive Gaussian noise std (grey levels).
        seed: Noise seed.
        supersample: Rendering oversampling factor (>= 1).
        background: Grey level outside the printed paper.
        paper_margin_squares: White paper margin around the chessboard (squares).

    Returns:
        uint8 image of shape (height, width).

    """
    K = np.asarray(camera_matrix, dtype=float)
    dist = np.asarray(distortion, dtype=float).reshape(-1)
    T = np.asarray(pose, dtype=float)
    width, height = image_size
    squares_x, squares_y = board.getChessboardSize()
    square_m = float(board.getSquareLength())
    # Texel density: finer than one supersampled pixel, so the texture adds no blur.
    corners_board = np.array(
        [[0, 0, 0], [squares_x, 0, 0], [0, squares_y, 0], [squares_x, squares_y, 0]], float
    )
    corners_cam = (T[:3, :3] @ (corners_board * square_m).T).T + T[:3, 3]
    depth = np.maximum(corners_cam[:, 2], 1e-3)
    projected = corners_cam[:, :2] / depth[:, None] * K[0, 0]
    span_px = np.max(np.ptp(projected, axis=0)) / min(squares_x, squares_y)
    texels_per_square = int(np.clip(2.0 * span_px * supersample, 60, 800))
    margin_texels = round(paper_margin_squares * texels_per_square)
    chessboard = board.generateImage(
        (squares_x * texels_per_square, squares_y * texels_per_square), marginSize=0
    )
    texture = np.asarray(
        cv2.copyMakeBorder(
            chessboard,
            margin_texels,
            margin_texels,
            margin_texels,
            margin_texels,
            cv2.BORDER_CONSTANT,
            value=255,
        ),
        dtype=np.float32,
    )
    if float(T[:3, 2] @ T[:3, 3]) <= 0.0:
        texture[:] = 255.0  # the camera sees the blank back of the board
    # Undistorted normalized coordinates of every sensor pixel centre, upsampled (smooth map).
    grid_u, grid_v = np.meshgrid(
        np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32)
    )
    pixels = np.stack([grid_u, grid_v], axis=-1).reshape(-1, 1, 2)
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 1e-7)
    normalized = cv2.undistortPoints(pixels, K, dist, None, None, None, criteria)
    normalized = normalized.reshape(height, width, 2).astype(np.float32)
    # Ray / plane intersection: [x, y, 1] ~ inv([r1 r2 t]) @ [xn, yn, 1], positive depth only;
    # board texel coordinates are then a per-pixel projective map of (xn, yn).
    inverse = np.linalg.inv(np.column_stack([T[:3, 0], T[:3, 1], T[:3, 3]]))
    texel_scale = texels_per_square / square_m
    homogeneous = normalized @ inverse[:, :2].T.astype(np.float32) + inverse[:, 2].astype(
        np.float32
    )
    visible = homogeneous[..., 2] > 1e-9
    safe_w = np.where(visible, homogeneous[..., 2], np.float32(1.0))
    offset = np.float32(margin_texels - 0.5)
    map_x1 = np.where(visible, homogeneous[..., 0] / safe_w * texel_scale + offset, -1e4)
    map_y1 = np.where(visible, homogeneous[..., 1] / safe_w * texel_scale + offset, -1e4)
    size_ss = (width * supersample, height * supersample)
    map_x = cv2.resize(map_x1.astype(np.float32), size_ss, interpolation=cv2.INTER_LINEAR)
    map_y = cv2.resize(map_y1.astype(np.float32), size_ss, interpolation=cv2.INTER_LINEAR)
    rendered = cv2.remap(
        texture,
        map_x,
        map_y,
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=float(background),
    )
    if blur_sigma > 0:
        rendered = cv2.GaussianBlur(rendered, (0, 0), blur_sigma * supersample)
    if supersample > 1:
        rendered = cv2.resize(rendered, (width, height), interpolation=cv2.INTER_AREA)
    if noise_std > 0:
        rng = np.random.default_rng(seed)
        rendered = np.asarray(rendered, dtype=np.float32) + rng.normal(
            0.0, noise_std, (height, width)
        ).astype(np.float32)
    return np.clip(np.rint(rendered), 0, 255).astype(np.uint8)
