"""A fast topic taken in batches: every message, in order, one callback per period."""

from __future__ import annotations

import time

import pytest
import rclpy
from r2s2r_common.ros.batched import BatchedSubscription
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

QOS = QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE)


def _spin_until(executor: SingleThreadedExecutor, done, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.01)


def test_every_message_arrives_in_order_in_few_batches(ros_context: rclpy.Context) -> None:
    node = rclpy.create_node("batched_owner", namespace="/cell", context=ros_context)
    talker = rclpy.create_node("batched_talker", context=ros_context)
    batches: list[list[JointState]] = []
    stream = BatchedSubscription(node, JointState, "joint_states", batches.append, QOS, 0.05)
    # The owner resolves the name: relative to its namespace.
    assert stream.topic_name == "/cell/joint_states"
    publisher = talker.create_publisher(JointState, "/cell/joint_states", QOS)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    _spin_until(executor, lambda: publisher.get_subscription_count() > 0)
    assert node.get_node_names().count("batched_owner") == 1
    for index in range(200):
        publisher.publish(JointState(name=["a"], position=[float(index)]))
    _spin_until(executor, lambda: sum(len(b) for b in batches) >= 200)
    received = [msg.position[0] for batch in batches for msg in batch]
    assert received == [float(index) for index in range(200)]
    # One callback per period with what queued, not one per message.
    assert len(batches) < 50
    assert stream.taken == 200
    stream.destroy()
    assert not any("_batched_owner_reader" in name for name in node.get_node_names())
    executor.shutdown()
    node.destroy_node()
    talker.destroy_node()


def test_raw_batches_are_serialized_messages_and_the_period_changes(
    ros_context: rclpy.Context,
) -> None:
    node = rclpy.create_node("batched_raw", context=ros_context)
    batches: list[list[bytes]] = []
    stream = BatchedSubscription(node, JointState, "/js", batches.append, QOS, 10.0, raw=True)
    publisher = node.create_publisher(JointState, "/js", QOS)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    _spin_until(executor, lambda: publisher.get_subscription_count() > 0)
    publisher.publish(JointState(name=["b"], position=[2.5]))
    # A 10 s period: nothing drained yet; a shorter one takes effect.
    _spin_until(executor, lambda: bool(batches), timeout_s=0.5)
    assert batches == []
    stream.set_period(0.02)
    _spin_until(executor, lambda: bool(batches))
    assert isinstance(batches[0][0], bytes)
    assert deserialize_message(batches[0][0], JointState).position[0] == 2.5
    with pytest.raises(ValueError, match="period_s"):
        stream.set_period(0.0)
    stream.destroy()
    executor.shutdown()
    node.destroy_node()
