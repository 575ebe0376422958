"""Recorder benchmark: two 128x128 rgb8 cameras at 30 Hz + joint_states at 100 Hz.

A publisher process publishes for ``--duration-s`` seconds (also arm/hand commands at 10 Hz
and belt speed at 20 Hz so the bag converts); the recorder node runs in this process. Reports
messages lost (published vs recorded, plus gaps in header stamps), CPU use of the recording
process, conversion throughput, and size on disk per minute. Last line: one JSON object.

Usage: python bench/bench_recorder.py [--duration-s 10]
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import benchlib

TRAFFIC = Path(__file__).resolve().parent / "ros_traffic.py"
"""The publisher runs in a process of its own (bench/ros_traffic.py)."""


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--duration-s", type=float, default=10.0)
    args = parser.parse_args()
    os.environ["ROS_DOMAIN_ID"] = str(random.randint(1, 200))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

    import rclpy
    from r2s2r_recorder.bag_reading import opened_bag
    from r2s2r_recorder.bag_to_dataset import convert_bags
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
        [sys.executable, str(TRAFFIC), "publish-recording", str(args.duration_s)],
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
    benchlib.print_json_line("recorder", figures)


if __name__ == "__main__":
    main()
