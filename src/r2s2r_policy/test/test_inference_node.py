"""In-process tests of the policy_inference node: spec check, chunks, safety, diagnostics."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

import torch  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402
from r2s2r_common.image_conversion import to_image_msg  # noqa: E402
from r2s2r_common.ros.qos import RELIABLE_QOS, SENSOR_DATA_QOS  # noqa: E402
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HOME_POSITIONS  # noqa: E402
from r2s2r_policy.checkpoint import save_checkpoint  # noqa: E402
from r2s2r_policy.evaluation.baseline import (  # noqa: E402
    TINY_MODEL_PARAMS,
    robot_policy_spec,
    untrained_policy,
)
from r2s2r_policy.nodes.policy_inference import PolicyInferenceNode  # noqa: E402
from r2s2r_testing.ros import ros_context_of, spin_executor_until  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

MEASURED = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES]) + 0.02


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=2)
    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", policy)


class Sensors:
    """Stands in for the robot: publishes cameras, joint states and belt speed on demand."""

    def __init__(self, context: object) -> None:
        self.node = Node("fake_robot", context=context)
        self.images = {
            key: self.node.create_publisher(Image, f"/{key}/image_raw", SENSOR_DATA_QOS)
            for key in ("head_camera", "hand_camera")
        }
        self.joints = self.node.create_publisher(JointState, "/joint_states", 10)
        self.belt = self.node.create_publisher(TwistStamped, "/belt/speed", 10)
        self.received: dict[str, list[JointTrajectory]] = {"arm": [], "hand": []}
        self.diagnostics: list[DiagnosticArray] = []
        for controller in ("arm", "hand"):
            self.node.create_subscription(
                JointTrajectory,
                f"/{controller}_controller/joint_trajectory",
                lambda msg, c=controller: self.received[c].append(msg),
                RELIABLE_QOS,
            )
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.cameras_on = True
        self.encoding = "rgb8"
        self.node.create_timer(0.02, self.publish)

    def publish(self) -> None:
        if self.cameras_on:
            rgb = np.full((48, 64, 3), 90, dtype=np.uint8)
            for publisher in self.images.values():
                if self.encoding == "mono8":
                    publisher.publish(to_image_msg(rgb[:, :, 0], "mono8"))
                else:
                    publisher.publish(to_image_msg(rgb, "rgb8"))
        self.joints.publish(JointState(name=list(ALL_JOINT_NAMES), position=MEASURED.tolist()))
        belt = TwistStamped()
        belt.twist.linear.x = 0.1
        self.belt.publish(belt)


Graph = tuple[PolicyInferenceNode, Sensors, Callable[..., bool]]


def make_graph(checkpoint: Path, **overrides: object) -> Iterator[Graph]:
    with ros_context_of() as context:
        params = {
            "checkpoint_path": str(checkpoint),
            "image_height_px": 32,
            "image_width_px": 32,
            "stale_observation_s": 0.2,
            "diagnostics_period_s": 0.2,
            **overrides,
        }
        node = PolicyInferenceNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()],
        )
        sensors = Sensors(context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(sensors.node)

        def spin_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
            return spin_executor_until(executor, predicate, timeout_s)

        try:
            yield node, sensors, spin_until
        finally:
            if node.engine is not None:
                node.engine.stop(send_hold=False)
            executor.shutdown()
            node.destroy_node()
            sensors.node.destroy_node()


@pytest.fixture
def graph(checkpoint: Path) -> Iterator[Graph]:
    yield from make_graph(checkpoint)


def test_spec_mismatch_refuses_configure_with_every_mismatch(checkpoint: Path) -> None:
    joints = [n for n in ALL_JOINT_NAMES if n != "wrist_3_joint"]
    for node, _, _ in make_graph(
        checkpoint, image_height_px=64, joint_names=joints, has_belt_speed=False
    ):
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        error = node.last_error
        assert "head_camera_rgb: policy expects 32x32 px (HxW), robot gives 64x32" in error
        assert "hand_camera_rgb" in error
        assert "joint_names: robot lacks ['wrist_3_joint']" in error
        assert "belt_speed_mps: policy needs belt speed" in error
        assert node.engine is None and node._state_machine.current_state[1] == "unconfigured"
        assert node.trigger_activate() != TransitionCallbackReturn.SUCCESS


def test_missing_checkpoint_refuses_configure(tmp_path: Path) -> None:
    for node, _, _ in make_graph(tmp_path / "nope"):
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert "not a policy checkpoint" in node.last_error


def test_active_node_publishes_one_trajectory_per_controller(graph: Graph) -> None:
    node, sensors, spin_until = graph
    assert node.autostart()
    assert spin_until(
        lambda: len(sensors.received["arm"]) >= 3 and len(sensors.received["hand"]) >= 3
    )
    arm, hand = sensors.received["arm"][-1], sensors.received["hand"][-1]
    assert list(arm.joint_names) == list(ARM_JOINT_NAMES) and len(hand.joint_names) == 12
    assert len(arm.points) == 4 and len(hand.points) == 4
    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in arm.points]
    # Point k is due (k + 1)·dt after the image; the time since the image arrived is taken off.
    spent = 0.1 - times[0]
    assert 0.0 <= spent < 0.05
    np.testing.assert_allclose(np.array(times) + spent, [0.1, 0.2, 0.3, 0.4], atol=1e-6)
    assert arm.header.stamp.sec == 0 and arm.header.stamp.nanosec == 0  # start on receipt
    # The untrained policy stays near home; within 0.5 rad of the measured state.
    assert np.max(np.abs(np.array(arm.points[0].positions) - MEASURED[:6])) < 0.5
    assert spin_until(
        lambda: any(
            {kv.key: kv.value for kv in d.status[0].values}.get("commands_sent", "0") != "0"
            for d in sensors.diagnostics
        )
    )
    values = {kv.key: kv.value for kv in sensors.diagnostics[-1].status[0].values}
    assert float(values["inference_latency_p50_ms"]) > 0.0
    assert "observation_age_ms.head_camera_rgb" in values and "safety_velocity_clamp" in values


def test_stale_cameras_hold_once_then_nothing(graph: Graph) -> None:
    node, sensors, spin_until = graph
    assert node.autostart()
    assert spin_until(lambda: len(sensors.received["arm"]) >= 2)
    sensors.cameras_on = False  # fault: the cameras stop
    assert spin_until(lambda: len(sensors.received["arm"][-1].points) == 1, timeout_s=3.0)
    hold = sensors.received["arm"][-1]
    np.testing.assert_allclose(hold.points[0].positions, MEASURED[:6], atol=1e-9)
    count = len(sensors.received["arm"])
    spin_until(lambda: False, timeout_s=0.6)
    assert len(sensors.received["arm"]) == count  # nothing while stale
    assert node.engine is not None and node.engine.stats().interventions["stale_observation"] == 1
    sensors.cameras_on = True
    assert spin_until(lambda: len(sensors.received["arm"]) > count + 1)
    assert len(sensors.received["arm"][-1].points) == 4  # commanding again


def test_deactivate_stops_commands_at_once_with_a_hold(graph: Graph) -> None:
    node, sensors, spin_until = graph
    assert node.autostart()
    assert spin_until(lambda: len(sensors.received["arm"]) >= 3)
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    spin_until(lambda: False, timeout_s=0.5)  # deliver what was sent
    arm = sensors.received["arm"]
    holds = [i for i, msg in enumerate(arm) if len(msg.points) == 1]
    assert holds == [len(arm) - 1]  # the last message is the only hold
    count = len(arm)
    spin_until(lambda: False, timeout_s=0.5)
    assert len(sensors.received["arm"]) == count


def test_bad_image_encoding_is_dropped_and_counted(graph: Graph) -> None:
    node, sensors, spin_until = graph
    sensors.encoding = "mono8"
    assert node.autostart()
    assert spin_until(lambda: node._dropped.get("image", 0) >= 4)
    assert sensors.received["arm"] == []  # no camera input: never commands


def _sensed_latent(checkpoint: Path) -> np.ndarray:
    """The latent of what Sensors publishes (uniform gray images, MEASURED joints, 0.1 m/s)."""
    from r2s2r_policy.checkpoint import load_checkpoint

    policy = load_checkpoint(checkpoint).policy
    image = np.full((32, 32, 3), 90, dtype=np.uint8)
    observation = {
        "head_camera_rgb": image,
        "hand_camera_rgb": image,
        "joint_pos_rad": MEASURED.astype(np.float32),
        "belt_speed_mps": np.array([0.1], dtype=np.float32),
    }
    return policy.predict_chunk_and_latent(observation)[1]


def _with_index(checkpoint: Path, folder: Path, sensed_is_real: bool) -> Path:
    """Copy the checkpoint with an index whose real (or sim) cluster is what Sensors shows."""
    from r2s2r_policy.analysis.index import LatentIndex
    from r2s2r_policy.checkpoint import load_checkpoint
    from r2s2r_policy.models.base import policy_fingerprint

    copy = folder / "with_index"
    shutil.copytree(checkpoint, copy)
    latent = _sensed_latent(checkpoint)
    spread = np.random.default_rng(0).normal(0.0, 0.01, (40, latent.size))
    near, far = latent + spread, latent + 50.0 + spread
    real, sim = (near, far) if sensed_is_real else (far, near)
    fingerprint = policy_fingerprint(load_checkpoint(checkpoint).policy)
    LatentIndex(real, sim, k=10, fingerprint=fingerprint).save(copy)
    return copy


def _likeness_statuses(sensors: Sensors) -> list[DiagnosticStatus]:
    return [
        status
        for array in sensors.diagnostics
        for status in array.status
        if status.name == "policy_inference: real-likeness"
    ]


def _values(status: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def test_real_likeness_monitor_publishes_each_inference(checkpoint: Path, tmp_path: Path) -> None:
    for node, sensors, spin_until in make_graph(_with_index(checkpoint, tmp_path, True)):
        assert node.autostart()
        assert node.engine is not None and node.engine.monitor is not None
        assert spin_until(lambda s=sensors: len(_likeness_statuses(s)) >= 3)
        status = _likeness_statuses(sensors)[-1]
        values = _values(status)
        assert status.level == DiagnosticStatus.OK and float(values["real_likeness"]) == 1.0
        assert float(values["real_likeness_mean"]) == 1.0
        assert float(values["nearest_real_distance"]) < 0.5  # the cluster's spread
        # One array per inference, numbered 1, 2, 3, ...
        judged = [int(_values(s)["inferences_judged"]) for s in _likeness_statuses(sensors)]
        assert judged == list(range(1, len(judged) + 1))


def test_real_likeness_monitor_warns_on_sim_derived_behavior(
    checkpoint: Path, tmp_path: Path
) -> None:
    for node, sensors, spin_until in make_graph(_with_index(checkpoint, tmp_path, False)):
        assert node.autostart()
        assert spin_until(lambda s=sensors: len(_likeness_statuses(s)) >= 2)
        status = _likeness_statuses(sensors)[-1]
        assert status.level == DiagnosticStatus.WARN
        assert float(_values(status)["real_likeness_mean"]) == 0.0
        assert status.message.startswith("running on sim-derived behavior")


def test_real_likeness_monitor_off_without_index_or_when_disabled(
    checkpoint: Path, tmp_path: Path
) -> None:
    for node, _, _ in make_graph(checkpoint):
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.engine is not None and node.engine.monitor is None
    indexed = _with_index(checkpoint, tmp_path, True)
    for node, _, _ in make_graph(indexed, real_likeness_monitor=False):
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.engine is not None and node.engine.monitor is None


def test_an_index_of_other_weights_refuses_configure(checkpoint: Path, tmp_path: Path) -> None:
    from r2s2r_policy.analysis.index import LatentIndex

    copy = _with_index(checkpoint, tmp_path, True)
    latent = _sensed_latent(checkpoint)
    LatentIndex(latent[None] + 1.0, latent[None], k=1, fingerprint="0123456789abcdef").save(copy)
    for node, _, _ in make_graph(copy):
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert "latent_index.npz: built for another policy (weights 0123456789abcdef" in (
            node.last_error
        )
        assert "real_likeness_monitor false" in node.last_error and node.engine is None


def test_a_truncated_index_refuses_configure_naming_it(checkpoint: Path, tmp_path: Path) -> None:
    """A latent index cut short inside the checkpoint: one line naming the file, not 'see above'."""
    from r2s2r_policy.analysis.index import LATENT_INDEX_FILE, LatentIndex

    copy = _with_index(checkpoint, tmp_path, True)
    latent = _sensed_latent(checkpoint)
    LatentIndex(latent[None], latent[None], k=1, fingerprint="0123456789abcdef").save(copy)
    index = copy / LATENT_INDEX_FILE
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    for node, _, _ in make_graph(copy):
        assert not node.autostart()
        assert f"{LATENT_INDEX_FILE}: not a latent index (BadZipFile" in node.last_error


def test_a_second_commander_stops_the_policy_until_rearmed(graph: Graph) -> None:
    """Another publisher on the arm's topic: one hold, ERROR on /diagnostics, ~/rearm resumes."""
    node, sensors, spin_until = graph
    assert node.autostart()
    assert spin_until(lambda: len(sensors.received["arm"]) >= 2)
    intruder = sensors.node.create_publisher(
        JointTrajectory, "/arm_controller/joint_trajectory", RELIABLE_QOS
    )
    assert spin_until(lambda: len(sensors.received["arm"][-1].points) == 1, timeout_s=3.0)
    assert node.engine is not None and node.engine.safety_stop is not None
    assert node.engine.safety_stop.cause.value == "second_commander"

    def error_named() -> bool:
        return any(
            status.level == DiagnosticStatus.ERROR and "second_commander" in status.message
            for array in sensors.diagnostics
            for status in array.status
        )

    assert spin_until(error_named, timeout_s=3.0)
    count = len(sensors.received["arm"])
    spin_until(lambda: False, timeout_s=0.5)
    assert len(sensors.received["arm"]) == count  # held: nothing more
    sensors.node.destroy_publisher(intruder)
    client = sensors.node.create_client(Trigger, "/policy_inference/rearm")
    assert client.wait_for_service(timeout_sec=2.0)
    future = client.call_async(Trigger.Request())
    assert spin_until(future.done)
    assert future.result().success and "second_commander" in future.result().message
    assert spin_until(lambda: len(sensors.received["arm"][-1].points) == 4)  # commanding again
