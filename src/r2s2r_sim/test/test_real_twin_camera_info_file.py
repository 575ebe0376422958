"""real_twin as camera driver: camera_info from a given calibration file; optional /tf_static."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

from r2s2r_common.camera_info import save_camera_calibration  # noqa: E402
from r2s2r_common.ros.qos import SENSOR_DATA_QOS  # noqa: E402
from r2s2r_sim.nodes.real_twin import RealTwinNode  # noqa: E402
from r2s2r_testing.ros import ros_context_of  # noqa: E402
from r2s2r_world.grounding import GroundedIntrinsics, camera_calibration_of  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TWIN = REPO / "config" / "twin" / "default.yaml"


def calibration_file(path: Path, width_px: int = 128) -> Path:
    """A head camera_calibration file as the grounding export writes it."""
    intrinsics = GroundedIntrinsics.model_validate(
        {
            "width_px": width_px,
            "height_px": 128,
            "fx_px": 122.5,
            "fy_px": 122.25,
            "cx_px": 65.0,
            "cy_px": 62.0,
            "distortion": {"k1": -0.04, "k2": 0.01},
        }
    )
    save_camera_calibration(camera_calibration_of(intrinsics, "head_camera"), path)
    return path


def make_twin(context: object, name: str, **params: str | bool) -> RealTwinNode:
    overrides: list[Parameter] = [Parameter("twin_config_path", value=str(TWIN))]
    overrides += [Parameter(key, value=value) for key, value in params.items()]
    return RealTwinNode(node_name=name, context=context, parameter_overrides=overrides)


def test_camera_info_from_file_and_no_static_tf(tmp_path: Path, ros_context: rclpy.Context) -> None:
    twin = make_twin(
        ros_context,
        "twin_with_calibration",
        head_camera_info_file=str(calibration_file(tmp_path / "head_camera.yaml")),
        publish_tf_static=False,
    )
    probe = Node("probe", context=ros_context)
    infos: list[CameraInfo] = []
    probe.create_subscription(CameraInfo, "/head_camera/camera_info", infos.append, SENSOR_DATA_QOS)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(twin)
    executor.add_node(probe)
    try:
        assert twin.autostart()
        deadline = time.monotonic() + 20.0
        while not infos and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.02)
        assert infos, "no /head_camera/camera_info"
        np.testing.assert_allclose(infos[-1].k, [122.5, 0, 65.0, 0, 122.25, 62.0, 0, 0, 1])
        np.testing.assert_allclose(infos[-1].d, [-0.04, 0.01, 0.0, 0.0, 0.0])
        assert infos[-1].header.frame_id == "head_camera_optical_frame"
        # The hand camera keeps its datasheet intrinsics (nominal fx = 90).
        assert twin.server.options.camera_calibrations["hand_camera"].k[0, 0] == pytest.approx(90.0)
        publishers = [i.node_name for i in twin.get_publishers_info_by_topic("/tf_static")]
        assert "twin_with_calibration" not in publishers
    finally:
        executor.shutdown()
        probe.destroy_node()
        twin.destroy_node()


@pytest.mark.parametrize("problem", ["missing", "resolution"])
def test_bad_calibration_file_fails_configure(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "head_camera.yaml"
    if problem == "resolution":
        calibration_file(path, width_px=640)
    with ros_context_of() as context:
        twin = make_twin(context, f"twin_bad_{problem}", head_camera_info_file=str(path))
        assert not twin.autostart()
        assert twin.cell is None
        twin.destroy_node()
