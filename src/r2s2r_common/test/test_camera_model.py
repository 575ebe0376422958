"""The one camera model: keyword-only fields, its checks, and its two builders."""

from __future__ import annotations

import re

import numpy as np
import pytest
from r2s2r_common.camera_info import CameraCalibration, YamlMatrix, uncalibrated
from r2s2r_common.camera_model import CameraModel, CameraModelError

K = np.array([[120.0, 0.0, 63.5], [0.0, 121.0, 62.5], [0.0, 0.0, 1.0]])


def test_fields_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        CameraModel(128, 96, K)  # type: ignore[misc]
    camera = CameraModel(width_px=128, height_px=96, camera_matrix=K.astype(np.float32))
    assert camera.camera_matrix.dtype == np.float64
    assert camera.distortion.tolist() == [0.0] * 5


@pytest.mark.parametrize(
    ("matrix", "size", "message"),
    [
        (np.eye(2), (128, 96), "camera_matrix shape (2, 2): expected (3, 3)"),
        (np.diag([0.0, 1.0, 1.0]), (128, 96), "focal lengths fx=0.0, fy=1.0: expected > 0"),
        (K, (0, 96), "image size 0x96: expected positive width and height"),
    ],
)
def test_unusable_intrinsics_are_refused(
    matrix: np.ndarray, size: tuple[int, int], message: str
) -> None:
    with pytest.raises(CameraModelError, match=re.escape(message)):
        CameraModel(width_px=size[0], height_px=size[1], camera_matrix=matrix)
    assert issubclass(CameraModelError, ValueError)


def test_from_intrinsics_builds_k() -> None:
    camera = CameraModel.from_intrinsics(128, 96, 120.0, 121.0, 63.5, 62.5, [0.1, 0, 0, 0, 0])
    assert (camera.width_px, camera.height_px) == (128, 96)
    np.testing.assert_array_equal(camera.camera_matrix, K)
    assert camera.distortion.tolist() == [0.1, 0.0, 0.0, 0.0, 0.0]


def test_from_calibration_takes_size_k_and_the_first_five_terms() -> None:
    calibration = CameraCalibration(
        image_width=128,
        image_height=96,
        camera_matrix=YamlMatrix.from_array(K),
        distortion_model="rational_polynomial",
        distortion_coefficients=YamlMatrix.from_array([[0.1, 0.2, 0.3, 0.4, 0.5, 6, 7, 8]]),
        projection_matrix=YamlMatrix.from_array(np.hstack([K, np.zeros((3, 1))])),
    )
    camera = CameraModel.from_calibration(calibration)
    assert (camera.width_px, camera.height_px) == (128, 96)
    np.testing.assert_array_equal(camera.camera_matrix, K)
    assert camera.distortion.tolist() == [0.1, 0.2, 0.3, 0.4, 0.5]


def test_an_uncalibrated_camera_info_is_no_model() -> None:
    with pytest.raises(CameraModelError, match=r"uncalibrated \(K all zero: its driver has no"):
        CameraModel.from_calibration(uncalibrated(128, 96))
    with pytest.raises(CameraModelError, match=re.escape("focal lengths fx=0.0, fy=0.0")):
        CameraModel(width_px=128, height_px=96, camera_matrix=np.zeros((3, 3)))
