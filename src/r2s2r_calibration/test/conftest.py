"""Shared synthetic camera, board and rendered views (rendered once per session)."""

from __future__ import annotations

import pytest
from r2s2r_calibration.intrinsics import CharucoBoardConfig, make_board
from r2s2r_calibration.synthetic import TEST_CAMERA_MATRIX as K_TRUE
from r2s2r_calibration.synthetic import TEST_DISTORTION as DIST_TRUE
from r2s2r_calibration.synthetic import TEST_IMAGE_SIZE as IMAGE_SIZE
from r2s2r_calibration.synthetic import charuco_view_poses, render_board_view

BOARD_CONFIG = CharucoBoardConfig(
    squares_x=10, squares_y=7, square_length_m=0.03, marker_length_m=0.022
)


@pytest.fixture(scope="session")
def board():
    return make_board(BOARD_CONFIG)


@pytest.fixture(scope="session")
def view_poses():
    return charuco_view_poses((0.3, 0.21), K_TRUE, IMAGE_SIZE, 16, 0.45, 0.6, seed=2)


@pytest.fixture(scope="session")
def views(board, view_poses):
    return [
        render_board_view(board, K_TRUE, DIST_TRUE, pose, IMAGE_SIZE, 1.0, noise_std=2.0, seed=i)
        for i, pose in enumerate(view_poses)
    ]
