import numpy as np
import pytest
from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.errors import (
    BoardNotDetectedError,
    PoorCoverageError,
    TooFewViewsError,
)
from r2s2r_calibration.geometry import pose_error
from r2s2r_calibration.intrinsics import (
    CharucoBoardConfig,
    IntrinsicsConfig,
    board_pose_in_camera,
    calibrate_intrinsics,
    detect_board,
    jackknife_intrinsics,
)
from r2s2r_calibration.synthetic import TEST_CAMERA_MATRIX as K_TRUE
from r2s2r_calibration.synthetic import TEST_DISTORTION as DIST_TRUE
from r2s2r_calibration.synthetic import TEST_IMAGE_SIZE as IMAGE_SIZE


@pytest.fixture(scope="module")
def calibration(board, views):
    return calibrate_intrinsics(board, views)


def test_recovers_focal_and_principal_point(calibration):
    assert abs(calibration.fx_px / K_TRUE[0, 0] - 1) < 0.005
    assert abs(calibration.fy_px / K_TRUE[1, 1] - 1) < 0.005
    assert abs(calibration.cx_px - K_TRUE[0, 2]) < 1.0
    assert abs(calibration.cy_px - K_TRUE[1, 2]) < 1.0
    assert abs(calibration.distortion[0] - DIST_TRUE[0]) < 0.01
    assert calibration.rms_px < 0.2
    assert calibration.coverage.missing_cells == []
    assert len(calibration.used_view_indices) == 16


def test_board_pose_from_render_matches_truth(board, views, view_poses):
    detection = detect_board(board, views[0])
    pose, rms = board_pose_in_camera(detection, K_TRUE, DIST_TRUE)
    translation_error, rotation_error = pose_error(pose, view_poses[0])
    assert rms < 0.2
    assert translation_error < 0.002
    assert np.degrees(rotation_error) < 0.3


def test_no_board_anywhere_is_refused(board):
    blank = [np.full((480, 640), 120, np.uint8) for _ in range(4)]
    with pytest.raises(BoardNotDetectedError, match="0 of 4 views"):
        calibrate_intrinsics(board, blank)


def test_too_few_detected_views_says_how_many_and_what_to_do(board, views):
    blank = np.full((480, 640), 120, np.uint8)
    images = views[:3] + [blank] * 9
    with pytest.raises(TooFewViewsError, match=r"3 of 12 views detected the board.*move"):
        calibrate_intrinsics(board, images)


def test_identical_views_are_refused(board, views):
    with pytest.raises(TooFewViewsError, match="distinct"):
        calibrate_intrinsics(board, [views[4]] * 10)


def test_views_only_in_one_region_are_refused_with_guidance(board, views):
    # Views 0, 9 aim at the top-left corner of the image; 4 and 13 at the centre.
    config = IntrinsicsConfig(min_views=3)
    with pytest.raises(PoorCoverageError, match="bottom-right corner"):
        calibrate_intrinsics(board, [views[0], views[9], views[4], views[13]], config)


@pytest.mark.slow  # renders and calibrates 9 views of its own (~1 s)
def test_untilted_views_are_refused(board):
    from r2s2r_calibration.synthetic import charuco_view_poses, render_board_view

    poses = charuco_view_poses((0.3, 0.21), K_TRUE, IMAGE_SIZE, 9, 0.45, 0.0, seed=0)
    images = [render_board_view(board, K_TRUE, DIST_TRUE, p, IMAGE_SIZE, 1.0) for p in poses]
    with pytest.raises(PoorCoverageError, match="tilt the board"):
        calibrate_intrinsics(board, images)


def test_board_config_validation():
    with pytest.raises(ValueError, match="marker_length_m"):
        CharucoBoardConfig(square_length_m=0.03, marker_length_m=0.04)
    with pytest.raises(ValueError, match="DICT_"):
        CharucoBoardConfig(dictionary="DICT_NOPE")


def test_detect_board_rejects_float_images(board):
    with pytest.raises(ValueError, match="uint8"):
        detect_board(board, np.zeros((48, 64), np.float32))


def test_tangential_distortion_is_fitted_not_taken_up_by_the_principal_point(board, views):
    # The views' lens has p1 = 0.001, p2 = -0.0005 (a slightly tilted lens element, as in the
    # twin family). Held at zero (the board steps' model before), the principal point takes
    # them up: 1.8 px off here, and a camera mount solved with it points 0.1-0.25 deg off.
    held = calibrate_intrinsics(board, views, IntrinsicsConfig(zero_tangential=True, fix_k3=True))
    assert abs(held.cy_px - K_TRUE[1, 2]) > 1.0
    fitted = calibrate_intrinsics(board, views, BoardStepsConfig().intrinsics)
    assert abs(fitted.cx_px - K_TRUE[0, 2]) < 0.4
    assert abs(fitted.cy_px - K_TRUE[1, 2]) < 0.4
    np.testing.assert_allclose(fitted.distortion[2:4], DIST_TRUE[2:4], atol=3e-4)


def test_jackknife_replicates_leave_out_each_group_of_views(board, views, calibration):
    replicates = jackknife_intrinsics(
        calibration.detections, calibration.image_size_px, IntrinsicsConfig(), 4
    )
    assert len(replicates) == 4
    principal = np.array([[K[0, 2], K[1, 2]] for K, _ in replicates])
    assert np.all(np.abs(principal - K_TRUE[:2, 2]) < 2.0)
    assert np.ptp(principal, axis=0).min() > 0.0  # each replicate saw other views
    too_few = jackknife_intrinsics(
        calibration.detections[:8], calibration.image_size_px, IntrinsicsConfig(), 4
    )
    assert too_few == []  # 8 views: fewer than min_views + groups
