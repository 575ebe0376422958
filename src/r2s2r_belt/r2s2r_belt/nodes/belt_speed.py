"""``belt_speed``: fused conveyor speed on ``/belt/speed`` (TwistStamped, m/s along belt x).

Inputs: ``/belt/encoder`` (sensor_msgs/JointState, roller angle; the roller radius comes from the
grounding artifact when ``grounding_artifact`` is set), and when a belt homography is
configured ``/head_camera/image_raw`` + ``/head_camera/camera_info``. Encoder and vision run in
separate callback groups on a multi-threaded executor, so optical flow never delays encoder
readings; a timer publishes the filtered speed at ``publish_rate_hz`` and ``/diagnostics`` report
variance, sources in use and per-source health.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistStamped
from r2s2r_common.image_conversion import ImageConversionError, from_image_msg
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.params import (
    config_from_parameters,
    declare_schema_parameters,
)
from r2s2r_common.ros.qos import LATCHED_QOS
from r2s2r_common.ros.runner import run_node
from r2s2r_common.ros.time import time_msg
from r2s2r_common.stamps import stamp_to_s
from r2s2r_common.topics import (
    BELT_ENCODER,
    BELT_SPEED,
    DIAGNOSTICS,
    HEAD_CAMERA_IMAGE,
    HEAD_CAMERA_INFO,
    TF_STATIC,
)
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState

from r2s2r_belt.config import BeltSpeedConfig, with_grounded_roller_radius
from r2s2r_belt.encoder_speed import EncoderSpeedEstimator
from r2s2r_belt.estimates import FusedSpeed, SpeedMeasurement
from r2s2r_belt.speed_filter import BeltSpeedFilter
from r2s2r_belt.tracking.tf_tree import TransformLookupError, TransformTree, add_transforms
from r2s2r_belt.vision_geometry import vision_config_from_camera
from r2s2r_belt.vision_speed import VisionSpeedEstimator, to_gray
from tf2_msgs.msg import TFMessage

# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = BeltSpeedConfig


CLOCK_APART_S = 5.0
"""Readings stamped further than this from the node's clock are in another clock."""


class BeltSpeedNode(Node):
    """Belt-speed estimation node; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``...).

    Raises:
        ConfigError: If the parameters do not satisfy :class:`BeltSpeedConfig` (startup fails).

    """

    def __init__(self, node_name: str = "belt_speed", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        declared = declare_schema_parameters(self, PARAMETER_SCHEMA)
        self.config, self.roller_radius_source = with_grounded_roller_radius(
            config_from_parameters(self, declared, BeltSpeedConfig)
        )
        config = self.config
        self._lock = threading.Lock()
        self._encoder = EncoderSpeedEstimator(config.encoder)
        self._vision_wanted = config.vision.enabled
        self._vision: VisionSpeedEstimator | None = None
        if config.vision.enabled and not config.vision.geometry_from_tf:
            self._vision = VisionSpeedEstimator(config.vision)
        self._camera_info: CameraInfo | None = None
        self._tf = TransformTree()
        self.vision_geometry = "configured" if self._vision is not None else ""
        self._filter = BeltSpeedFilter(config.filter)
        self._last: dict[str, SpeedMeasurement] = {}
        self._dropped: dict[str, int] = {"encoder": 0, "vision": 0}
        self._last_error = ""
        self._camera_size_px: tuple[int, int] | None = None
        self._latest: FusedSpeed | None = None
        self._newest_reading_s: float | None = None  # newest reading's stamp (their clock)

        encoder_group = MutuallyExclusiveCallbackGroup()
        vision_group = MutuallyExclusiveCallbackGroup()
        output_group = MutuallyExclusiveCallbackGroup()
        self.create_subscription(
            JointState,
            BELT_ENCODER,
            self._on_encoder,
            qos_profile_sensor_data,
            callback_group=encoder_group,
        )
        if self._vision_wanted:
            self.create_subscription(
                Image,
                HEAD_CAMERA_IMAGE,
                self._on_image,
                qos_profile_sensor_data,
                callback_group=vision_group,
            )
            self.create_subscription(
                CameraInfo,
                HEAD_CAMERA_INFO,
                self._on_camera_info,
                qos_profile_sensor_data,
                callback_group=vision_group,
            )
        if config.vision.geometry_from_tf:
            self.create_subscription(
                TFMessage,
                TF_STATIC,
                self._on_tf_static,
                LATCHED_QOS,
                callback_group=vision_group,
            )
        self._speed_pub = self.create_publisher(TwistStamped, BELT_SPEED, 10)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        self.create_timer(
            1.0 / config.publish_rate_hz, self._publish_speed, callback_group=output_group
        )
        self.create_timer(
            config.diagnostics_period_s, self._publish_diagnostics, callback_group=output_group
        )
        self.get_logger().info(
            f"belt speed from encoder{' and vision' if self._vision_wanted else ''} at "
            f"{config.publish_rate_hz:g} Hz; {self.roller_radius_source}"
        )

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _message_time_s(self, stamp: Any) -> float:
        seconds = stamp_to_s(stamp)
        return seconds if seconds > 0.0 else self._now_s()

    def _drop(self, source: str, reason: str) -> None:
        with self._lock:
            self._dropped[source] += 1
            self._last_error = f"{source}: {reason}"
        self.get_logger().warning(f"dropped {source} message: {reason}", throttle_duration_sec=5.0)

    def _on_encoder(self, msg: JointState) -> None:
        joint_name = self.config.encoder.joint_name
        if joint_name:
            if joint_name not in msg.name:
                self._drop("encoder", f"no joint {joint_name!r} in {list(msg.name)}")
                return
            index = list(msg.name).index(joint_name)
        else:
            index = 0
        if index >= len(msg.position):
            self._drop("encoder", "JointState without a position")
            return
        stamp_s = self._message_time_s(msg.header.stamp)
        with self._lock:
            self._encoder.add_sample(stamp_s, float(msg.position[index]))
            measurement = self._encoder.estimate(stamp_s)
            self._last["encoder"] = measurement
            if self._filter.update(measurement):
                self._newest_reading_s = max(stamp_s, self._newest_reading_s or stamp_s)

    def _on_camera_info(self, msg: CameraInfo) -> None:
        self._camera_size_px = (int(msg.width), int(msg.height))
        self._camera_info = msg

    def _on_tf_static(self, msg: TFMessage) -> None:
        for error in add_transforms(self._tf, msg.transforms):
            self._drop("vision", f"tf_static: {error}")

    def _vision_from_tf(self, frame_id: str) -> str | None:
        """Build the vision estimator from camera_info and /tf_static; None or why not yet."""
        vision = self.config.vision
        info = self._camera_info
        if info is None:
            return f"waiting for {HEAD_CAMERA_INFO}"
        camera_frame = frame_id or vision.camera_frame
        try:
            T_camera_belt = self._tf.lookup(camera_frame, vision.belt_frame)
        except TransformLookupError as error:
            return f"waiting for {TF_STATIC} ({error})"
        try:
            geometry = vision_config_from_camera(
                vision,
                np.asarray(info.k, dtype=float).reshape(3, 3),
                [float(v) for v in info.d][:5],
                (int(info.width), int(info.height)),
                T_camera_belt,
            )
        except ValueError as error:
            return str(error)
        self._vision = VisionSpeedEstimator(geometry)
        self.vision_geometry = f"camera_info + {TF_STATIC} ({camera_frame} -> {vision.belt_frame})"
        self.get_logger().info(
            f"vision: belt homography from {self.vision_geometry}, ROI {geometry.roi_px} px"
        )
        return None

    def _on_image(self, msg: Image) -> None:
        if self._vision is None:
            waiting = self._vision_from_tf(msg.header.frame_id)
            if waiting is not None:
                self._drop("vision", waiting)
                return
        assert self._vision is not None
        try:
            gray = to_gray(from_image_msg(msg), msg.encoding)
            measurement = self._vision.update(gray, self._message_time_s(msg.header.stamp))
        except (ImageConversionError, ValueError) as error:
            self._drop("vision", str(error))
            return
        if measurement is None:
            return
        with self._lock:
            self._last["vision"] = measurement
            if self._filter.update(measurement):
                self._newest_reading_s = max(
                    measurement.stamp_s, self._newest_reading_s or measurement.stamp_s
                )

    def _publish_speed(self) -> None:
        now_s = self.get_clock().now().nanoseconds * 1e-9
        with self._lock:
            if not self._filter.updates:
                return  # nothing measured yet: publishing a zero would be a made-up value
            newest_s = self._newest_reading_s
            apart_s = now_s - newest_s if newest_s is not None else 0.0
            # Readings stamped in another clock (a simulated cell's /clock, this node on the
            # wall clock): predicting the filter to "now" would add the clocks' distance to its
            # time and turn it into a running mean of every reading. Stay in their clock.
            estimate_s = (
                newest_s if newest_s is not None and abs(apart_s) > CLOCK_APART_S else now_s
            )
            fused = self._filter.estimate(estimate_s)
            self._latest = fused
        if estimate_s != now_s:
            self.get_logger().error(
                f"readings are stamped {apart_s:+.0f} s from this node's clock (a simulated "
                "cell's /clock without use_sim_time: true?); estimating and stamping "
                f"{BELT_SPEED} in the readings' clock",
                throttle_duration_sec=10.0,
            )
        msg = TwistStamped()
        msg.header.stamp = time_msg(estimate_s)
        msg.header.frame_id = self.config.frame_id
        msg.twist.linear.x = fused.speed_mps
        self._speed_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        with self._lock:
            fused = self._latest
            last = dict(self._last)
            dropped = dict(self._dropped)
            last_error = self._last_error
            updates = dict(self._filter.updates)
        values = {
            "speed_mps": f"{fused.speed_mps:.5f}" if fused else "",
            "variance_mps2": f"{fused.variance_mps2:.3e}" if fused else "",
            "sources": ",".join(fused.sources) if fused else "",
            "valid": str(fused.valid) if fused else "False",
            "last_error": last_error,
            "roller_radius": self.roller_radius_source,
            "vision_geometry": self.vision_geometry,
        }
        for source in ("encoder", "vision"):
            reading = last.get(source)
            values[f"{source}_updates"] = str(updates.get(source, 0))
            values[f"{source}_dropped_messages"] = str(dropped[source])
            values[f"{source}_state"] = (
                "disabled"
                if source == "vision" and not self._vision_wanted
                else "no data"
                if reading is None
                else "ok"
                if reading.valid
                else reading.reason
            )
            if source == "vision" and reading is not None:
                values["vision_features"] = str(reading.feature_count)
        if fused is None or not fused.sources:
            level, message = DiagnosticStatus.ERROR, "no belt speed source"
        elif not fused.valid or (self._vision_wanted and len(fused.sources) < 2):
            level, message = DiagnosticStatus.WARN, f"running on {','.join(fused.sources)} only"
        else:
            level, message = DiagnosticStatus.OK, f"fused {','.join(fused.sources)}"
        array = diagnostics_array(
            f"{self.get_name()}: belt speed",
            level,
            message,
            "belt",
            values,
            self.get_clock().now().to_msg(),
        )
        self._diagnostics_pub.publish(array)


def main(args: list[str] | None = None) -> None:
    """Run the belt_speed node on one executor thread (exit code 2 on bad parameters)."""
    # run_node's single-threaded executor: the callbacks are short, and rclpy's
    # MultiThreadedExecutor spends more on dispatch than they cost (belt_speed published 40 of
    # 50 Hz at 0.5 core with it; 50 Hz at 0.2 core on one thread).
    sys.exit(run_node(BeltSpeedNode, args=args))
