import numpy as np
import pytest
from r2s2r_calibration.errors import (
    DegenerateMotionError,
    ResidualTooLargeError,
    TooFewViewsError,
)
from r2s2r_calibration.extrinsics import calibrate_hand_eye, calibrate_static_camera
from r2s2r_calibration.geometry import (
    look_at_pose,
    pose_error,
    pose_from_xyz_rpy,
)
from r2s2r_calibration.intrinsics import detect_board
from r2s2r_calibration.synthetic import TEST_CAMERA_MATRIX as K
from r2s2r_calibration.synthetic import TEST_DISTORTION as DIST
from r2s2r_calibration.synthetic import TEST_IMAGE_SIZE as SIZE
from r2s2r_calibration.synthetic import project_board_detection, render_board_view
from r2s2r_description.transforms import invert_transform as invert_pose

T_FLANGE_CAMERA = pose_from_xyz_rpy([0.05, -0.02, 0.08], [0.1, -0.05, 1.6])
# Printed side down the board z axis: a board lying face-up has z pointing down.
T_BASE_BOARD = pose_from_xyz_rpy([0.5, -0.15, 0.0], [np.pi, 0.0, 0.3])
BOARD_CENTRE = (T_BASE_BOARD @ np.array([0.15, 0.105, 0.0, 1.0]))[:3]


def eye_in_hand_data(board, n_poses, seed=0, noise_px=0.2, rotate=True):
    rng = np.random.default_rng(seed)
    flanges, detections = [], []
    for index in range(n_poses):
        offset = [rng.uniform(-0.15, 0.15), rng.uniform(-0.15, 0.15), 0.45]
        if not rotate:
            offset = [0.02 * index, 0.0, 0.45]
        T_base_camera = look_at_pose(BOARD_CENTRE + offset, BOARD_CENTRE, [1, 0, 0])
        if rotate:
            T_base_camera = T_base_camera @ pose_from_xyz_rpy([0, 0, 0], [0, 0, rng.uniform(-1, 1)])
        flanges.append(T_base_camera @ invert_pose(T_FLANGE_CAMERA))
        T_camera_board = invert_pose(T_base_camera) @ T_BASE_BOARD
        detections.append(
            project_board_detection(board, K, DIST, T_camera_board, SIZE, noise_px, seed=index)
        )
    return flanges, detections


def test_hand_eye_recovers_flange_camera_pose(board):
    flanges, detections = eye_in_hand_data(board, 8)
    result = calibrate_hand_eye(flanges, detections, K, DIST, eye_in_hand=True)
    translation_error, rotation_error = pose_error(result.X, T_FLANGE_CAMERA)
    assert translation_error < 0.003
    assert np.degrees(rotation_error) < 0.3
    board_error, _ = pose_error(result.Y, T_BASE_BOARD)
    assert board_error < 0.003
    assert 0.2 < result.rms_px < 0.4  # 0.2 px noise per axis
    assert np.all(result.translation_std_m < 0.002)


def test_eye_to_hand_recovers_base_camera_pose(board):
    # Fixed camera, board carried by the flange: X = T_base_camera, Y = T_flange_board.
    T_base_camera = look_at_pose([0.2, 0.1, 0.9], [0.55, -0.05, 0.1], [0, 0, 1])
    T_flange_board = pose_from_xyz_rpy([0.0, 0.0, 0.05], [0.0, 0.0, 0.2])
    rng = np.random.default_rng(3)
    flanges, detections = [], []
    for index in range(8):
        target = np.array([0.55, -0.05, 0.1]) + rng.uniform(-0.08, 0.08, 3)
        T_base_board = look_at_pose(
            target + np.array([0.0, 0.0, 0.001]), T_base_camera[:3, 3], [1, 0, 0]
        )
        T_base_board = T_base_board @ pose_from_xyz_rpy(
            [0, 0, 0], [np.pi, 0, rng.uniform(-0.6, 0.6)]
        )
        T_base_board = T_base_board @ pose_from_xyz_rpy([-0.15, -0.105, 0], [0, 0, 0])
        tilt = pose_from_xyz_rpy([0, 0, 0], rng.uniform(-0.3, 0.3, 3))
        T_base_board = T_base_board @ tilt
        flanges.append(T_base_board @ invert_pose(T_flange_board))
        T_camera_board = invert_pose(T_base_camera) @ T_base_board
        detections.append(project_board_detection(board, K, DIST, T_camera_board, SIZE, 0.2, index))
    assert min(len(d.charuco_ids) for d in detections) > 20
    result = calibrate_hand_eye(flanges, detections, K, DIST, eye_in_hand=False)
    translation_error, rotation_error = pose_error(result.X, T_base_camera)
    assert translation_error < 0.003
    assert np.degrees(rotation_error) < 0.3


def test_static_head_camera_from_rendered_board_views(board):
    T_base_camera = look_at_pose(
        BOARD_CENTRE + np.array([-0.15, 0.1, 0.4]), BOARD_CENTRE, [1, 0, 0]
    )
    board_poses = [T_BASE_BOARD, T_BASE_BOARD @ pose_from_xyz_rpy([0.05, 0.02, 0], [0.3, 0, 0.5])]
    detections = []
    for T_base_board in board_poses:
        image = render_board_view(
            board, K, DIST, invert_pose(T_base_camera) @ T_base_board, SIZE, 1.0, noise_std=2
        )
        detection = detect_board(board, image)
        assert detection is not None
        detections.append(detection)
    result = calibrate_static_camera(board_poses, detections, K, DIST)
    translation_error, rotation_error = pose_error(result.T_parent_camera, T_base_camera)
    assert translation_error < 0.003
    assert np.degrees(rotation_error) < 0.3
    assert result.rms_px < 0.3


def test_static_camera_with_wrong_board_pose_is_refused(board):
    T_base_camera = look_at_pose([0.2, 0.1, 0.75], [0.6, -0.05, 0.0], [0, 0, 1])
    truth = [T_BASE_BOARD, T_BASE_BOARD @ pose_from_xyz_rpy([0.05, 0.02, 0], [0.3, 0, 0.5])]
    detections = [
        project_board_detection(board, K, DIST, invert_pose(T_base_camera) @ T, SIZE, 0.1, i)
        for i, T in enumerate(truth)
    ]
    wrong = [truth[0], truth[1] @ pose_from_xyz_rpy([0.03, 0, 0], [0, 0, 0])]
    with pytest.raises(ResidualTooLargeError, match="known board poses"):
        calibrate_static_camera(wrong, detections, K, DIST)


def test_hand_eye_with_too_few_poses_is_refused(board):
    flanges, detections = eye_in_hand_data(board, 3)
    with pytest.raises(TooFewViewsError, match="3 robot poses"):
        calibrate_hand_eye(flanges, detections, K, DIST)


def test_hand_eye_with_pure_translation_is_degenerate(board):
    flanges, detections = eye_in_hand_data(board, 6, rotate=False)
    with pytest.raises(DegenerateMotionError, match="two different axes"):
        calibrate_hand_eye(flanges, detections, K, DIST)


def test_mismatched_lengths_raise(board):
    flanges, detections = eye_in_hand_data(board, 5)
    with pytest.raises(ValueError, match="one flange pose per view"):
        calibrate_hand_eye(flanges[:4], detections, K, DIST)
