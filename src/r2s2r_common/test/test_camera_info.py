"""camera_calibration YAML <-> CameraCalibration <-> CameraInfo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_common.camera_info import (
    CalibrationResolutionError,
    CameraCalibration,
    camera_info_fields,
    from_camera_info_msg,
    is_calibrated,
    load_camera_calibration,
    save_camera_calibration,
    to_camera_info_msg,
    uncalibrated,
)
from r2s2r_common.config import ConfigError

# Written as camera_calibration's cameracalibrator writes it (flow style matrices).
ROS_YAML = """\
image_width: 640
image_height: 480
camera_name: head_camera
camera_matrix:
  rows: 3
  cols: 3
  data: [615.2, 0, 321.7, 0, 614.8, 238.1, 0, 0, 1]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [0.0912, -0.2013, 0.0011, -0.0007, 0.0813]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]
projection_matrix:
  rows: 3
  cols: 4
  data: [618.9, 0, 320.9, 0, 0, 617.5, 237.6, 0, 0, 0, 1, 0]
"""


@pytest.fixture
def calibration_file(tmp_path: Path) -> Path:
    path = tmp_path / "head_camera.yaml"
    path.write_text(ROS_YAML)
    return path


def test_load_reads_every_field(calibration_file: Path) -> None:
    calibration = load_camera_calibration(calibration_file)
    assert (calibration.image_width, calibration.image_height) == (640, 480)
    assert calibration.camera_name == "head_camera"
    assert calibration.k[0, 0] == pytest.approx(615.2)
    assert calibration.k[1, 2] == pytest.approx(238.1)
    np.testing.assert_allclose(calibration.d, [0.0912, -0.2013, 0.0011, -0.0007, 0.0813])
    np.testing.assert_array_equal(calibration.r, np.eye(3))
    assert calibration.p.shape == (3, 4)
    assert calibration.p[0, 2] == pytest.approx(320.9)
    assert is_calibrated(calibration)


def test_yaml_round_trip_is_exact(calibration_file: Path, tmp_path: Path) -> None:
    original = load_camera_calibration(calibration_file)
    out = tmp_path / "copy.yaml"
    save_camera_calibration(original, out)
    reread = load_camera_calibration(out)
    assert reread == original
    # The written file keeps the ROS layout (other ROS tools must read it).
    raw = yaml.safe_load(out.read_text())
    assert raw["camera_matrix"] == {"rows": 3, "cols": 3, "data": original.camera_matrix.data}
    assert set(raw) == set(yaml.safe_load(ROS_YAML))


def test_camera_info_message_round_trip(calibration_file: Path) -> None:
    from builtin_interfaces.msg import Time

    calibration = load_camera_calibration(calibration_file)
    msg = to_camera_info_msg(calibration, Time(sec=3), "head_camera_optical_frame")
    assert (msg.width, msg.height) == (640, 480)
    assert msg.header.frame_id == "head_camera_optical_frame"
    assert msg.distortion_model == "plumb_bob"
    np.testing.assert_allclose(np.asarray(msg.k).reshape(3, 3), calibration.k)
    np.testing.assert_allclose(np.asarray(msg.p).reshape(3, 4), calibration.p)
    np.testing.assert_allclose(list(msg.d), calibration.d)
    assert from_camera_info_msg(msg, "head_camera") == calibration
    fields = camera_info_fields(calibration)
    assert fields["k"][2] == pytest.approx(321.7)
    assert len(fields["p"]) == 12


def test_resolution_mismatch_is_named(calibration_file: Path) -> None:
    calibration = load_camera_calibration(calibration_file)
    calibration.check_resolution(640, 480)
    with pytest.raises(CalibrationResolutionError, match=r"640x480 px, but the device is 1280x720"):
        calibration.check_resolution(1280, 720, source="device")


def test_scaled_calibration_projects_consistently(calibration_file: Path) -> None:
    calibration = load_camera_calibration(calibration_file)
    half = calibration.scaled(320, 240)
    assert (half.image_width, half.image_height) == (320, 240)
    # A 3D point projects to the pixel whose centre maps to the same place after resizing.
    point = np.array([0.1, -0.05, 1.0])
    u_full = calibration.k @ point
    u_half = half.k @ point
    u_full, u_half = u_full[:2] / u_full[2], u_half[:2] / u_half[2]
    np.testing.assert_allclose(u_half, (u_full + 0.5) * 0.5 - 0.5, atol=1e-9)
    np.testing.assert_array_equal(half.d, calibration.d)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d["camera_matrix"].update(cols=4), "camera_matrix"),
        (lambda d: d["camera_matrix"]["data"].pop(), r"data has 8 values, expected"),
        (lambda d: d.update(distortion_model="fisheye62"), "distortion_model 'fisheye62'"),
        (lambda d: d["distortion_coefficients"].update(cols=4, data=[0, 0, 0, 0]), "expects 5"),
        (lambda d: d.update(image_width=-640), "image_width = -640"),
        (lambda d: d.update(lens="wide"), "lens: unknown key"),
        (lambda d: d.pop("projection_matrix"), "projection_matrix: Field required"),
    ],
)
def test_bad_files_are_rejected_with_the_key(tmp_path: Path, edit, match: str) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load(ROS_YAML)
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=match):
        load_camera_calibration(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_camera_calibration(tmp_path / "nope.yaml")


def test_uncalibrated_placeholder() -> None:
    placeholder = uncalibrated(320, 240, "hand_camera")
    assert not is_calibrated(placeholder)
    assert isinstance(placeholder, CameraCalibration)
    assert camera_info_fields(placeholder)["k"] == [0.0] * 9
