import threading
import time
from pathlib import Path

import pytest
import rclpy
from r2s2r_common.config import ConfigError
from r2s2r_recorder.bag_reading import opened_bag, read_episode_info
from r2s2r_recorder.nodes.recorder_node import RecorderNode
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger


def wait_for(predicate, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def call(node: rclpy.node.Node, name: str) -> Trigger.Response:
    client = node.create_client(Trigger, f"/recorder/{name}")
    assert client.wait_for_service(timeout_sec=5.0)
    future = client.call_async(Trigger.Request())
    wait_for(future.done)
    node.destroy_client(client)
    return future.result()


def test_records_two_topics_between_start_and_stop(
    ros_context: rclpy.Context, tmp_path: Path
) -> None:
    recorder = RecorderNode(
        context=ros_context,
        parameter_overrides=[
            Parameter("output_dir", value=str(tmp_path)),
            Parameter("topics", value=["/joint_states", "/head_camera/image_raw"]),
            Parameter("qos_overrides", value=["/head_camera/image_raw=sensor_data"]),
            Parameter("discovery_period_s", value=0.1),
            Parameter("episode.outcome", value="success"),
            Parameter("episode.object_type", value="cylinder"),
        ],
    )
    client = rclpy.create_node("recorder_test_client", context=ros_context)
    joints_pub = client.create_publisher(JointState, "/joint_states", 10)
    image_pub = client.create_publisher(Image, "/head_camera/image_raw", qos_profile_sensor_data)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(recorder)
    executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        wait_for(
            lambda: (
                joints_pub.get_subscription_count() > 0 and image_pub.get_subscription_count() > 0
            )
        )
        assert not call(client, "stop_episode").success  # nothing to stop yet
        started = call(client, "start_episode")
        assert started.success, started.message
        time.sleep(0.2)
        for i in range(20):
            msg = JointState(name=["a"], position=[float(i)])
            msg.header.stamp.nanosec = i * 10_000_000
            joints_pub.publish(msg)
            if i % 2 == 0:
                image = Image(height=2, width=2, encoding="rgb8", step=6, data=bytes(range(12)))
                image.header.stamp.nanosec = i * 10_000_000
                image_pub.publish(image)
            time.sleep(0.01)
        time.sleep(0.3)
        stopped = call(client, "stop_episode")
        assert stopped.success, stopped.message
        assert "/joint_states" in stopped.message
        bag = tmp_path / "episode_000000"
        with opened_bag(bag) as reader:
            counts = {c.topic: c.msgcount for c in reader.connections}
            assert counts == {"/joint_states": 20, "/head_camera/image_raw": 10}
            types = {c.topic: c.msgtype for c in reader.connections}
            assert types["/head_camera/image_raw"] == "sensor_msgs/msg/Image"
        info = read_episode_info(bag)
        assert info is not None and info.outcome == "success" and info.object_type == "cylinder"
        # Foot pedal: next starts episode 1; discard throws it away.
        assert call(client, "next_episode").success
        assert (tmp_path / "episode_000001").is_dir()
        assert call(client, "discard_episode").success
        assert not (tmp_path / "episode_000001").exists()
        # A new start after a discard numbers on from the existing episodes.
        assert call(client, "start_episode").message.endswith("episode_000001")
    finally:
        executor.shutdown()
        recorder.finish()  # what SIGINT does: the open episode is closed properly
        recorder.destroy_node()
        client.destroy_node()
    assert read_episode_info(tmp_path / "episode_000001") is not None
    assert not (tmp_path / "episode_000001" / "INCOMPLETE").exists()


def test_bad_qos_parameter_fails_at_startup(ros_context: rclpy.Context) -> None:
    with pytest.raises(ConfigError, match="qos_overrides"):
        RecorderNode(
            context=ros_context,
            parameter_overrides=[Parameter("qos_overrides", value=["/tf=fast"])],
        )
