"""``camera_driver``: one lifecycle node per camera publishing image_raw and camera_info.

configure: build the typed config from parameters, load the calibration, open the backend and
check that resolution, pixel format and calibration agree; on any problem log the reason and
return FAILURE (the node stays unconfigured). activate: start the capture thread. A frame is
stamped with its capture time and published with a matching camera_info on
``<camera_name>/image_raw`` and ``<camera_name>/camera_info`` (sensor-data QoS, frame
``<camera_name>_optical_frame``). Diagnostics (rate, drops, last error) go to ``/diagnostics``.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from r2s2r_common.camera_info import (
    CameraCalibration,
    load_camera_calibration,
    to_camera_info_msg,
    uncalibrated,
)
from r2s2r_common.image_conversion import encoding_spec, to_image_msg
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.lifecycle import SchemaLifecycleNode
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_common.ros.time import time_msg
from r2s2r_common.topics import DIAGNOSTICS, camera_image, camera_info
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image

from r2s2r_cameras.backends import (
    BackendFactory,
    CameraBackend,
    CaptureError,
    EndOfStreamError,
    create_backend,
)
from r2s2r_cameras.config import CameraDriverConfig
from r2s2r_cameras.processing import convert_encoding, resize_frame


class CaptureStats:
    """Thread-safe counters for diagnostics: frames, estimated drops, rate, last error."""

    def __init__(self, window: int = 60) -> None:
        self._lock = threading.Lock()
        self._capture_times_s: deque[float] = deque(maxlen=window)
        self.frames = 0
        self.dropped = 0
        self.errors = 0
        self.last_error = ""

    def frame(self, capture_time_s: float, nominal_rate_hz: float) -> None:
        """Count a published frame; a gap of more than 1.5 periods counts the missing frames."""
        with self._lock:
            if self._capture_times_s and nominal_rate_hz > 0:
                gap_s = capture_time_s - self._capture_times_s[-1]
                missing = round(gap_s * nominal_rate_hz) - 1
                if gap_s > 1.5 / nominal_rate_hz and missing > 0:
                    self.dropped += missing
            self._capture_times_s.append(capture_time_s)
            self.frames += 1

    def error(self, message: str, dropped: bool) -> None:
        """Record an error (and a lost frame if ``dropped``)."""
        with self._lock:
            self.errors += 1
            self.dropped += int(dropped)
            self.last_error = message

    def rate_hz(self) -> float:
        """Frame rate over the recent window."""
        with self._lock:
            if len(self._capture_times_s) < 2:
                return 0.0
            span_s = self._capture_times_s[-1] - self._capture_times_s[0]
            return (len(self._capture_times_s) - 1) / span_s if span_s > 0 else 0.0


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = CameraDriverConfig


class CameraDriverNode(SchemaLifecycleNode[CameraDriverConfig]):
    """Lifecycle camera driver; see the module docstring.

    Args:
        node_name: ROS node name.
        extra_backends: More backends selectable by the ``backend`` parameter
            (e.g. ``{"sim": factory}``), for embedding the driver next to a simulator.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(
        self,
        node_name: str = "camera_driver",
        extra_backends: dict[str, BackendFactory] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(node_name, PARAMETER_SCHEMA, **kwargs)
        self._extra_backends = extra_backends or {}
        self.config: CameraDriverConfig | None = None
        self._backend: CameraBackend | None = None
        self._calibration: CameraCalibration | None = None
        self._image_pub: Any = None
        self._info_pub: Any = None
        self._diagnostics_pub: Any = None
        self._diagnostics_timer: Any = None
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._stats = CaptureStats()
        self._state_text = "unconfigured"

    # -- lifecycle ---------------------------------------------------------------------------

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Validate parameters, load calibration, open the backend; FAILURE on bad input."""
        try:
            self._configure()
        except (ValueError, CaptureError) as error:
            self.get_logger().error(f"configure failed: {error}")
            self.release()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def _configure(self) -> None:
        config = self.config_from_parameters()
        if (config.output_width_px > 0) != (config.output_height_px > 0):
            raise ValueError(
                f"output_width_px x output_height_px = {config.output_width_px} x "
                f"{config.output_height_px}: set both (resize) or neither"
            )
        calibration = (
            load_camera_calibration(config.calibration_file) if config.calibration_file else None
        )
        backend = create_backend(config, self._now_s, self._extra_backends)
        self._backend = backend
        backend.open()
        width_px, height_px = backend.frame_size_px
        if calibration is None:
            calibration = uncalibrated(width_px, height_px, config.camera_name)
        calibration.check_resolution(
            width_px, height_px, source=f"{config.backend} backend's image"
        )
        convert_encoding(backend_probe(backend), backend.encoding, config.encoding)
        if config.resize_enabled:
            calibration = calibration.scaled(config.output_width_px, config.output_height_px)
        self.config = config
        self._calibration = calibration
        self._stats = CaptureStats()
        self._image_pub = self.create_lifecycle_publisher(
            Image, camera_image(config.camera_name, relative=True), qos_profile_sensor_data
        )
        self._info_pub = self.create_lifecycle_publisher(
            CameraInfo, camera_info(config.camera_name, relative=True), qos_profile_sensor_data
        )
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        self._diagnostics_timer = self.create_timer(
            config.diagnostics_period_s, self._publish_diagnostics
        )
        self._state_text = "configured"
        self.get_logger().info(
            f"configured {config.backend} backend: {width_px}x{height_px} {backend.encoding} -> "
            f"{config.encoding} on {camera_image(config.camera_name, relative=True)}"
        )

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Start the capture thread."""
        self._stop.clear()
        self._worker = threading.Thread(target=self._capture_loop, name="capture", daemon=True)
        self._worker.start()
        self._state_text = "capturing"
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop the capture thread (the device stays open)."""
        self._stop_worker()
        self._state_text = "inactive"
        return super().on_deactivate(state)

    def _stop_worker(self) -> None:
        self._stop.set()
        if self._worker is not None:
            # A paced replay wait is interrupted by the stop event's owner (close), a device
            # read returns within a frame period; the timeout only guards a hung driver.
            self._worker.join(timeout=2.0)
            self._worker = None

    def release(self) -> None:
        """Stop capturing, close the backend, drop publishers and timers (cleanup, shutdown)."""
        self._stop_worker()
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        for publisher in (self._image_pub, self._info_pub, self._diagnostics_pub):
            if publisher is not None:
                self.destroy_publisher(publisher)
        if self._diagnostics_timer is not None:
            self.destroy_timer(self._diagnostics_timer)
        self._image_pub = self._info_pub = self._diagnostics_pub = None
        self._diagnostics_timer = None
        self.config = None
        self._state_text = "unconfigured"

    # -- capture -----------------------------------------------------------------------------

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _capture_loop(self) -> None:
        backend, config = self._backend, self.config
        assert backend is not None and config is not None
        while not self._stop.is_set():
            try:
                frame, capture_time_s = backend.read()
            except EndOfStreamError as error:
                self._stats.error(str(error), dropped=False)
                self._state_text = "end of stream"
                self.get_logger().info(str(error))
                return
            except CaptureError as error:
                self._stats.error(str(error), dropped=True)
                self.get_logger().warning(str(error), throttle_duration_sec=5.0)
                if error.retry_after_s is None:
                    self._state_text = "failed"
                    return
                self._stop.wait(max(error.retry_after_s, 0.01))
                continue
            if self._stop.is_set():
                return
            try:
                self._publish(frame, capture_time_s, backend, config)
            except ValueError as error:  # conversion problem: drop the frame, keep running
                self._stats.error(f"frame dropped: {error}", dropped=True)
                continue
            self._stats.frame(capture_time_s, backend.nominal_rate_hz)

    def _publish(
        self, frame: Any, capture_time_s: float, backend: CameraBackend, config: CameraDriverConfig
    ) -> None:
        image = convert_encoding(frame, backend.encoding, config.encoding)
        if config.resize_enabled:
            image = resize_frame(
                image, config.output_width_px, config.output_height_px, config.encoding
            )
        stamp = time_msg(capture_time_s)
        image_msg = to_image_msg(image, config.encoding, stamp, config.optical_frame)
        assert self._calibration is not None
        info_msg = to_camera_info_msg(self._calibration, stamp, config.optical_frame)
        image_pub, info_pub = self._image_pub, self._info_pub
        if image_pub is None or info_pub is None:
            return
        image_pub.publish(image_msg)
        info_pub.publish(info_msg)

    # -- diagnostics -------------------------------------------------------------------------

    def _publish_diagnostics(self) -> None:
        config, publisher = self.config, self._diagnostics_pub
        if config is None or publisher is None:
            return
        stats = self._stats
        rate_hz = stats.rate_hz()
        level = DiagnosticStatus.OK
        message = self._state_text
        stalled = self._state_text == "capturing" and bool(stats.last_error) and rate_hz == 0.0
        if self._state_text == "failed" or stalled:
            level = DiagnosticStatus.ERROR
            message = stats.last_error or self._state_text
        elif stats.dropped > 0:
            level = DiagnosticStatus.WARN
        values = {
            "backend": config.backend,
            "state": self._state_text,
            "frame_rate_hz": f"{rate_hz:.2f}",
            "frames": str(stats.frames),
            "dropped_frames": str(stats.dropped),
            "errors": str(stats.errors),
            "last_error": stats.last_error,
        }
        if self._backend is not None:
            values.update(self._backend.status())
        array = diagnostics_array(
            f"{self.get_name()}: {config.camera_name}",
            level,
            message,
            config.camera_name,
            values,
            self.get_clock().now().to_msg(),
        )
        publisher.publish(array)

    @property
    def stats(self) -> CaptureStats:
        """Capture counters (for tests and benchmarks)."""
        return self._stats


def backend_probe(backend: CameraBackend) -> np.ndarray:
    """Return a blank frame shaped like the backend output (to check conversions early).

    Raises:
        ImageConversionError: If the backend's encoding is not supported.

    """
    spec = encoding_spec(backend.encoding)
    width_px, height_px = backend.frame_size_px
    shape = (height_px, width_px) if spec.channels == 1 else (height_px, width_px, spec.channels)
    return np.zeros(shape, spec.dtype)


def main(args: list[str] | None = None) -> None:
    """Run one camera_driver node; with ``autostart`` it configures and activates itself.

    Exits with code 2 when autostart fails (bad parameters or configuration files).
    """
    sys.exit(run_lifecycle_node(CameraDriverNode, SingleThreadedExecutor, args))
