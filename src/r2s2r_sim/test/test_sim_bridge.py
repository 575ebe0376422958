"""sim_bridge: the mirror core (ROS-free) and the lifecycle node in mirror and generation mode."""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 200)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TransformStamped
from r2s2r_common.config import ConfigError, load_config
from r2s2r_common.image_conversion import from_image_msg, to_image_msg
from r2s2r_common.ros.qos import LATCHED_QOS, SENSOR_DATA_QOS
from r2s2r_description.model import forward_kinematics
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_sim.mirror import CellMirror, MirrorError, TrackInput, TransformResult
from r2s2r_sim.nodes.sim_bridge import (
    SimBridgeConfig,
    SimBridgeNode,
    load_bridge_world,
)
from r2s2r_testing.joints import random_positions
from r2s2r_world.world import WorldParams
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from visualization_msgs.msg import Marker, MarkerArray

from r2s2r_interfaces.msg import ObjectTrack, ObjectTrackArray
from tf2_msgs.msg import TFMessage

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
TWIN = REPO / "config" / "twin" / "default.yaml"


# -- the ROS-free mirror core ---------------------------------------------------------------------


@pytest.fixture
def mirror(nominal_world: WorldParams) -> Iterator[CellMirror]:
    cell = CellMirror(nominal_world, slots_per_type=1)
    try:
        yield cell
    finally:
        cell.close()


def test_mirror_follows_joint_states_to_forward_kinematics(mirror: CellMirror) -> None:
    for seed in range(3):
        positions = random_positions(seed)
        names = [*reversed(ALL_JOINT_NAMES), "belt_roller_joint"]  # any order, extras ignored
        update = mirror.apply_joint_state(names, [*(positions[n] for n in names[:-1]), 1.0], 5.0)
        assert update.ignored == ("belt_roller_joint",) and update.missing == ()
        expected = forward_kinematics(mirror.description, positions)
        for link in ("palm_link", "index_dip_link", "thumb_ip_link", "wrist_3_link"):
            if link in expected:
                np.testing.assert_allclose(
                    mirror.backend.body_pose(link), expected[link], atol=1e-6, err_msg=link
                )
        assert mirror.palm_error_m() < 1e-9
    # a partial message moves only what it names
    before = mirror.backend.body_pose("palm_link")
    update = mirror.apply_joint_state(["index_mcp_joint"], [0.3], 6.0)
    assert len(update.missing) == len(ALL_JOINT_NAMES) - 1
    np.testing.assert_allclose(mirror.backend.body_pose("palm_link"), before, atol=1e-12)
    assert mirror.joint_state_age_s(6.25) == pytest.approx(0.25)
    assert not mirror.is_stale(6.25, 0.5) and mirror.is_stale(7.0, 0.5)
    with pytest.raises(MirrorError, match="2 names but 1 positions"):
        mirror.apply_joint_state(["elbow_joint", "wrist_1_joint"], [0.1], 7.0)
    with pytest.raises(MirrorError, match="finite"):
        mirror.apply_joint_state(["elbow_joint"], [float("nan")], 7.0)
    assert mirror.last_joint_state_s == 6.0  # rejected messages change nothing


def test_mirror_applies_fixed_transforms_and_tracks(mirror: CellMirror) -> None:
    base = np.eye(4)
    base[:3, 3] = (0.02, -0.01, 0.75)
    base[:3, :3] = np.diag([-1.0, -1.0, 1.0])  # yaw pi, as nominal
    assert mirror.apply_fixed_transform("world", "base_link", base) == TransformResult.APPLIED
    np.testing.assert_allclose(mirror.backend.body_pose("base_link"), base, atol=1e-12)
    assert mirror.palm_error_m() < 1e-9  # the arm moved with its base
    assert mirror.apply_fixed_transform("base_link", "shoulder_link", base) == (
        TransformResult.JOINT_DRIVEN
    )
    assert mirror.apply_fixed_transform("world", "object_3", base) == (
        TransformResult.UNKNOWN_FRAME
    )
    assert mirror.apply_fixed_transform("base_link", "belt_link", base) == (
        TransformResult.OTHER_PARENT
    )
    with pytest.raises(MirrorError, match="rigid"):
        mirror.apply_fixed_transform("world", "belt_link", 2.0 * base)

    tracks = [
        TrackInput(4, "cube", (0.5, 0.1, 0.1), (1.0, 0.0, 0.0, 0.0)),
        TrackInput(5, "cube", (0.5, 0.2, 0.1), (1.0, 0.0, 0.0, 0.0)),  # beyond 1 slot
        TrackInput(6, "teapot", (0.5, 0.0, 0.1), (1.0, 0.0, 0.0, 0.0)),
    ]
    update = mirror.apply_tracks("base_link", tracks)
    assert (update.shown, update.unknown_types, update.overflow) == (1, ("teapot",), 1)
    (shown,) = mirror.objects()
    # base_link is yawed by pi at (0.02, -0.01, 0.75): (0.5, 0.1, 0.1) -> (-0.48, -0.11, 0.85)
    np.testing.assert_allclose(shown.position_m, [-0.48, -0.11, 0.85], atol=1e-9)
    body = mirror.backend.body_pose("mirror_cube_0")
    np.testing.assert_allclose(body[:3, 3], [-0.48, -0.11, 0.85], atol=1e-9)
    mirror.apply_tracks("base_link", [])  # the track vanished: parked again, out of view
    assert mirror.objects() == []
    assert mirror.backend.body_pose("mirror_cube_0")[2, 3] < 0.0
    with pytest.raises(MirrorError, match="not a frame"):
        mirror.apply_tracks("camera_rig", tracks)


# -- the node -----------------------------------------------------------------------------------


def make_node(context: Context, **params: Any) -> SimBridgeNode:
    params.setdefault("world_path", str(NOMINAL))
    params.setdefault("autostart", False)
    overrides = [Parameter(name, value=value) for name, value in params.items()]
    return SimBridgeNode(context=context, parameter_overrides=overrides)


def spin_until(
    executor: SingleThreadedExecutor,
    done: Callable[[], bool],
    timeout_s: float = 10.0,
    each: Callable[[], None] | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        if each is not None:
            each()
        executor.spin_once(timeout_sec=0.02)
    assert done(), "timed out"


def diagnostic_values(messages: list[DiagnosticArray], name_part: str) -> dict[str, str]:
    for message in reversed(messages):
        for status in message.status:
            if name_part in status.name:
                return {kv.key: kv.value for kv in status.values}
    return {}


def test_shipped_parameter_file_matches_the_schema() -> None:
    config = load_config(SimBridgeConfig, REPO / "config/nodes/sim_bridge.yaml", "sim_bridge")
    assert config.mode == "mirror" and config.world_path == "world/nominal.yaml"
    assert config.model_dump() == SimBridgeConfig().model_dump()  # the file states the defaults


def test_the_twin_world_is_refused() -> None:
    with pytest.raises(ConfigError, match="only the real twin may read it"):
        load_bridge_world(str(TWIN))
    path, world = load_bridge_world("world/nominal.yaml")  # relative: against config/
    assert path.parts[-3:] == ("config", "world", "nominal.yaml")  # installed or source copy
    assert world.belt.speed_mps == pytest.approx(0.10)


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"world_path": str(TWIN)}, "the twin's hidden world"),
        ({"world_path": "/no/such/world.yaml"}, "missing world"),
        ({"mode": "replay"}, "unknown mode"),
        ({"sim_image_cameras": ["belly_camera"]}, "unknown camera"),
        ({"markers_rate_hz": -1.0}, "out of range"),
    ],
)
def test_bad_parameters_fail_configure(
    ros_context: Context, params: dict[str, Any], why: str
) -> None:
    node = make_node(ros_context, **params)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE, why
        assert node.mode is None
    finally:
        node.destroy_node()


def test_mirror_mode_follows_the_real_cell(
    ros_context: Context, nominal_world: WorldParams
) -> None:
    node = make_node(
        ros_context,
        publish_sim_images=True,
        sim_image_rate_hz=20.0,
        markers_rate_hz=20.0,
        diagnostics_rate_hz=20.0,
    )
    real = Node("real_cell", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(real)
    markers: list[MarkerArray] = []
    diagnostics: list[DiagnosticArray] = []
    images: list[Image] = []
    real.create_subscription(MarkerArray, "/cell/markers", markers.append, 10)
    real.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    real.create_subscription(Image, "/sim/head_camera/image_raw", images.append, SENSOR_DATA_QOS)
    joints_pub = real.create_publisher(JointState, "/joint_states", 10)
    static_pub = real.create_publisher(TFMessage, "/tf_static", LATCHED_QOS)
    tracks_pub = real.create_publisher(ObjectTrackArray, "/objects/tracks", 10)
    try:
        assert node.autostart()
        mirror = node.mode.mirror  # type: ignore[union-attr]
        # The real cell's /tf_static says the base sits 2 cm further along world x.
        mount = TransformStamped(child_frame_id="base_link")
        mount.header.frame_id = "world"
        mount.transform.translation.x, mount.transform.translation.z = 0.02, 0.75
        mount.transform.rotation.z, mount.transform.rotation.w = 1.0, 0.0  # yaw pi
        static_pub.publish(TFMessage(transforms=[mount]))

        positions = random_positions(seed=11)
        state = JointState(name=list(ALL_JOINT_NAMES), position=list(positions.values()))
        spin_until(
            executor,
            lambda: (
                mirror.joint_states_applied > 0
                and mirror.backend.body_pose("base_link")[0, 3] > 0.01
            ),
            each=lambda: joints_pub.publish(state),
        )
        expected = forward_kinematics(mirror.description, positions)
        shift = np.eye(4)
        shift[0, 3] = 0.02
        np.testing.assert_allclose(
            mirror.backend.body_pose("palm_link"), shift @ expected["palm_link"], atol=1e-6
        )
        assert np.linalg.norm(expected["palm_link"][:3, 3] - [0.0, 0.0, 0.75]) > 0.2

        track = ObjectTrack(id=9, object_type="block")
        track.pose.position.x, track.pose.position.y, track.pose.position.z = 0.55, 0.05, 0.07
        track.pose.orientation.w = 1.0
        tracks = ObjectTrackArray(tracks=[track])
        tracks.header.frame_id = "base_link"
        tracks_pub.publish(tracks)
        markers.clear()

        def has_object() -> bool:
            return any(m.ns == "objects" for a in markers for m in a.markers)

        spin_until(executor, lambda: has_object() and bool(images) and bool(diagnostics))
        latest = next(a for a in reversed(markers) if any(m.ns == "objects" for m in a.markers))
        assert latest.markers[0].action == Marker.DELETEALL
        namespaces = {m.ns for m in latest.markers[1:]}
        assert {"belt", "bins", "table", "objects"} <= namespaces
        frames = {m.ns: m.header.frame_id for m in latest.markers[1:]}
        assert frames["belt"] == "belt_link" and frames["table"] == "world"
        (obj,) = [m for m in latest.markers if m.ns == "objects"]
        assert obj.id == 9 and obj.header.frame_id == "world" and obj.type == Marker.CUBE
        block = nominal_world.objects["block"]
        assert (obj.color.r, obj.color.g, obj.color.b) == pytest.approx(block.rgba[:3])
        assert (obj.scale.x, obj.scale.y, obj.scale.z) == pytest.approx(block.size_m)
        # base_link (0.02, 0, 0.75) yawed by pi: (0.55, 0.05, 0.07) -> (-0.53, -0.05, 0.82)
        position = obj.pose.position
        assert (position.x, position.y, position.z) == pytest.approx((-0.53, -0.05, 0.82))

        spin_until(executor, lambda: "palm_error_m" in diagnostic_values(diagnostics, "mirror"))
        values = diagnostic_values(diagnostics, "mirror")
        assert float(values["palm_error_m"]) < 1e-6
        assert float(values["joint_state_age_s"]) < 5.0
        assert "base_link" in values["frames_mirrored"]

        image = images[-1]
        assert image.header.frame_id == "head_camera_optical_frame"
        assert (image.width, image.height, image.encoding) == (128, 128, "rgb8")
        assert from_image_msg(image).std() > 5.0  # a rendered scene, not a blank frame
    finally:
        executor.shutdown()
        real.destroy_node()
        node.destroy_node()


def test_generation_mode_serves_the_simulator_like_the_twin(ros_context: Context) -> None:
    node = make_node(ros_context, mode="generation", real_time_factor=2.0, markers_rate_hz=10.0)
    listener = Node("listener", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(listener)
    received: dict[str, list[Any]] = {}

    def collect(topic: str, msg_type: Any, qos: Any) -> None:
        listener.create_subscription(msg_type, topic, received.setdefault(topic, []).append, qos)

    collect("/joint_states", JointState, 10)
    collect("/head_camera/image_raw", Image, SENSOR_DATA_QOS)
    collect("/hand_camera/image_raw", Image, SENSOR_DATA_QOS)
    collect("/head_camera/camera_info", CameraInfo, SENSOR_DATA_QOS)
    collect("/head_camera/depth/image_raw", Image, SENSOR_DATA_QOS)
    collect("/belt/encoder", JointState, SENSOR_DATA_QOS)
    collect("/clock", Clock, 10)
    collect("/tf_static", TFMessage, LATCHED_QOS)
    collect("/cell/markers", MarkerArray, 10)
    try:
        assert node.autostart()
        spin_until(
            executor,
            lambda: (
                all(len(received[t]) >= 2 for t in received if t != "/tf_static")
                and bool(received["/tf_static"])
            ),
            timeout_s=20.0,
        )
    finally:
        executor.shutdown()
        listener.destroy_node()
        node.destroy_node()
    joints = received["/joint_states"][-1]
    assert list(joints.name) == list(ALL_JOINT_NAMES) and len(joints.velocity) == 18
    head = received["/head_camera/image_raw"][-1]
    assert (head.encoding, head.header.frame_id) == ("rgb8", "head_camera_optical_frame")
    assert from_image_msg(head).std() > 5.0
    depth = from_image_msg(received["/head_camera/depth/image_raw"][-1])
    assert depth.dtype == np.float32 and 0.5 < float(np.median(depth)) < 4.0
    info = received["/head_camera/camera_info"][-1]
    assert info.k[0] == pytest.approx(120.0)  # the simulated world's own intrinsics
    stamps = [m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in received["/joint_states"]]
    assert all(b > a for a, b in itertools.pairwise(stamps))  # sim time advances
    children = {t.child_frame_id for t in received["/tf_static"][0].transforms}
    assert {"base_link", "belt_link", "head_camera_optical_frame"} <= children
    assert received["/belt/encoder"][-1].name == ["belt_roller_joint"]


def test_mirror_checks_the_static_scene_while_the_belt_is_empty(ros_context: Context) -> None:
    node = make_node(ros_context, static_scene_period_s=0.1, diagnostics_rate_hz=20.0)
    real = Node("real_cell", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(real)
    diagnostics: list[DiagnosticArray] = []
    real.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    depth_pub = real.create_publisher(Image, "/head_camera/depth/image_raw", SENSOR_DATA_QOS)
    try:
        assert node.autostart()
        mode = node.mode
        view = mode.mirror.render_depth("head_camera")  # type: ignore[union-attr]
        for offset_m, verdict in ((0.0, "same"), (0.05, "different")):
            cell_view = to_image_msg(np.where(view > 0, view + offset_m, 0.0), "32FC1")

            def compared(verdict: str = verdict) -> bool:
                scene = mode.static_scene  # type: ignore[union-attr]
                return scene is not None and scene.verdict == verdict

            spin_until(executor, compared, each=lambda m=cell_view: depth_pub.publish(m))

            def reported(verdict: str = verdict) -> bool:
                scene = diagnostic_values(diagnostics, "mirror").get("static_scene", "")
                return scene.startswith(verdict)

            spin_until(executor, reported)
        status = next(s for a in reversed(diagnostics) for s in a.status if "mirror" in s.name)
        assert status.level == DiagnosticStatus.WARN
        assert "static scene 50 mm median off the mirror's view" in status.message
    finally:
        executor.shutdown()
        real.destroy_node()
        node.destroy_node()
