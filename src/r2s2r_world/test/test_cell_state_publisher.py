"""cell_state_publisher: /robot_description latched, /tf_static + /tf give the description's FK."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 200)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from r2s2r_common.config import ConfigError, load_config
from r2s2r_common.image_conversion import to_image_msg
from r2s2r_common.ros.qos import LATCHED_QOS, SENSOR_DATA_QOS
from r2s2r_common.topics import DIAGNOSTICS, HEAD_DEPTH
from r2s2r_description.cell import build_description
from r2s2r_description.model import forward_kinematics
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.tf_tree import (
    FrameTransform,
    compose,
    layout_from_world_file,
)
from r2s2r_description.urdf import to_urdf, urdf_forward_kinematics
from r2s2r_testing.joints import random_positions
from r2s2r_world.cell_identity import identity_from_depth
from r2s2r_world.nodes.cell_state_publisher import (
    CellStatePublisher,
    CellStatePublisherConfig,
)
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String

from tf2_msgs.msg import TFMessage

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"


def spin_until(
    executor: SingleThreadedExecutor, done: Callable[[], bool], timeout_s: float = 5.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    assert done(), "timed out waiting for messages"


def from_msgs(messages: list[TFMessage]) -> list[FrameTransform]:
    result = []
    for message in messages:
        for t in message.transforms:
            tr, q = t.transform.translation, t.transform.rotation
            result.append(
                FrameTransform(
                    t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z), (q.w, q.x, q.y, q.z)
                )
            )
    return result


def make(context: Context, **params: Any) -> CellStatePublisher:
    overrides = [Parameter(name, value=value) for name, value in params.items()]
    return CellStatePublisher(context=context, parameter_overrides=overrides)


def test_late_subscriber_gets_description_and_tf_matches_forward_kinematics(
    ros_context: Context,
) -> None:
    node = make(ros_context)
    listener = Node("listener", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(listener)
    try:
        executor.spin_once(timeout_sec=0.1)  # the node published before anyone listened
        descriptions: list[String] = []
        statics: list[TFMessage] = []
        dynamic: list[TFMessage] = []
        listener.create_subscription(String, "/robot_description", descriptions.append, LATCHED_QOS)
        listener.create_subscription(TFMessage, "/tf_static", statics.append, LATCHED_QOS)
        listener.create_subscription(TFMessage, "/tf", dynamic.append, 100)
        spin_until(executor, lambda: bool(descriptions) and bool(statics))
        urdf_text = descriptions[0].data
        description = build_description()
        assert urdf_text == to_urdf(description)

        positions = random_positions(seed=3)
        publisher = listener.create_publisher(JointState, "/joint_states", 10)
        state = JointState(name=list(ALL_JOINT_NAMES), position=list(positions.values()))
        state.header.stamp.sec = 42
        deadline = time.monotonic() + 5.0
        while not dynamic and time.monotonic() < deadline:
            publisher.publish(state)
            executor.spin_once(timeout_sec=0.05)
        assert dynamic
        moving = from_msgs(dynamic[:1])
        assert {t.child for t in moving} == {
            j.child for j in description.movable_joints
        }  # one transform per revolute joint, nothing else
        assert all(t.header.stamp.sec == 42 for t in dynamic[0].transforms)
        poses = compose(from_msgs(statics) + moving, "world")
        expected = forward_kinematics(description, positions)
        rviz = urdf_forward_kinematics(urdf_text, positions)  # what rviz computes from the URDF
        assert set(poses) == set(expected)
        for link, pose in expected.items():
            np.testing.assert_allclose(poses[link], pose, atol=1e-9, err_msg=link)
            # URDF text carries 9 significant digits: agreement to 1e-7 (sub-micrometre).
            np.testing.assert_allclose(rviz[link], pose, atol=1e-7, err_msg=link)
        assert np.linalg.norm(expected["palm_link"][:3, 3] - expected["base_link"][:3, 3]) > 0.1
    finally:
        executor.shutdown()
        listener.destroy_node()
        node.destroy_node()


def test_malformed_and_unknown_joint_states_are_counted(ros_context: Context) -> None:
    node = make(ros_context, publish_fixed=False)
    listener = Node("listener", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(listener)
    dynamic: list[TFMessage] = []
    listener.create_subscription(TFMessage, "/tf", dynamic.append, 100)
    publisher = listener.create_publisher(JointState, "/joint_states", 10)
    try:
        bad = JointState(name=["elbow_joint", "wrist_1_joint"], position=[0.1])
        partial = JointState(name=["elbow_joint", "belt_roller_joint"], position=[0.5, 3.0])
        deadline = time.monotonic() + 5.0
        while not dynamic and time.monotonic() < deadline:
            publisher.publish(bad)
            publisher.publish(partial)
            executor.spin_once(timeout_sec=0.05)
        spin_until(executor, lambda: node.rejected >= 1)
        assert "1 positions" in node.last_error
        assert node.unknown_joints == {"belt_roller_joint"}
        (transform,) = dynamic[0].transforms
        assert transform.child_frame_id == "forearm_link"
        assert transform.header.stamp.sec > 0  # zero stamp replaced by the node's clock
    finally:
        executor.shutdown()
        listener.destroy_node()
        node.destroy_node()


def test_world_path_layout_and_bad_values(ros_context: Context, tmp_path: Path) -> None:
    world = yaml.safe_load(NOMINAL.read_text())
    world["robot"]["base_pose"]["xyz_m"] = [0.02, -0.03, 0.76]
    moved = tmp_path / "grounded.yaml"
    moved.write_text(yaml.safe_dump(world))
    node = make(ros_context, world_path=str(moved))
    try:
        np.testing.assert_allclose(
            forward_kinematics(node.description)["base_link"][:3, 3], [0.02, -0.03, 0.76]
        )
        cad = forward_kinematics(build_description())
        from_file = forward_kinematics(build_description(layout_from_world_file(NOMINAL)))
        for link, pose in cad.items():  # nominal.yaml repeats the CAD layout (to 1e-9 rad)
            np.testing.assert_allclose(from_file[link], pose, atol=1e-8, err_msg=link)
        # Runtime: a missing file is refused with the reason; a good one applies.
        result = node.set_parameters([Parameter("world_path", value="/no/such/world.yaml")])[0]
        assert not result.successful and "file not found" in result.reason
        assert node.set_parameters([Parameter("world_path", value=str(NOMINAL))])[0].successful
        np.testing.assert_allclose(
            forward_kinematics(node.description)["base_link"][:3, 3], [0.0, 0.0, 0.75]
        )
    finally:
        node.destroy_node()
    del world["belt"]["pose"]
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(world))
    with pytest.raises(ConfigError, match=r"belt\.pose"):
        make(ros_context, world_path=str(broken))


def test_shipped_parameter_file_matches_the_schema() -> None:
    path = REPO / "config" / "nodes" / "cell_state_publisher.yaml"
    config = load_config(CellStatePublisherConfig, path, "cell_state_publisher")
    assert config.model_dump() == CellStatePublisherConfig().model_dump()


def write_artifact(path: Path, overrides: dict[str, Any]) -> Path:
    """A minimal grounding artifact: only the section the publisher reads (world_overrides)."""
    path.write_text(yaml.safe_dump({"schema_version": 1, "world_overrides": overrides}))
    return path


GROUNDED_BELT = {"xyz_m": [0.556, 0.004, 0.797], "rpy_rad": [0.0, 0.0, 1.5795]}
GROUNDED_HEAD = {"xyz_m": [1.31, 0.01, 1.74], "rpy_rad": [0.01, 0.69, 3.13]}


def test_grounding_artifact_poses_go_out_on_tf_static(ros_context: Context, tmp_path: Path) -> None:
    artifact = write_artifact(
        tmp_path / "artifact.yaml",
        {
            "cameras": {"head": {"fx_px": 121.0, "pose": GROUNDED_HEAD}},  # intrinsics: ignored
            "belt": {"pose": GROUNDED_BELT, "roller_radius_m": 0.0306},
            "bins": {"bin_1": {"pose": {"xyz_m": [-0.41, 0.01, 0.75], "rpy_rad": [0, 0, 0.03]}}},
        },
    )
    node = make(ros_context, grounding_artifact=str(artifact))
    listener = Node("listener", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(listener)
    try:
        statics: list[TFMessage] = []
        listener.create_subscription(TFMessage, "/tf_static", statics.append, LATCHED_QOS)
        spin_until(executor, lambda: bool(statics))
        edges = {(t.parent, t.child): t for t in from_msgs(statics)}
        poses = compose(list(edges.values()), "world")
        cad = forward_kinematics(build_description())
        np.testing.assert_allclose(poses["belt_link"][:3, 3], GROUNDED_BELT["xyz_m"], atol=1e-12)
        belt_yaw = np.arctan2(poses["belt_link"][1, 0], poses["belt_link"][0, 0])
        assert belt_yaw == pytest.approx(1.5795, abs=1e-9)
        np.testing.assert_allclose(
            poses["head_camera_link"][:3, 3], GROUNDED_HEAD["xyz_m"], atol=1e-12
        )
        np.testing.assert_allclose(poses["bin_1_link"][:3, 3], [-0.41, 0.01, 0.75], atol=1e-12)
        # What the artifact does not ground keeps the CAD value, and the optical frame follows.
        for frame in ("bin_0_link", "base_link"):
            np.testing.assert_allclose(poses[frame], cad[frame], atol=1e-12, err_msg=frame)
        optical_in_link = np.linalg.inv(cad["head_camera_link"]) @ cad["head_camera_optical_frame"]
        np.testing.assert_allclose(
            np.linalg.inv(poses["head_camera_link"]) @ poses["head_camera_optical_frame"],
            optical_in_link,
            atol=1e-12,
        )
        # The same grounded layout feeds /robot_description.
        assert forward_kinematics(node.description)["belt_link"][:3, 3] == pytest.approx(
            GROUNDED_BELT["xyz_m"]
        )
    finally:
        executor.shutdown()
        listener.destroy_node()
        node.destroy_node()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (None, "file not found"),
        ({"belt": {"pose": {"xyz_m": [0.5, 0.0]}}}, r"belt\.pose.*xyz_m"),
        ({"bins": {"bin_9": {"pose": GROUNDED_BELT}}}, r"bins\.bin_9: the cell layout has no"),
        ({"cameras": "head"}, r"world_overrides.cameras = 'head': not a mapping"),
        (
            {"cameras": {"head": {"pose": {"xyz_m": [float("nan"), 0.0, 1.7]}}}},
            r"world_overrides.cameras.head.pose.xyz_m\[0\] = nan: expected finite numbers",
        ),
    ],
)
def test_bad_grounding_artifact_is_refused_at_start(
    ros_context: Context, tmp_path: Path, overrides: dict[str, Any] | None, expected: str
) -> None:
    path = tmp_path / "artifact.yaml"
    if overrides is not None:
        write_artifact(path, overrides)
    with pytest.raises(ConfigError, match=expected):
        make(ros_context, grounding_artifact=str(path))


def test_tf_is_throttled_to_publish_frequency_of_the_stamps(ros_context: Context) -> None:
    node = make(ros_context, publish_fixed=False, publish_frequency=20.0)
    listener = Node("listener", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(listener)
    dynamic: list[TFMessage] = []
    listener.create_subscription(TFMessage, "/tf", dynamic.append, 1000)
    publisher = listener.create_publisher(JointState, "/joint_states", 1000)
    positions = list(random_positions(seed=5).values())
    try:
        # Wait for discovery with one state at t = 10 s (published: the first one always is).
        first = JointState(name=list(ALL_JOINT_NAMES), position=positions)
        first.header.stamp.sec = 10
        deadline = time.monotonic() + 5.0
        while not dynamic and time.monotonic() < deadline:
            publisher.publish(first)
            executor.spin_once(timeout_sec=0.05)
        spin_until(executor, lambda: bool(dynamic))
        for k in range(1, 101):  # 0.2 s of 500 Hz joint states after t = 10 s, one at a time
            state = JointState(name=list(ALL_JOINT_NAMES), position=positions)
            state.header.stamp.sec = 10
            state.header.stamp.nanosec = k * 2_000_000
            before = node.received
            publisher.publish(state)
            spin_until(executor, lambda before=before: node.received > before)
        reset = JointState(name=list(ALL_JOINT_NAMES), position=positions)
        reset.header.stamp.sec = 1  # a reset cell: its clock went back
        publisher.publish(reset)
        spin_until(executor, lambda: any(m.transforms[0].header.stamp.sec == 1 for m in dynamic))
        executor.spin_once(timeout_sec=0.2)
        stamps = [
            (m.transforms[0].header.stamp.sec, m.transforms[0].header.stamp.nanosec)
            for m in dynamic
        ]
        # 20 Hz: t = 10.00 (the first), then 10.05, 10.10, 10.15, 10.20 s; then the reset.
        assert stamps[-1] == (1, 0)
        kept = sorted({s for s in stamps if s[0] == 10})
        assert kept == [(10, k * 50_000_000) for k in range(5)]
        assert len(stamps) == len(set(stamps))  # each stamp once: the repeats of t = 10 s dropped
        assert node.published == len(stamps)
    finally:
        executor.shutdown()
        listener.destroy_node()
        node.destroy_node()


def test_destroying_the_node_removes_its_reader_node(ros_context: Context) -> None:
    """The hidden node that takes /joint_states in batches goes with its owner, not later."""
    node = make(ros_context)
    listener = Node("listener", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(listener)
    try:

        def readers() -> list[str]:
            return [n for n in listener.get_node_names() if n.startswith("_cell_state_publisher")]

        spin_until(executor, lambda: len(readers()) == 1)
        node.destroy_node()
        node.destroy_node()  # a second destroy is harmless
        spin_until(executor, lambda: not readers())
    finally:
        executor.shutdown()
        listener.destroy_node()


def test_header_stamp_is_read_from_the_serialized_message() -> None:
    from r2s2r_common.stamps import serialized_stamp_ns as cdr_header_stamp_ns
    from rclpy.serialization import serialize_message

    state = JointState(name=list(ALL_JOINT_NAMES), position=[0.0] * len(ALL_JOINT_NAMES))
    state.header.stamp.sec, state.header.stamp.nanosec = 1_700_000_123, 456_789_012
    assert cdr_header_stamp_ns(serialize_message(state)) == 1_700_000_123_456_789_012
    assert cdr_header_stamp_ns(b"\x00\x01\x00\x00") is None  # too short
    assert cdr_header_stamp_ns(b"\x07" * 16) is None  # not a CDR encapsulation


def _static_scene(offset_m: float = 0.0) -> np.ndarray:
    """A 64 px head depth image: a table 1.2 m away (plus ``offset_m``) with a bin on it."""
    depth = np.full((64, 64), 1.2 + offset_m, np.float32)
    depth[20:35, 25:45] -= 0.25
    return depth


def write_identified_artifact(path: Path, name: str | None) -> Path:
    """An artifact that records its cell: the static scene of :func:`_static_scene`."""
    cell = identity_from_depth(_static_scene(), 1.0, name)
    data = {"schema_version": 1, "cell": cell.model_dump(mode="json"), "world_overrides": {}}
    path.write_text(yaml.safe_dump(data))
    return path


def _depth_msg(depth: np.ndarray) -> Image:
    return to_image_msg(depth, "32FC1")


@pytest.mark.parametrize(("offset_m", "refused"), [(0.0, False), (0.06, True)])
def test_the_artifact_of_another_cell_is_refused_by_its_static_scene(
    ros_context: Context, tmp_path: Path, offset_m: float, refused: bool
) -> None:
    artifact = write_identified_artifact(tmp_path / "artifact.yaml", "lab-a")
    node = make(
        ros_context, grounding_artifact=str(artifact), static_scene_window_s=0.3, cell_name="lab-a"
    )
    camera = Node("camera", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(camera)
    statuses: list[DiagnosticArray] = []
    camera.create_subscription(DiagnosticArray, DIAGNOSTICS, statuses.append, 10)
    publisher = camera.create_publisher(Image, HEAD_DEPTH, SENSOR_DATA_QOS)
    try:
        deadline = time.monotonic() + 5.0
        while node.cell_check is not None and time.monotonic() < deadline:
            publisher.publish(_depth_msg(_static_scene(offset_m)))
            executor.spin_once(timeout_sec=0.05)
        assert node.cell_check is None, "the cell check did not end"
        if refused:
            assert node.refused is not None
            assert "grounds another cell" in node.refused and "'lab-a'" in node.refused
            assert "median 60.0 mm" in node.refused
            spin_until(executor, lambda: any(s.level == DiagnosticStatus.ERROR
                                             for a in statuses for s in a.status))  # fmt: skip
        else:
            assert node.refused is None and "this is the artifact's cell" in node.cell_note
    finally:
        executor.shutdown()
        camera.destroy_node()
        node.destroy_node()


def test_a_cell_named_otherwise_is_refused_at_start_and_a_blind_cell_is_unchecked(
    ros_context: Context, tmp_path: Path
) -> None:
    artifact = write_identified_artifact(tmp_path / "artifact.yaml", "lab-a")
    with pytest.raises(ConfigError, match="grounds cell 'lab-a', but this is cell 'lab-b'"):
        make(ros_context, grounding_artifact=str(artifact), cell_name="lab-b")
    node = make(ros_context, grounding_artifact=str(artifact), static_scene_timeout_s=0.2)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    try:
        spin_until(executor, lambda: node.unchecked, timeout_s=5.0)
        assert "not checked" in node.cell_note and node.refused is None
    finally:
        executor.shutdown()
        node.destroy_node()
