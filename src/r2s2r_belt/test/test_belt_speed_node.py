"""In-process test of belt_speed: JointState encoder in, TwistStamped out."""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TransformStamped, TwistStamped
from r2s2r_belt.config import BeltSpeedConfig, with_grounded_roller_radius
from r2s2r_belt.nodes.belt_speed import BeltSpeedNode
from r2s2r_belt.synthetic import SyntheticBeltCamera
from r2s2r_common.config import ConfigError
from r2s2r_common.image_conversion import to_image_msg
from r2s2r_common.ros.qos import LATCHED_QOS
from r2s2r_common.ros.spinning import spinning
from r2s2r_description.transforms import matrix_to_quat
from rclpy.context import Context
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState

from tf2_msgs.msg import TFMessage

RADIUS_M = 0.03
SPEED_MPS = 0.12


def run_encoder(
    context: Context, true_radius_m: float, extra: list[Parameter]
) -> tuple[list[tuple[float, TwistStamped]], list[DiagnosticArray]]:
    """belt_speed (configured radius RADIUS_M + ``extra``) fed a roller of ``true_radius_m``."""
    node = BeltSpeedNode(
        context=context,
        parameter_overrides=[
            Parameter("encoder.roller_radius_m", value=RADIUS_M),
            Parameter("encoder.joint_name", value="belt_roller_joint"),
            Parameter("publish_rate_hz", value=50.0),
            Parameter("diagnostics_period_s", value=0.2),
            *extra,
        ],
    )
    driver = rclpy.create_node("fake_belt", context=context)
    encoder_pub = driver.create_publisher(JointState, "/belt/encoder", qos_profile_sensor_data)
    speeds: list[tuple[float, TwistStamped]] = []
    diagnostics: list[DiagnosticArray] = []
    driver.create_subscription(
        TwistStamped, "/belt/speed", lambda m: speeds.append((time.monotonic(), m)), 10
    )
    driver.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    start_s = driver.get_clock().now().nanoseconds * 1e-9

    def publish_angle() -> None:
        # The angle and its stamp from one reading of the clock: read twice, a loaded machine
        # puts milliseconds between them and the speed estimate reads the jitter.
        now = driver.get_clock().now()
        now_s = now.nanoseconds * 1e-9
        travel_rad = SPEED_MPS * (now_s - start_s) / true_radius_m
        angle_rad = (travel_rad + math.pi) % (2 * math.pi) - math.pi
        msg = JointState()
        msg.header.stamp = now.to_msg()
        msg.name = ["belt_roller_joint"]
        msg.position = [angle_rad]
        encoder_pub.publish(msg)

    driver.create_timer(0.02, publish_angle)
    with spinning(context, node, driver):
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and (len(speeds) < 60 or len(diagnostics) < 2):
            time.sleep(0.05)
    return speeds, diagnostics


def test_encoder_messages_give_belt_speed(ros_context: Context) -> None:
    speeds, diagnostics = run_encoder(ros_context, RADIUS_M, [])
    assert len(speeds) >= 60
    recent = speeds[len(speeds) // 2 :]
    for _, msg in recent:
        assert msg.header.frame_id == "belt_link"
        assert msg.twist.linear.x == pytest.approx(SPEED_MPS, rel=0.03)
    # Stamps advance (the publication rate goal, >= 20 Hz, is measured by bench/bench_sensing.py:
    # a timed assertion here would measure this shared machine's load, not the node).
    stamps_s = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in recent]
    assert all(later > earlier for earlier, later in itertools.pairwise(stamps_s))
    # Diagnostics say which source the estimate came from (the first report may predate the
    # first encoder sample, so look at every report received).
    reports = [{kv.key: kv.value for kv in d.status[0].values} for d in diagnostics]
    from_encoder = [r for r in reports if r["sources"] == "encoder"]
    assert from_encoder, [r["sources"] for r in reports]
    assert all(r["vision_state"] == "disabled" for r in reports)
    assert float(from_encoder[-1]["variance_mps2"]) < 4e-4  # std < 2 cm/s; accuracy: above


def test_readings_in_a_simulated_cells_clock_are_followed_in_that_clock(
    ros_context: Context,
) -> None:
    # The encoder is stamped with a simulated cell's time (100 s + elapsed) while this node runs
    # on the wall clock (no use_sim_time). Predicting its filter to the wall clock's "now" made
    # it a running mean of every reading: a speed step was followed over minutes, not 0.1 s.
    node = BeltSpeedNode(
        context=ros_context,
        parameter_overrides=[
            Parameter("encoder.roller_radius_m", value=RADIUS_M),
            Parameter("encoder.joint_name", value="belt_roller_joint"),
            Parameter("publish_rate_hz", value=50.0),
        ],
    )
    driver = rclpy.create_node("fake_sim_belt", context=ros_context)
    encoder_pub = driver.create_publisher(JointState, "/belt/encoder", qos_profile_sensor_data)
    speeds: list[tuple[float, TwistStamped]] = []
    driver.create_subscription(
        TwistStamped, "/belt/speed", lambda m: speeds.append((time.monotonic(), m)), 10
    )
    started = time.monotonic()
    state = {"angle": 0.0, "last": started}

    def publish_angle() -> None:
        now = time.monotonic()
        speed = SPEED_MPS if now - started < 1.5 else 1.5 * SPEED_MPS
        state["angle"] += speed * (now - state["last"]) / RADIUS_M
        state["last"] = now
        msg = JointState()
        sec, nanosec = divmod(int((100.0 + now - started) * 1e9), 1_000_000_000)
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
        msg.name = ["belt_roller_joint"]
        msg.position = [(state["angle"] + math.pi) % (2 * math.pi) - math.pi]
        encoder_pub.publish(msg)

    driver.create_timer(0.01, publish_angle)
    with spinning(ros_context, node, driver):
        while time.monotonic() - started < 3.0:
            time.sleep(0.05)
    late = [m for t, m in speeds if t - started > 2.3]
    assert late, len(speeds)
    assert all(m.twist.linear.x == pytest.approx(1.5 * SPEED_MPS, rel=0.05) for m in late)
    stamp_s = late[-1].header.stamp.sec + late[-1].header.stamp.nanosec * 1e-9
    assert 100.0 < stamp_s < 110.0  # stamped in the readings' clock


def test_bad_parameters_fail_at_startup(ros_context: Context) -> None:
    with pytest.raises(ConfigError, match="image_to_belt_homography"):
        BeltSpeedNode(
            context=ros_context,
            parameter_overrides=[Parameter("vision.image_to_belt_homography", value=[1.0, 2.0])],
        )


def write_artifact(path: Path, overrides: dict) -> Path:
    """A minimal grounding artifact: only what the sensing nodes read (world_overrides)."""
    path.write_text(yaml.safe_dump({"schema_version": 1, "world_overrides": overrides}))
    return path


def test_grounded_roller_radius_replaces_the_configured_one(
    ros_context: Context, tmp_path: Path
) -> None:
    grounded_radius_m = RADIUS_M * 1.02  # a worn roller, as grounding measured it
    artifact = write_artifact(
        tmp_path / "artifact.yaml", {"belt": {"roller_radius_m": grounded_radius_m}}
    )
    speeds, diagnostics = run_encoder(
        ros_context, grounded_radius_m, [Parameter("grounding_artifact", value=str(artifact))]
    )
    recent = speeds[len(speeds) // 2 :]
    assert len(recent) >= 30
    # With the configured (nominal) radius the speed would read 2 % low; grounded: < 1 %.
    for _, msg in recent:
        assert msg.twist.linear.x == pytest.approx(SPEED_MPS, rel=0.01)
    reports = [{kv.key: kv.value for kv in d.status[0].values} for d in diagnostics]
    assert reports and "grounded" in reports[-1]["roller_radius"]


def test_apply_grounding_keeps_or_replaces_the_radius(tmp_path: Path) -> None:
    config = BeltSpeedConfig()
    same, note = with_grounded_roller_radius(config)
    assert same.encoder.roller_radius_m == config.encoder.roller_radius_m and "ungrounded" in note
    no_belt = write_artifact(tmp_path / "no_belt.yaml", {"cameras": {}})
    kept, note = with_grounded_roller_radius(
        config.model_copy(update={"grounding_artifact": str(no_belt)})
    )
    assert kept.encoder.roller_radius_m == config.encoder.roller_radius_m
    assert "has no belt roller radius" in note
    with_belt = write_artifact(tmp_path / "belt.yaml", {"belt": {"roller_radius_m": 0.0306}})
    grounded, _ = with_grounded_roller_radius(
        config.model_copy(update={"grounding_artifact": str(with_belt)})
    )
    assert grounded.encoder.roller_radius_m == 0.0306


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "file not found"),
        ("schema_version: 7\nworld_overrides: {}\n", "schema_version = 7"),
        ("schema_version: 1\n", "lacks world_overrides"),
        (
            "schema_version: 1\nworld_overrides: {belt: {roller_radius_m: .nan}}\n",
            r"world_overrides.belt.roller_radius_m = nan: expected finite numbers",
        ),
        (
            "schema_version: 1\nworld_overrides: {belt: {roller_radius_m: -0.03}}\n",
            r"roller_radius_m = -0.03: expected a radius",
        ),
    ],
)
def test_bad_grounding_artifact_fails_at_startup(
    ros_context: Context, tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "artifact.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=expected):
        BeltSpeedNode(
            context=ros_context,
            parameter_overrides=[Parameter("grounding_artifact", value=str(path))],
        )


def test_vision_geometry_from_camera_info_and_tf_static(ros_context: Context) -> None:
    """With geometry_from_tf the node builds its homography from camera_info + /tf_static."""
    camera = SyntheticBeltCamera(width_px=320, height_px=240, focal_px=300.0, noise_std=0.0)
    T_belt_camera = np.linalg.inv(camera.camera_from_belt())
    node = BeltSpeedNode(
        context=ros_context,
        parameter_overrides=[
            Parameter("encoder.roller_radius_m", value=RADIUS_M),
            Parameter("diagnostics_period_s", value=0.2),
            Parameter("vision.geometry_from_tf", value=True),
            Parameter("vision.belt_length_m", value=0.5),
        ],
    )
    driver = rclpy.create_node("fake_cell", context=ros_context)
    image_pub = driver.create_publisher(Image, "/head_camera/image_raw", qos_profile_sensor_data)
    info_pub = driver.create_publisher(
        CameraInfo, "/head_camera/camera_info", qos_profile_sensor_data
    )
    tf_pub = driver.create_publisher(TFMessage, "/tf_static", LATCHED_QOS)
    transform = TransformStamped()
    transform.header.frame_id = "belt_link"
    transform.child_frame_id = "head_camera_optical_frame"
    t, q = transform.transform.translation, transform.transform.rotation
    t.x, t.y, t.z = (float(v) for v in T_belt_camera[:3, 3])
    q.w, q.x, q.y, q.z = (float(v) for v in matrix_to_quat(T_belt_camera[:3, :3]))
    tf_pub.publish(TFMessage(transforms=[transform]))
    diagnostics: list[DiagnosticArray] = []
    driver.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    start_s = driver.get_clock().now().nanoseconds * 1e-9

    def publish_frame() -> None:
        now = driver.get_clock().now().to_msg()
        offset_m = SPEED_MPS * (time.time() - start_s)
        image = to_image_msg(camera.render(offset_m), "mono8", now, "head_camera_optical_frame")
        info = CameraInfo(width=320, height=240, distortion_model="plumb_bob")
        info.header = image.header
        info.k = [float(v) for v in camera.camera_matrix.ravel()]
        info.d = [0.0] * 5
        info_pub.publish(info)
        image_pub.publish(image)

    driver.create_timer(0.05, publish_frame)

    def vision_reports() -> list[dict[str, str]]:
        reports = [{kv.key: kv.value for kv in d.status[0].values} for d in list(diagnostics)]
        return [r for r in reports if r["vision_state"] == "ok"]

    with spinning(ros_context, node, driver):
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline and len(vision_reports()) < 2:
            time.sleep(0.05)
    ok = vision_reports()
    assert ok, [d.status[0].message for d in diagnostics]
    assert "tf_static" in ok[-1]["vision_geometry"]
    assert int(ok[-1]["vision_updates"]) > 0
