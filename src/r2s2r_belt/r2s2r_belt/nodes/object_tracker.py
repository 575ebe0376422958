"""``object_tracker``: objects on the belt from the head camera, as tracks in ``base_link``.

Inputs: ``/head_camera/image_raw`` (rgb8/bgr8), ``/head_camera/depth/image_raw`` (32FC1, m),
``/head_camera/camera_info`` (all sensor-data QoS), ``/belt/speed`` (TwistStamped, m/s along
``belt_link`` x) and ``/tf_static`` (camera and belt mounts). RGB and depth are paired by stamp;
subscription callbacks only store messages, and a worker thread runs detection + tracking on the
newest pair (older pending pairs are dropped and counted), so a slow frame never blocks
reception. Output: ``/objects/tracks`` (r2s2r_interfaces/ObjectTrackArray, frame ``base_link``,
stamp = capture time) once per processed frame, and ``/diagnostics`` (rate, latency, tracks,
drops). The tracker never reads simulator state: only what a real cell publishes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistStamped
from r2s2r_common.camera_model import CameraModel, CameraModelError
from r2s2r_common.image_conversion import ImageConversionError, from_image_msg
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.qos import DEFAULT_QOS, LATCHED_QOS, SENSOR_DATA_QOS
from r2s2r_common.ros.runner import run_node
from r2s2r_common.stamps import stamp_to_s
from r2s2r_common.topics import (
    BELT_SPEED,
    DIAGNOSTICS,
    HEAD_CAMERA_IMAGE,
    HEAD_CAMERA_INFO,
    HEAD_DEPTH,
    OBJECT_TRACKS,
    TF_STATIC,
)
from r2s2r_description.cameras import HEAD
from r2s2r_description.transforms import matrix_to_quat
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from r2s2r_belt.tracking.config import ObjectTrackerConfig
from r2s2r_belt.tracking.detection import FrameError, SceneGeometry
from r2s2r_belt.tracking.pipeline import ObjectTrackerCore, TrackerOutput
from r2s2r_belt.tracking.sync import Pair, StampSynchronizer
from r2s2r_belt.tracking.tf_tree import TransformTree, add_transforms
from r2s2r_interfaces.msg import ObjectTrack, ObjectTrackArray
from tf2_msgs.msg import TFMessage


def camera_model_from_msg(msg: CameraInfo) -> CameraModel:
    """Camera model (K, plumb-bob D, size) of a ``sensor_msgs/CameraInfo``.

    Raises:
        CameraModelError: Zero focal length, zero size or an unsupported distortion model.

    """
    if msg.distortion_model not in ("plumb_bob", "rational_polynomial", ""):
        raise CameraModelError(
            f"distortion_model {msg.distortion_model!r}: expected plumb_bob or rational_polynomial"
        )
    return CameraModel(
        width_px=int(msg.width),
        height_px=int(msg.height),
        camera_matrix=np.asarray(msg.k, dtype=float).reshape(3, 3),
        distortion=np.asarray(msg.d, dtype=float),
    )


def rgb_array(msg: Image) -> np.ndarray:
    """RGB uint8 array of an rgb8/bgr8 image message.

    Raises:
        ImageConversionError: For another encoding.

    """
    array = from_image_msg(msg)
    if msg.encoding == "rgb8":
        return array
    if msg.encoding == "bgr8":
        return np.ascontiguousarray(array[..., ::-1])
    raise ImageConversionError(f"image encoding {msg.encoding!r}: expected rgb8 or bgr8")


def depth_array(msg: Image) -> np.ndarray:
    """Depth in metres (float32) of a 32FC1 (m) or 16UC1 (mm) image message.

    Raises:
        ImageConversionError: For another encoding.

    """
    array = from_image_msg(msg)
    if msg.encoding == "32FC1":
        return array.astype(np.float32, copy=False)
    if msg.encoding == "16UC1":
        return array.astype(np.float32) * np.float32(0.001)
    raise ImageConversionError(f"depth encoding {msg.encoding!r}: expected 32FC1 or 16UC1")


def tracks_to_msg(output: TrackerOutput, stamp: Any, frame_id: str) -> ObjectTrackArray:
    """Build the ``ObjectTrackArray`` of one frame's tracks."""
    msg = ObjectTrackArray()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    for snapshot in output.tracks:
        track = ObjectTrack()
        track.id = int(snapshot.track_id)
        track.object_type = snapshot.type_name
        x, y, z = (float(v) for v in snapshot.position_m)
        track.pose.position.x, track.pose.position.y, track.pose.position.z = x, y, z
        qw, qx, qy, qz = (float(v) for v in matrix_to_quat(snapshot.rotation))
        track.pose.orientation.x, track.pose.orientation.y = qx, qy
        track.pose.orientation.z, track.pose.orientation.w = qz, qw
        vx, vy, vz = (float(v) for v in snapshot.velocity_mps)
        track.twist.linear.x, track.twist.linear.y, track.twist.linear.z = vx, vy, vz
        msg.tracks.append(track)
    return msg


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = ObjectTrackerConfig


class ObjectTrackerNode(Node):
    """Object tracker node; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``...).

    Raises:
        ConfigError: If the parameters do not satisfy :class:`ObjectTrackerConfig`.

    """

    def __init__(self, node_name: str = "object_tracker", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, PARAMETER_SCHEMA)
        config = self.config
        self._core = ObjectTrackerCore(config)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._sync: StampSynchronizer[Image, Image] = StampSynchronizer(config.sync_tolerance_s)
        self._pending: Pair[Image, Image] | None = None
        self._camera_info: CameraInfo | None = None
        self._camera: CameraModel | None = None
        self._camera_source: CameraInfo | None = None
        self._tf = TransformTree()
        self._belt_speed: tuple[float, float] | None = None  # (speed m/s, monotonic receive s)
        self._counts = {"processed": 0, "skipped_pairs": 0, "dropped_frames": 0}
        self._last_error = ""
        self._latencies_s: deque[float] = deque(maxlen=50)
        self._processing_s: deque[float] = deque(maxlen=50)
        self._processed_times: deque[float] = deque(maxlen=50)
        self._track_count = 0
        self._running = True

        inputs = MutuallyExclusiveCallbackGroup()
        self.create_subscription(
            Image, HEAD_CAMERA_IMAGE, self._on_rgb, SENSOR_DATA_QOS, callback_group=inputs
        )
        self.create_subscription(
            Image,
            HEAD_DEPTH,
            self._on_depth,
            SENSOR_DATA_QOS,
            callback_group=inputs,
        )
        self.create_subscription(
            CameraInfo,
            HEAD_CAMERA_INFO,
            self._on_camera_info,
            SENSOR_DATA_QOS,
            callback_group=inputs,
        )
        self.create_subscription(
            TwistStamped, BELT_SPEED, self._on_belt_speed, DEFAULT_QOS, callback_group=inputs
        )
        self.create_subscription(
            TFMessage, TF_STATIC, self._on_tf_static, LATCHED_QOS, callback_group=inputs
        )
        self._tracks_pub = self.create_publisher(ObjectTrackArray, OBJECT_TRACKS, DEFAULT_QOS)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, DEFAULT_QOS)
        self.create_timer(
            config.diagnostics_period_s,
            self._publish_diagnostics,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        self._worker = threading.Thread(target=self._work, name="object_tracker", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"tracking {', '.join(self._core.catalogue.names)} in {config.base_frame}"
        )

    # -- subscription callbacks: store only ---------------------------------------------------
    def _on_rgb(self, msg: Image) -> None:
        with self._wake:
            self._offer(self._sync.add_first(stamp_to_s(msg.header.stamp), msg))

    def _on_depth(self, msg: Image) -> None:
        with self._wake:
            self._offer(self._sync.add_second(stamp_to_s(msg.header.stamp), msg))

    def _offer(self, pair: Pair[Image, Image] | None) -> None:
        """Hand a completed pair to the worker (lock held); a pair still waiting is dropped."""
        if pair is None:
            return
        if self._pending is not None:
            self._counts["skipped_pairs"] += 1
        self._pending = pair
        self._wake.notify()

    def _on_camera_info(self, msg: CameraInfo) -> None:
        with self._lock:
            self._camera_info = msg

    def _on_belt_speed(self, msg: TwistStamped) -> None:
        with self._lock:
            self._belt_speed = (float(msg.twist.linear.x), time.monotonic())

    def _on_tf_static(self, msg: TFMessage) -> None:
        with self._lock:
            for error in add_transforms(self._tf, msg.transforms):
                self._last_error = f"tf_static: {error}"

    # -- worker -------------------------------------------------------------------------------
    def _drop(self, reason: str) -> None:
        with self._lock:
            self._counts["dropped_frames"] += 1
            self._last_error = reason
        self.get_logger().warning(f"frame dropped: {reason}", throttle_duration_sec=5.0)

    def _geometry(self, camera_frame: str) -> SceneGeometry:
        """Camera model and frames now known (lock held).

        Raises:
            LookupError: No camera_info or a missing transform.
            CameraModelError: Unusable camera_info.

        """
        if self._camera_info is None:
            raise LookupError("no camera_info received yet")
        if self._camera is None or self._camera_info is not self._camera_source:
            self._camera = camera_model_from_msg(self._camera_info)
            self._camera_source = self._camera_info
        config = self.config
        return SceneGeometry(
            camera=self._camera,
            base_from_camera=self._tf.lookup(config.base_frame, camera_frame),
            base_from_belt=self._tf.lookup(config.base_frame, config.belt_frame),
        )

    def _work(self) -> None:
        while True:
            with self._wake:
                while self._running and self._pending is None:
                    self._wake.wait(timeout=0.5)
                if not self._running:
                    return
                pair, self._pending = self._pending, None
                assert pair is not None
                camera_frame = pair.first.header.frame_id or self.config.camera_frame
                geometry: SceneGeometry | None = None
                reason = ""
                try:
                    geometry = self._geometry(camera_frame)
                except (LookupError, CameraModelError) as error:
                    reason = str(error)
                speed = self._belt_speed
            if geometry is None:
                self._drop(reason)
                continue
            belt_speed = None
            if (
                speed is not None
                and time.monotonic() - speed[1] <= self.config.belt_speed_timeout_s
            ):
                belt_speed = speed[0]
            self._process(pair, geometry, belt_speed)

    def _process(
        self, pair: Pair[Image, Image], geometry: SceneGeometry, belt_speed: float | None
    ) -> None:
        start = time.monotonic()
        try:
            rgb = rgb_array(pair.first)
            depth = depth_array(pair.second)
            stamp_s = (
                pair.stamp_s if pair.stamp_s > 0.0 else self.get_clock().now().nanoseconds * 1e-9
            )
            output = self._core.process(rgb, depth, stamp_s, geometry, belt_speed)
        except (ImageConversionError, FrameError) as error:
            self._drop(str(error))
            return
        self._tracks_pub.publish(
            tracks_to_msg(output, pair.first.header.stamp, self.config.base_frame)
        )
        done = time.monotonic()
        with self._lock:
            self._counts["processed"] += 1
            self._processing_s.append(output.processing_time_s)
            self._latencies_s.append(done - start)
            self._processed_times.append(done)
            self._track_count = len(output.tracks)

    # -- diagnostics ---------------------------------------------------------------------------
    def _publish_diagnostics(self) -> None:
        with self._lock:
            counts = dict(self._counts)
            times = list(self._processed_times)
            processing = list(self._processing_s)
            latencies = list(self._latencies_s)
            tracks = self._track_count
            last_error = self._last_error
            sync_dropped = self._sync.dropped
        rate_hz = (
            (len(times) - 1) / (times[-1] - times[0])
            if len(times) >= 2 and times[-1] > times[0]
            else 0.0
        )
        values = {
            "rate_hz": f"{rate_hz:.2f}",
            "processing_ms_mean": f"{1000 * float(np.mean(processing)):.2f}" if processing else "",
            "latency_ms_max": f"{1000 * max(latencies):.2f}" if latencies else "",
            "tracks": str(tracks),
            "frames_processed": str(counts["processed"]),
            "frames_dropped": str(counts["dropped_frames"]),
            "pairs_skipped_busy": str(counts["skipped_pairs"]),
            "unpaired_images_dropped": str(sync_dropped),
            "last_error": last_error,
        }
        if counts["processed"] == 0:
            level, message = (
                DiagnosticStatus.WARN,
                "no frame processed yet" + (f" ({last_error})" if last_error else ""),
            )
        else:
            level, message = DiagnosticStatus.OK, f"{tracks} tracks at {rate_hz:.1f} Hz"
        array = diagnostics_array(
            f"{self.get_name()}: object tracking",
            level,
            message,
            HEAD.name,
            values,
            self.get_clock().now().to_msg(),
        )
        self._diagnostics_pub.publish(array)

    def destroy_node(self) -> None:
        """Stop the worker thread, then destroy the node."""
        with self._wake:
            self._running = False
            self._wake.notify_all()
        self._worker.join(timeout=5.0)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    """Run the object_tracker node on one executor thread (exit code 2 on bad parameters)."""
    # run_node's single-threaded executor: the callbacks are short, and rclpy's
    # MultiThreadedExecutor spends more on dispatch than they cost (belt_speed published 40 of
    # 50 Hz at 0.5 core with it; 50 Hz at 0.2 core on one thread).
    sys.exit(run_node(ObjectTrackerNode, args=args))
