"""``viewer``: the live cell in the browser (Rerun web viewer), rviz2's stand-in here.

At start-up the node starts the Rerun server (:class:`~r2s2r_view.server.RerunServer`: web
viewer on ``host:web_port``, data on ``host:grpc_port``, 127.0.0.1 by default) and prints the
page to open; a port in use ends it with one line naming the port and the parameter (exit 2).
It subscribes to what rviz shows (``config/r2s2r.rviz``) and the policy's outputs, and hands
each message to :class:`~r2s2r_view.rerun_log.CellLogger`:

- ``/robot_description``, ``/tf_static``: reliable, transient local (a late joiner gets them);
- ``/tf``: reliable, depth 100 (as tf2_ros listens);
- ``/joint_states``: taken in batches every ``joint_state_period_s``, raw; only the newest of a
  batch is decoded and drawn;
- ``/head_camera/image_raw``, ``/hand_camera/image_raw``: sensor-data QoS, raw; a frame less
  than ``image_period_s`` after the last drawn one is dropped undecoded;
- ``/objects/tracks``, ``/belt/speed``, ``/diagnostics``: default QoS;
- ``/arm_controller/joint_trajectory``, ``/hand_controller/joint_trajectory``: reliable.

``/diagnostics`` (1 Hz): messages drawn and dropped per stream, the page's address. Host and
ports are read at start-up only: a runtime change is refused with that reason; the periods can
change at runtime.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import rerun as rr
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistStamped
from r2s2r_common.config import ConfigError
from r2s2r_common.ros.batched import BatchedSubscription
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.qos import (
    DEFAULT_QOS,
    JOINT_STATES_LISTENER_QOS,
    LATCHED_QOS,
    RELIABLE_QOS,
    SENSOR_DATA_QOS,
    TF_QOS,
    TF_STATIC_LISTENER_QOS,
)
from r2s2r_common.ros.runner import run_node
from r2s2r_common.topics import (
    BELT_SPEED,
    DIAGNOSTICS,
    JOINT_STATES,
    OBJECT_TRACKS,
    ROBOT_DESCRIPTION,
    TF,
    TF_STATIC,
)
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from r2s2r_interfaces.msg import ObjectTrackArray
from r2s2r_view.bag_replay import CAMERA_TOPICS, CONTROLLER_TOPICS
from r2s2r_view.config import ServerConfig, ViewerNodeConfig
from r2s2r_view.rerun_log import CellLogger
from r2s2r_view.server import PortInUseError, RerunServer
from tf2_msgs.msg import TFMessage

PARAMETER_SCHEMA = ViewerNodeConfig
"""The schema the node declares its parameters from (r2s2r.graph types overrides by it)."""

STARTUP_ONLY = frozenset(ServerConfig.model_fields)
"""Parameters read at start-up only (the server's address, ports and memory)."""


class Viewer(Node):
    """Serves the Rerun web viewer and draws the cell's topics in it; see the module doc.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``...).

    Raises:
        ConfigError: A parameter is invalid, or a viewer port is in use (named).

    """

    def __init__(self, node_name: str = "viewer", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, PARAMETER_SCHEMA, on_change=self._apply)
        self.add_on_set_parameters_callback(self._refuse_startup_only)
        self.server = RerunServer(self.config)
        try:
            self.server.start()
        except PortInUseError as error:
            raise ConfigError(str(error)) from None
        self.recording = rr.RecordingStream("r2s2r_view", send_properties=False)
        self.recording.connect_grpc(self.server.grpc_uri)
        self.logger = CellLogger(self.recording)
        self.logger.send_layout()
        self.get_logger().info(f"view at {self.server.url}")
        self._last_frame_s: dict[str, float] = {}
        self._description = ""
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, DEFAULT_QOS)
        self.create_subscription(String, ROBOT_DESCRIPTION, self._on_description, LATCHED_QOS)
        self.create_subscription(
            TFMessage,
            TF_STATIC,
            lambda m: self.logger.log_transforms(m, static=True),
            TF_STATIC_LISTENER_QOS,
        )
        self.create_subscription(
            TFMessage, TF, lambda m: self.logger.log_transforms(m, static=False), TF_QOS
        )
        self._joint_stream = BatchedSubscription(
            self,
            JointState,
            JOINT_STATES,
            self._on_joint_states,
            JOINT_STATES_LISTENER_QOS,
            self.config.joint_state_period_s,
            raw=True,
        )
        for topic, camera in CAMERA_TOPICS.items():
            self.create_subscription(
                Image,
                topic,
                lambda raw, camera=camera: self._on_image(camera, raw),
                SENSOR_DATA_QOS,
                raw=True,
            )
        for topic, controller in CONTROLLER_TOPICS.items():
            self.create_subscription(
                JointTrajectory,
                topic,
                lambda msg, controller=controller: self.logger.log_trajectory(
                    controller, msg, self.get_clock().now().nanoseconds
                ),
                RELIABLE_QOS,
            )
        self.create_subscription(
            ObjectTrackArray, OBJECT_TRACKS, self.logger.log_tracks, DEFAULT_QOS
        )
        self.create_subscription(TwistStamped, BELT_SPEED, self.logger.log_belt_speed, DEFAULT_QOS)
        self.create_subscription(DiagnosticArray, DIAGNOSTICS, self._on_diagnostics, DEFAULT_QOS)
        self.create_timer(1.0, self._publish_diagnostics)

    def _apply(self, config: ViewerNodeConfig) -> None:
        """Take accepted runtime changes of the periods."""
        self.config = config
        self._joint_stream.set_period(config.joint_state_period_s)

    def _refuse_startup_only(self, parameters: list[Parameter]) -> SetParametersResult:
        for parameter in parameters:
            if parameter.name in STARTUP_ONLY and parameter.value != getattr(
                self.config, parameter.name
            ):
                return SetParametersResult(
                    successful=False,
                    reason=f"{parameter.name} is read at start-up only (restart the viewer)",
                )
        return SetParametersResult(successful=True)

    def _on_description(self, msg: String) -> None:
        if msg.data == self._description:
            return
        try:
            self.logger.log_robot(msg.data)
        except ValueError as error:
            self.logger.dropped["robot_description"] = (
                self.logger.dropped.get("robot_description", 0) + 1
            )
            self.get_logger().warning(f"/robot_description not drawn: {error}")
            return
        self._description = msg.data

    def _on_joint_states(self, batch: list[bytes]) -> None:
        self.logger.log_joint_state(deserialize_message(batch[-1], JointState))

    def _on_image(self, camera: str, raw: bytes) -> None:
        now_s = time.monotonic()
        last = self._last_frame_s.get(camera)
        if last is not None and now_s - last < self.config.image_period_s:
            return
        self._last_frame_s[camera] = now_s
        self.logger.log_image(camera, deserialize_message(raw, Image))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        own = f"{self.get_name()}:"
        if all(str(status.name).startswith(own) for status in msg.status):
            return
        self.logger.log_diagnostics(msg)

    def _publish_diagnostics(self) -> None:
        dropped = sum(self.logger.dropped.values())
        level = DiagnosticStatus.WARN if dropped else DiagnosticStatus.OK
        message = f"serving {self.server.url}" if self.server.running else "server stopped"
        if not self.server.running:
            level = DiagnosticStatus.ERROR
        values = {"url": self.server.url}
        values.update({f"drawn_{k}": str(v) for k, v in sorted(self.logger.counts.items())})
        values.update({f"dropped_{k}": str(v) for k, v in sorted(self.logger.dropped.items())})
        self._diagnostics_pub.publish(
            diagnostics_array(
                f"{self.get_name()}: view",
                level,
                message,
                "viewer",
                values,
                self.get_clock().now().to_msg(),
            )
        )

    def destroy_node(self) -> None:
        """Stop the server with the node."""
        self._joint_stream.destroy()
        self.recording.disconnect()
        self.server.stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    """Run the node until Ctrl-C; bad parameters or a port in use end it (exit code 2)."""
    sys.exit(run_node(Viewer, args=args))
