"""ROS traffic for the benchmarks, each in a process of its own (so its cost is not measured).

- ``python bench/ros_traffic.py publish-recording SECONDS``: what the recorder records in
  ``bench_recorder.py``: two 128x128 rgb8 cameras at 30 Hz, ``/joint_states`` at 100 Hz, arm
  and hand commands at 10 Hz, belt speed at 20 Hz, then the trial outcome. Prints ``READY`` once
  every topic has a subscriber, waits for a line on stdin, publishes for SECONDS, and prints
  ``COUNTS {topic: messages}``.
- ``python bench/ros_traffic.py count-twin-topics SECONDS``: the matched readers of a
  demonstration session in ``bench_twin.py`` (both cameras, head depth, ``/joint_states``, the
  operator's object poses); prints ``{topic: messages received}`` after SECONDS.

Only rclpy and message types are imported here: a helper's start-up stays small.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable


def publish_recording(duration_s: float) -> None:
    """Publish a recording session's topics for ``duration_s`` (after READY and a stdin line)."""
    import numpy as np
    import rclpy
    from geometry_msgs.msg import TwistStamped
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    rclpy.init()
    node = rclpy.create_node("bench_publisher")
    pubs = {
        topic: node.create_publisher(Image, topic, qos_profile_sensor_data)
        for topic in ("/head_camera/image_raw", "/hand_camera/image_raw")
    }
    joints = node.create_publisher(JointState, "/joint_states", 10)
    arm = node.create_publisher(JointTrajectory, "/arm_controller/joint_trajectory", 10)
    hand = node.create_publisher(JointTrajectory, "/hand_controller/joint_trajectory", 10)
    belt = node.create_publisher(TwistStamped, "/belt/speed", 10)
    outcome = node.create_publisher(String, "/trial/outcome", 10)
    deadline = time.monotonic() + 20
    while any(p.get_subscription_count() == 0 for p in [*pubs.values(), joints, arm, hand, belt]):
        assert time.monotonic() < deadline, "recorder not subscribed"
        time.sleep(0.05)
    print("READY", flush=True)
    sys.stdin.readline()
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (128, 128, 3), dtype=np.uint8).tobytes() for _ in range(8)]
    counts: dict[str, int] = {}

    def bump(topic: str) -> None:
        counts[topic] = counts.get(topic, 0) + 1

    start = time.monotonic()
    tick = 0
    names = [f"j{i}" for i in range(7)] + [f"h{i}" for i in range(4)]
    while tick * 0.01 < duration_s:
        target = start + tick * 0.01
        now = time.monotonic()
        if target > now:
            time.sleep(target - now)
        stamp = node.get_clock().now().to_msg()
        js = JointState(name=names, position=[0.01 * tick] * len(names))
        js.header.stamp = stamp
        joints.publish(js)
        bump("/joint_states")
        if round(tick * 0.01 * 30) != round((tick - 1) * 0.01 * 30) or tick == 0:
            for topic, pub in pubs.items():
                img = Image(height=128, width=128, encoding="rgb8", step=384, data=frames[tick % 8])
                img.header.stamp = stamp
                pub.publish(img)
                bump(topic)
        if tick % 10 == 0:
            for controller, joint_names in ((arm, names[:7]), (hand, names[7:])):
                command = JointTrajectory(joint_names=joint_names)
                command.header.stamp = stamp
                command.points = [JointTrajectoryPoint(positions=[0.02 * tick] * len(joint_names))]
                controller.publish(command)
        if tick % 5 == 0:
            twist = TwistStamped()
            twist.header.stamp = stamp
            twist.twist.linear.x = 0.1
            belt.publish(twist)
        tick += 1
    outcome.publish(String(data="success"))
    time.sleep(0.5)
    print("COUNTS " + repr(counts), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def count_twin_topics(duration_s: float) -> None:
    """Subscribe to the twin's session topics for ``duration_s``; print the message counts."""
    import rclpy
    from r2s2r_common.ros.qos import RELIABLE_QOS, SENSOR_DATA_QOS
    from rclpy.node import Node
    from sensor_msgs.msg import Image, JointState

    from r2s2r_interfaces.msg import ObjectTrackArray

    rclpy.init()
    node = Node("bench_twin_subscriber")
    counts: dict[str, int] = {}

    def counter(topic: str) -> Callable[[object], None]:
        counts[topic] = 0

        def callback(_msg: object) -> None:
            counts[topic] += 1

        return callback

    for topic in (
        "/head_camera/image_raw",
        "/hand_camera/image_raw",
        "/head_camera/depth/image_raw",
    ):
        node.create_subscription(Image, topic, counter(topic), SENSOR_DATA_QOS)
    node.create_subscription(JointState, "/joint_states", counter("/joint_states"), RELIABLE_QOS)
    poses = "/twin/operator/object_poses"
    node.create_subscription(ObjectTrackArray, poses, counter(poses), RELIABLE_QOS)
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(counts)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("traffic", choices=["publish-recording", "count-twin-topics"])
    parser.add_argument("seconds", type=float)
    args = parser.parse_args()
    if args.traffic == "publish-recording":
        publish_recording(args.seconds)
    else:
        count_twin_topics(args.seconds)


if __name__ == "__main__":
    main()
