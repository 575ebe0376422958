"""In-process tests of the camera_driver lifecycle node with the replay backend."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import rclpy
from r2s2r_cameras.nodes.camera_driver import CameraDriverNode
from r2s2r_common.camera_info import CameraCalibration, YamlMatrix, save_camera_calibration
from r2s2r_common.image_conversion import from_image_msg
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image

WIDTH, HEIGHT = 64, 48


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "frames"
    folder.mkdir()
    for index in range(4):
        frame = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
        frame[:, :, 0] = 200  # blue in BGR
        frame[0, 0] = (index, index, index)
        cv2.imwrite(str(folder / f"{index:02d}.png"), frame)
    return folder


def write_calibration(path: Path, width: int, height: int) -> Path:
    calibration = CameraCalibration(
        image_width=width,
        image_height=height,
        camera_name="head_camera",
        camera_matrix=YamlMatrix.from_array([[50.0, 0, 31.5], [0, 50.0, 23.5], [0, 0, 1]]),
        distortion_coefficients=YamlMatrix.from_array([[0.01, 0, 0, 0, 0]]),
        projection_matrix=YamlMatrix.from_array(
            [[50.0, 0, 31.5, 0], [0, 50.0, 23.5, 0], [0, 0, 1, 0]]
        ),
    )
    save_camera_calibration(calibration, path)
    return path


def make_node(context: Context, **params: Any) -> CameraDriverNode:
    overrides = [Parameter(name, value=value) for name, value in params.items()]
    return CameraDriverNode(context=context, parameter_overrides=overrides)


def test_parameters_are_declared_from_the_schema(ros_context: Context) -> None:
    node = make_node(ros_context)
    try:
        descriptor = node.describe_parameter("device.width_px")
        assert descriptor.integer_range[0].from_value == 1
        assert descriptor.integer_range[0].to_value == 8192
        assert "width" in descriptor.description
        assert node.get_parameter("replay.real_time").value is True
        assert "One of: rgb8" in node.describe_parameter("encoding").description
        # Runtime refusal with a reason: a value the schema rejects.
        result = node.set_parameters([Parameter("camera_name", value="9 bad")])[0]
        assert not result.successful
        assert "camera_name" in result.reason
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"backend": "firewire"}, "unknown backend"),
        ({"backend": "replay", "replay.path": "/nonexistent/video.avi"}, "missing replay"),
        ({"backend": "device", "device.device": "/dev/no_such_camera"}, "unknown device"),
        ({"backend": "replay", "device.fps_hz": 30}, "int given for a float parameter"),
        ({"backend": "replay", "replay.rate_hz": -1.0}, "out of range"),
        ({"backend": "replay", "output_width_px": 32}, "resize with one side only"),
    ],
)
def test_bad_parameters_fail_configure(
    ros_context: Context, image_folder: Path, params: dict[str, Any], why: str
) -> None:
    params.setdefault("replay.path", str(image_folder))
    node = make_node(ros_context, autostart=False, **params)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE, why
        assert node.config is None
    finally:
        node.destroy_node()


def test_calibration_for_another_resolution_fails_configure(
    ros_context: Context, image_folder: Path, tmp_path: Path
) -> None:
    calibration = write_calibration(tmp_path / "cal.yaml", 640, 480)
    node = make_node(
        ros_context,
        backend="replay",
        **{"replay.path": str(image_folder), "calibration_file": str(calibration)},
    )
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    finally:
        node.destroy_node()


def collect(
    context: Context,
    driver: CameraDriverNode,
    topic_prefix: str,
    count: int,
    timeout_s: float = 10.0,
) -> tuple[list[Image], list[CameraInfo]]:
    listener = rclpy.create_node("listener", context=context)
    images: list[Image] = []
    infos: list[CameraInfo] = []
    listener.create_subscription(
        Image, f"{topic_prefix}/image_raw", images.append, qos_profile_sensor_data
    )
    listener.create_subscription(
        CameraInfo, f"{topic_prefix}/camera_info", infos.append, qos_profile_sensor_data
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(listener)
    executor.add_node(driver)
    try:
        deadline = time.monotonic() + timeout_s
        # Activate after the subscriptions exist so the first frames are not lost to discovery.
        assert driver.trigger_activate() == TransitionCallbackReturn.SUCCESS
        while time.monotonic() < deadline and (len(images) < count or len(infos) < count):
            executor.spin_once(timeout_sec=0.05)
        driver.trigger_deactivate()
    finally:
        executor.shutdown()
        listener.destroy_node()
    return images, infos


def test_publishes_image_and_camera_info(
    ros_context: Context, image_folder: Path, tmp_path: Path
) -> None:
    calibration = write_calibration(tmp_path / "cal.yaml", WIDTH, HEIGHT)
    node = make_node(
        ros_context,
        camera_name="head_camera",
        backend="replay",
        encoding="rgb8",
        calibration_file=str(calibration),
        **{"replay.path": str(image_folder), "replay.rate_hz": 100.0},
    )
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        images, infos = collect(ros_context, node, "head_camera", count=6)
    finally:
        node.destroy_node()
    assert len(images) >= 6 and len(infos) >= 6
    image = images[0]
    assert image.encoding == "rgb8"
    assert image.header.frame_id == "head_camera_optical_frame"
    assert (image.width, image.height) == (WIDTH, HEIGHT)
    pixels = from_image_msg(image)
    np.testing.assert_array_equal(pixels[5, 5], [0, 0, 200])  # BGR blue -> RGB order
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in images]
    assert stamps[0] > 1e9  # wall-clock capture time, not zero
    assert all(b > a for a, b in itertools.pairwise(stamps))
    info = infos[0]
    assert info.header.frame_id == "head_camera_optical_frame"
    assert info.k[0] == pytest.approx(50.0)
    assert info.distortion_model == "plumb_bob"
    # Every image has a camera_info with the same stamp.
    info_stamps = {(m.header.stamp.sec, m.header.stamp.nanosec) for m in infos}
    assert (image.header.stamp.sec, image.header.stamp.nanosec) in info_stamps


def test_resized_mono_output_scales_camera_info(
    ros_context: Context, image_folder: Path, tmp_path: Path
) -> None:
    calibration = write_calibration(tmp_path / "cal.yaml", WIDTH, HEIGHT)
    node = make_node(
        ros_context,
        camera_name="hand_camera",
        backend="replay",
        encoding="mono8",
        calibration_file=str(calibration),
        output_width_px=32,
        output_height_px=24,
        **{"replay.path": str(image_folder), "replay.real_time": False},
    )
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        images, infos = collect(ros_context, node, "hand_camera", count=3)
    finally:
        node.destroy_node()
    assert images and infos
    assert (images[0].width, images[0].height, images[0].encoding) == (32, 24, "mono8")
    assert (infos[0].width, infos[0].height) == (32, 24)
    assert infos[0].k[0] == pytest.approx(25.0)
