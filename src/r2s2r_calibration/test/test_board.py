"""The operator's chessboard: twin rendering, detection in the board's own frame, board steps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.intrinsics import (
    ChessboardConfig,
    detect_board,
    refine_chessboard_corners,
)
from r2s2r_calibration.sim_cell_client import SimCellClient
from r2s2r_calibration.steps.board import hand_view_plan, head_view_plan
from r2s2r_common.camera_model import CameraModel
from r2s2r_sim.board import OperatorBoardConfig, board_scene_extra
from r2s2r_sim.camera_model import project_points
from r2s2r_sim.cell_runtime import SimCell
from r2s2r_sim.mujoco_backend import MujocoBackend, camera_intrinsics
from r2s2r_world.world import apply_grounding, load_world
from scipy.spatial.transform import Rotation

NOMINAL = Path(__file__).resolve().parents[3] / "config" / "world" / "nominal.yaml"
# A cell whose head camera differs from the datasheet (the truth of this test).
TRUTH = {
    "cameras": {
        "head": {
            "fx_px": 123.0,
            "fy_px": 122.5,
            "cx_px": 65.0,
            "cy_px": 62.0,
            "distortion": {"k1": -0.06, "k2": 0.02},
            "blur_sigma_px": 0.9,
        }
    }
}


@pytest.fixture(scope="module")
def cell():
    nominal = load_world(NOMINAL)
    board = OperatorBoardConfig()
    cell = SimCell(
        MujocoBackend(scene_extras=[board_scene_extra(board)]),
        apply_grounding(nominal, TRUTH),
        nominal,
        board=board,
    )
    yield cell
    cell.close()


def board_pose(yaw_rad: float, distance_m: float, board: ChessboardConfig) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, :3] = Rotation.from_euler("zx", [yaw_rad, 0.3]).as_matrix()
    middle = np.array([*np.array(board.getChessboardSize()) * board.square_length_m / 2, 0.0])
    pose[:3, 3] = np.array([0.0, 0.0, distance_m]) - pose[:3, :3] @ middle
    return pose


@pytest.mark.parametrize("yaw_rad", [0.0, np.pi, 0.5])
def test_rendered_board_is_found_in_its_own_frame_at_any_rotation(cell, yaw_rad):
    client = SimCellClient(cell)
    board = ChessboardConfig()
    pose = board_pose(yaw_rad, 0.6, board)
    client.board_operator.place_board("head_camera_optical_frame", pose)
    _, image = client.capture_image("head_camera", client.now_s() + 0.15)
    detection = detect_board(board, image)
    assert detection is not None
    camera = cell.world.cameras.head
    expected = project_points(
        detection.object_points_m @ pose[:3, :3].T + pose[:3, 3],
        camera_intrinsics(camera),
        camera.distortion.as_array(),
    )
    # The corner order follows the board (the black first square), not the image.
    error = np.linalg.norm(expected - detection.image_points_px, axis=1)
    assert np.sqrt(np.mean(error**2)) < 0.2
    # The refinement pulls corners pushed 0.3 px off back onto the true corners.
    grey = np.ascontiguousarray(image[..., 1])
    rng = np.random.default_rng(3)
    angles = rng.uniform(0.0, 2.0 * np.pi, len(expected))
    pushed = expected + 0.3 * np.column_stack([np.cos(angles), np.sin(angles)])
    refined = refine_chessboard_corners(grey, pushed, board.pattern_size)
    pushed_error = np.sqrt(np.mean(np.sum((pushed - expected) ** 2, axis=1)))
    refined_error = np.sqrt(np.mean(np.sum((refined - expected) ** 2, axis=1)))
    assert refined_error < 0.15 < pushed_error
    client.board_operator.remove_board()
    _, empty = client.capture_image("head_camera", client.now_s() + 0.15)
    assert detect_board(board, empty) is None


def test_board_clamped_to_the_palm_moves_with_the_robot(cell):
    client = SimCellClient(cell)
    cell.place_board("palm_link", np.eye(4))
    before = cell.backend.body_pose("operator_calibration_board")
    relative_before = np.linalg.inv(cell.backend.body_pose("palm_link")) @ before
    start = client.now_s() + 0.05
    q = client.joint_positions()[:6]
    target = q + np.array([0.3, 0, 0, 0, 0, 0])
    client.send_trajectory("arm", _arm_names(), np.array([0.0, 0.5]), np.vstack([q, target]), start)
    client.capture_image("head_camera", start + 0.8)
    after = cell.backend.body_pose("operator_calibration_board")
    assert np.linalg.norm(after[:3, 3] - before[:3, 3]) > 0.05
    palm = cell.backend.body_pose("palm_link")
    np.testing.assert_allclose(np.linalg.inv(palm) @ after, relative_before, atol=1e-6)
    cell.remove_board()


def _arm_names():
    from r2s2r_description.robot import ARM_JOINT_NAMES

    return ARM_JOINT_NAMES


def test_place_board_refuses_bad_requests(cell):
    with pytest.raises(ValueError, match="expected one of"):
        cell.place_board("table_link", np.eye(4))
    bad = np.eye(4)
    bad[0, 0] = 2.0
    with pytest.raises(ValueError, match="rigid"):
        cell.place_board("world", bad)


def test_head_view_plan_keeps_the_board_in_the_image():
    nominal = load_world(NOMINAL)
    cfg = BoardStepsConfig()

    K = np.array([[120.0, 0, 63.5], [0, 120.0, 63.5], [0, 0, 1]])
    camera = CameraModel(width_px=128, height_px=128, camera_matrix=K, distortion=np.zeros(5))
    plan = head_view_plan(camera, cfg)
    assert len(plan) == len(cfg.head_distances_m) * cfg.image_grid**2
    corners = cfg.board.object_points()
    seen = []
    for pose in plan:
        points = corners @ pose[:3, :3].T + pose[:3, 3]
        pixels = points[:, :2] / points[:, 2:3] * 120.0 + 63.5
        assert pixels.min() > 0 and pixels.max() < 127
        seen.append(pixels)
    # The plan's corners reach every part of the image (coverage for the calibration).
    everything = np.vstack(seen)
    assert np.all(everything.min(axis=0) < 17) and np.all(everything.max(axis=0) > 110)
    assert nominal.cameras.head.width_px == 128


def _hand_camera() -> CameraModel:
    K = np.array([[88.0, 0, 63.5], [0, 88.0, 63.5], [0, 0, 1]])
    return CameraModel(width_px=128, height_px=128, camera_matrix=K, distortion=np.zeros(5))


def test_hand_view_plan_shows_the_whole_board_from_spread_tilted_views() -> None:
    cfg = BoardStepsConfig()
    camera = _hand_camera()
    T_world_board, plan, dropped = hand_view_plan(camera, cfg)
    total = len(cfg.hand_view_distances_m) * cfg.hand_views_per_distance
    # Some of the closest slots cannot show the whole board at any roll or tilt.
    assert len(plan) + dropped == total and len(plan) >= 0.75 * total
    corners = cfg.board.object_points() @ T_world_board[:3, :3].T + T_world_board[:3, 3]
    normal = T_world_board[:3, 2]
    tilts, centres = [], []
    for pose in plan:
        local = (corners - pose[:3, 3]) @ pose[:3, :3]
        pixels = local[:, :2] / local[:, 2:3] * 88.0 + 63.5
        assert pixels.min() > 0 and pixels.max() < 127
        centres.append(pixels.mean(axis=0))
        tilts.append(np.degrees(np.arccos(abs(pose[:3, 2] @ normal))))
    assert max(tilts) > 30.0
    assert np.ptp(np.array(centres), axis=0).min() > 20


@pytest.mark.slow  # tries every nearby variant of every view (~1.5 s)
def test_hand_view_plan_replaces_unreachable_views_by_nearby_ones() -> None:
    cfg = BoardStepsConfig()
    camera = _hand_camera()
    centre = np.asarray(cfg.hand_board_position_m)

    def near_side(pose: np.ndarray) -> bool:  # a robot that cannot reach beyond the board
        return bool(pose[0, 3] < centre[0])

    _, free, _ = hand_view_plan(camera, cfg)
    assert not all(near_side(pose) for pose in free)
    _, plan, dropped = hand_view_plan(camera, cfg, near_side)
    assert all(near_side(pose) for pose in plan)
    assert len(plan) + dropped == len(cfg.hand_view_distances_m) * cfg.hand_views_per_distance
    assert len(plan) >= 0.6 * len(free)
    _, nothing, dropped = hand_view_plan(camera, cfg, lambda pose: False)
    assert nothing == [] and dropped == len(cfg.hand_view_distances_m) * cfg.hand_views_per_distance


def test_chessboard_needs_an_odd_and_an_even_side():
    with pytest.raises(ValueError, match="one odd"):
        ChessboardConfig(squares_x=6, squares_y=6)
    assert ChessboardConfig(squares_x=7, squares_y=6).pattern_size == (6, 5)
