"""Recorder benchmark: two 128x128 rgb8 cameras at 30 Hz + joint_states at 100 Hz.

A publisher process publishes for ``--duration-s`` seconds (also arm/hand commands at 10 Hz
and belt speed at 20 Hz so the bag converts); the recorder node runs in this process. Reports
messages lost (published vs recorded, plus gaps in header stamps), CPU use of the recording
process, conversion throughput, and size on disk per minute. Last line: one JSON object.

Usage: python bench/bench_recorder.py [--duration-s 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

PUBLISHER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState
    from geometry_msgs.msg import TwistStamped
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    from std_msgs.msg import String
    duration = float(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node("bench_publisher")
    pubs = {
        "/head_camera/image_raw": node.create_publisher(Image, "/head_camera/image_raw",
                                                        qos_profile_sensor_data),
        "/hand_camera/image_raw": node.create_publisher(Image, "/hand_camera/image_raw",
                                                        qos_profile_sensor_data),
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
    counts = {}
    def bump(topic):
        counts[topic] = counts.get(topic, 0) + 1
    start = time.monotonic()
    tick = 0
    names = ["j%d" % i for i in range(7)] + ["h%d" % i for i in range(4)]
    while tick * 0.01 < duration:
        target = start + tick * 0.01
        now = time.monotonic()
        if target > now:
            time.sleep(target - now)
        stamp = node.get_clock().now().to_msg()
        js = JointState(name=names, position=[0.01 * tick] * len(names))
        js.header.stamp = stamp
        joints.publish(js); bump("/joint_states")
        if round(tick * 0.01 * 30) != round((tick - 1) * 0.01 * 30) or tick == 0:
            for topic, pub in pubs.items():
                img = Image(height=128, width=128, encoding="rgb8", step=384,
                            data=frames[tick % 8])
                img.header.stamp = stamp
                pub.publish(img); bump(topic)
        if tick % 10 == 0:
            for pub, jn in ((arm, names[:7]), (hand, names[7:])):
                cmd = JointTrajectory(joint_names=jn)
                cmd.header.stamp = stamp
                cmd.points = [JointTrajectoryPoint(positions=[0.02 * tick] * len(jn))]
                pub.publish(cmd)
        if tick % 5 == 0:
            tw = TwistStamped(); tw.header.stamp = stamp; tw.twist.linear.x = 0.1
            belt.publish(tw)
        tick += 1
    outcome.publish(String(data="success"))
    time.sleep(0.5)
    print("COUNTS " + repr(counts), flush=True)
    node.destroy_node()
    rclpy.shutdown()
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration-s", type=float, default=10.0)
    args = parser.parse_args()
    os.environ["ROS_DOMAIN_ID"] = str(random.randint(1, 200))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

    import rclpy
    from r2s2r_recorder.bag_to_dataset import convert_bags
    from r2s2r_recorder.bag_writer import opened_bag
    from r2s2r_recorder.config import ConversionConfig
    from r2s2r_recorder.nodes.recorder_node import RecorderNode
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    work = Path(tempfile.mkdtemp(prefix="bench_recorder_"))
    rclpy.init()
    node = RecorderNode(
        parameter_overrides=[
            Parameter("output_dir", value=str(work / "bags")),
            Parameter(
                "qos_overrides",
                value=["/head_camera/image_raw=sensor_data", "/hand_camera/image_raw=sensor_data"],
            ),
            Parameter("discovery_period_s", value=0.2),
        ]
    )
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    pub = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, str(args.duration_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert pub.stdin is not None and pub.stdout is not None
    assert pub.stdout.readline().strip() == "READY"
    time.sleep(0.5)
    node.engine.start_episode(node._episode_info())
    cpu0, wall0 = time.process_time(), time.monotonic()
    pub.stdin.write("go\n")
    pub.stdin.flush()
    line = pub.stdout.readline()
    cpu1, wall1 = time.process_time(), time.monotonic()
    sent = eval(line.split(" ", 1)[1])
    pub.wait(timeout=30)
    time.sleep(0.3)
    report = node.engine.stop_episode("success")
    executor.shutdown()
    node.finish()
    node.destroy_node()
    rclpy.shutdown()

    bag = report.bag_dir
    with opened_bag(bag) as reader:
        recorded = {c.topic: c.msgcount for c in reader.connections}
    lost = {t: sent[t] - recorded.get(t, 0) for t in sent}
    gaps = {c.topic: c.estimated_drops for c in report.cadence}
    cpu_pct = 100.0 * (cpu1 - cpu0) / (wall1 - wall0)
    bag_bytes = report.size_bytes
    per_min_mb = bag_bytes / 1e6 / max(report.duration_s, 1e-9) * 60.0

    config = ConversionConfig(control_rate_hz=10.0)
    t0 = time.perf_counter()
    summary = convert_bags([bag], work / "ds.hdf5", config)
    convert_s = time.perf_counter() - t0
    frames = summary.frames
    ds_per_min_mb = (work / "ds.hdf5").stat().st_size / 1e6 / max(report.duration_s, 1e-9) * 60
    camera_msgs = recorded.get("/head_camera/image_raw", 0) + recorded.get(
        "/hand_camera/image_raw", 0
    )

    print(report.format())
    print(summary.format())
    print(f"{'topic':32s} {'sent':>6s} {'recorded':>9s} {'lost':>5s} {'stamp-gap drops':>16s}")
    for topic in sorted(sent):
        print(
            f"{topic:32s} {sent[topic]:6d} {recorded.get(topic, 0):9d} {lost[topic]:5d} "
            f"{gaps.get(topic, 0):16d}"
        )
    print(f"recorder process CPU: {cpu_pct:.1f} % of one core (node + writer thread)")
    print(
        f"bag size per minute: {per_min_mb:.1f} MB; dataset (10 Hz, 128x128) {ds_per_min_mb:.1f} MB"
    )
    print(
        f"conversion: {frames} frames in {convert_s:.2f} s = {frames / convert_s:.1f} frames/s "
        f"({camera_msgs / convert_s:.1f} camera msgs/s)"
    )
    total_lost = sum(max(v, 0) for v in lost.values())
    figures = [
        {"name": "messages_lost", "value": total_lost, "unit": "messages", "goal": "0"},
        {"name": "stamp_gap_drops", "value": sum(gaps.values()), "unit": "messages", "goal": "0"},
        {"name": "recorder_cpu", "value": round(cpu_pct, 1), "unit": "% core", "goal": "< 50"},
        {
            "name": "conversion_throughput",
            "value": round(frames / convert_s, 1),
            "unit": "frames/s",
            "goal": "> 10",
        },
        {
            "name": "bag_size_per_minute",
            "value": round(per_min_mb, 1),
            "unit": "MB/min",
            "goal": "report",
        },
        {
            "name": "dataset_size_per_minute",
            "value": round(ds_per_min_mb, 1),
            "unit": "MB/min",
            "goal": "report",
        },
    ]
    print(json.dumps({"benchmark": "recorder", "figures": figures}))


if __name__ == "__main__":
    main()
