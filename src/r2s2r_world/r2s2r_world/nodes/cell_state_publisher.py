"""``cell_state_publisher``: the workspace's robot_state_publisher for the whole cell.

robot_state_publisher is not installable from PyPI, and the description is one source of truth
here anyway, so this node publishes, from :func:`r2s2r_description.cell.build_description`:

- ``/robot_description`` (std_msgs/String, URDF; reliable, transient local, depth 1), so a
  subscriber that starts later (rviz) still gets it;
- ``/tf_static`` (tf2_msgs/TFMessage; reliable, transient local, depth 1): every fixed joint
  (cell mounts, cameras, flange, palm) when ``publish_fixed`` is set;
- ``/tf`` (tf2_msgs/TFMessage): one transform per named revolute joint, parent link -> child
  link, stamped with the joint state's stamp, for ``/joint_states`` messages at most
  ``publish_frequency`` times a second of their stamps (as robot_state_publisher's parameter of
  that name: the twin's 500 Hz joint states would otherwise cost this node half a core);
- ``/diagnostics``: messages received, rejected (malformed) and unknown joint names, and
  whether the running cell is the artifact's.

An artifact grounds one cell (:mod:`r2s2r_world.cell_identity`), and this node is where a graph
applies it, so it checks that the running cell is that cell: a ``cell_name`` given to the graph
that differs from the artifact's fails start-up; and the head depth of the static scene is
compared with what grounding saw (``static_scene_check``) until one image matches. A cell that
differs in every image for ``static_scene_window_s`` is another cell: the node says so in one
line (log and ``/diagnostics`` ERROR) and ends with exit code 2 (the graph's input is wrong), so
that nothing goes on with another cell's frames. No comparable image within
``static_scene_timeout_s`` leaves the cell unchecked, a WARN that stays on ``/diagnostics``.

Parameters (schema :class:`CellStatePublisherConfig`): ``world_path`` (cell layout from a
world YAML; empty = CAD layout), ``grounding_artifact`` (a grounding artifact whose
``world_overrides`` poses of cameras, belt, bins and robot base replace the layout's: the grounded
``/tf_static`` every sensing node uses; empty = ungrounded), ``publish_fixed``,
``publish_frequency``, ``diagnostics_period_s``, ``cell_name``, ``static_scene_check``,
``static_scene_window_s``, ``static_scene_timeout_s``. A bad value fails
start-up; a runtime change is validated and applied (description and /tf_static republished).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TransformStamped
from pydantic import Field, ValidationInfo, field_validator
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_common.errors import ExitCode
from r2s2r_common.image_conversion import ImageConversionError, from_image_msg
from r2s2r_common.ros.batched import BatchedSubscription
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.qos import (
    DEFAULT_QOS,
    JOINT_STATES_LISTENER_QOS,
    LATCHED_QOS,
    SENSOR_DATA_QOS,
    TF_QOS,
)
from r2s2r_common.ros.runner import run_node
from r2s2r_common.stamps import serialized_stamp_ns, stamp_to_ns
from r2s2r_common.topics import (
    DIAGNOSTICS,
    HEAD_DEPTH,
    JOINT_STATES,
    ROBOT_DESCRIPTION,
    TF,
    TF_STATIC,
)
from r2s2r_description.cell import NOMINAL_LAYOUT, CellLayout, build_description
from r2s2r_description.model import Description
from r2s2r_description.tf_tree import (
    FrameTransform,
    JointStateError,
    apply_layout_overrides,
    check_joint_state,
    fixed_transforms,
    layout_from_world_file,
    moving_transforms,
)
from r2s2r_description.urdf import to_urdf
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import String

from r2s2r_world.cell_identity import (
    CellIdentity,
    StaticSceneCheck,
    StaticSceneLimits,
    name_mismatch,
)
from r2s2r_world.grounding import load_cell_identity, load_world_overrides
from tf2_msgs.msg import TFMessage

MAX_BATCH_PERIOD_S = 0.02
"""Longest wait between two batches of joint states (s): the most /tf lags behind them."""


class CellStatePublisherConfig(ConfigModel):
    """Parameters of ``cell_state_publisher``."""

    world_path: str = Field(
        default="",
        description="World YAML (nominal or grounded) whose cell layout to publish: robot "
        "base, belt, bins and camera mounts. Empty: the CAD layout of r2s2r_description "
        "(the values of config/world/nominal.yaml).",
    )
    grounding_artifact: str = Field(
        default="",
        description="Grounding artifact YAML (world grounding output): the camera, belt, bin "
        "and robot-base poses of its world_overrides replace those of world_path / the CAD "
        "layout. Empty: ungrounded (nominal mounts).",
    )
    publish_fixed: bool = Field(
        default=True,
        description="Publish the fixed joints on /tf_static. Turn off where another node "
        "(the real twin, a hardware driver) already publishes the fixed mounts.",
    )
    publish_frequency: float = Field(
        default=20.0,
        ge=0.0,
        le=10000.0,
        description="Most /tf messages of the moving joints per second of joint-state stamps "
        "(robot_state_publisher's parameter and default). A joint state stamped less than "
        "1/publish_frequency after the last one published is counted but not turned into /tf; "
        "a stamp that goes back (a reset cell) publishes at once. 0: every joint state.",
    )
    diagnostics_period_s: float = Field(
        default=1.0, ge=0.05, le=60.0, description="Period of /diagnostics messages."
    )
    cell_name: str = Field(
        default="",
        description="The name of the cell this graph runs on (`r2s2r ground --cell-name` "
        "names the artifact's): a grounding artifact of another named cell fails start-up. "
        "Empty: not compared.",
    )
    static_scene_check: bool = Field(
        default=True,
        description="Compare the head depth of the static scene with the artifact's (what "
        "grounding saw) until one image matches; refuse the artifact of another cell.",
    )
    static_scene_window_s: float = Field(
        default=3.0,
        gt=0.0,
        le=60.0,
        description="Every head depth image must differ from the artifact's for this long "
        "before the cell is another one (s): an arm moving through the view, or an object on "
        "the belt, passes in less.",
    )
    static_scene_timeout_s: float = Field(
        default=30.0,
        gt=0.0,
        le=600.0,
        description="Wait this long for a head depth image to compare (s); none: the cell "
        "stays unchecked (a WARN on /diagnostics).",
    )

    @field_validator("world_path")
    @classmethod
    def _readable_layout(cls, value: str) -> str:
        if value:
            try:
                layout_from_world_file(value)
            except ConfigError as error:
                raise ValueError(str(error)) from None
        return value

    @field_validator("grounding_artifact")
    @classmethod
    def _readable_artifact(cls, value: str) -> str:
        if value:
            try:
                apply_layout_overrides(NOMINAL_LAYOUT, load_world_overrides(value), value)
            except ConfigError as error:
                raise ValueError(str(error)) from None
        return value

    @field_validator("cell_name")
    @classmethod
    def _same_named_cell(cls, value: str, info: ValidationInfo) -> str:
        artifact = info.data.get("grounding_artifact")  # validated first (field order)
        if artifact and value:
            mismatch = name_mismatch(load_cell_identity(artifact), value, artifact)
            if mismatch is not None:
                raise ValueError(mismatch)
        return value

    def artifact_cell(self) -> CellIdentity | None:
        """Return the cell the grounding artifact records (None: ungrounded or unrecorded)."""
        return load_cell_identity(self.grounding_artifact) if self.grounding_artifact else None

    def layout(self) -> CellLayout:
        """Return the cell layout these parameters select (grounded poses applied)."""
        layout = layout_from_world_file(self.world_path) if self.world_path else NOMINAL_LAYOUT
        if self.grounding_artifact:
            overrides = load_world_overrides(self.grounding_artifact)
            layout = apply_layout_overrides(layout, overrides, self.grounding_artifact)
        return layout


def to_transform_msg(transform: FrameTransform, stamp: Time) -> TransformStamped:
    """Convert a :class:`FrameTransform` into ``geometry_msgs/TransformStamped``."""
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = transform.parent
    msg.child_frame_id = transform.child
    x, y, z = transform.translation_m
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = x, y, z
    w, qx, qy, qz = transform.quat_wxyz
    rotation = msg.transform.rotation
    rotation.w, rotation.x, rotation.y, rotation.z = w, qx, qy, qz
    return msg


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = CellStatePublisherConfig


class CellStatePublisher(Node):
    """Publishes ``/robot_description``, ``/tf_static`` and ``/tf``; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``...).

    Raises:
        ConfigError: A parameter value is invalid (named, with the expectation).

    """

    def __init__(self, node_name: str = "cell_state_publisher", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._lock = threading.Lock()
        self.received = 0
        self.rejected = 0
        self.published = 0
        self._last_published_ns: int | None = None
        self.unknown_joints: set[str] = set()
        self.last_error = ""
        self._description_pub = self.create_publisher(String, ROBOT_DESCRIPTION, LATCHED_QOS)
        self._static_pub = self.create_publisher(TFMessage, TF_STATIC, LATCHED_QOS)
        self._tf_pub = self.create_publisher(TFMessage, TF, TF_QOS)
        self._diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS, DEFAULT_QOS)
        self.config = declare_config(self, PARAMETER_SCHEMA, on_change=self._apply)
        self.description: Description = build_description(self.config.layout())
        self._publish_description()
        # Raw: a joint state is decoded only when it is due on /tf (decoding 500 Hz messages in
        # Python cost more than the transforms). Taken in batches at twice the publish
        # frequency: one executor wake-up per batch instead of one per 500 Hz message.
        self._joint_stream = BatchedSubscription(
            self,
            JointState,
            JOINT_STATES,
            self._on_joint_state_batch,
            JOINT_STATES_LISTENER_QOS,
            self._batch_period_s(self.config),
            raw=True,
        )
        self._diagnostics_timer = self.create_timer(
            self.config.diagnostics_period_s, self._publish_diagnostics
        )
        self.refused: str | None = None
        self.unchecked = False
        self.cell_check: StaticSceneCheck | None = None
        self.cell_note = self._start_cell_check()

    def _start_cell_check(self) -> str:
        """Start comparing the static scene with the artifact's; return what is compared."""
        if not self.config.grounding_artifact:
            return "ungrounded: nothing to compare"
        cell = self.config.artifact_cell()
        if cell is None or cell.grid() is None:
            what = "no cell" if cell is None else f"{cell.describe()} without a static scene"
            note = f"the artifact records {what}: the cell is not checked"
            self.get_logger().warning(f"{self.config.grounding_artifact}: {note}")
            return note
        if not self.config.static_scene_check:
            return f"artifact's cell {cell.describe()}: static_scene_check off"
        self.cell_check = StaticSceneCheck(
            cell,
            StaticSceneLimits(),
            time.monotonic(),
            self.config.static_scene_window_s,
            self.config.static_scene_timeout_s,
        )
        self._depth_sub = self.create_subscription(
            Image, HEAD_DEPTH, self._on_depth, SENSOR_DATA_QOS
        )
        self._check_timer = self.create_timer(1.0, self._expire_cell_check)
        return self.cell_check.message(self.config.grounding_artifact)

    def _on_depth(self, msg: Image) -> None:
        """Offer a head depth image to the cell check."""
        check = self.cell_check
        if check is None or check.verdict != StaticSceneCheck.PENDING:
            return
        try:
            depth = from_image_msg(msg).astype("float32")
        except ImageConversionError as error:
            self.last_error = f"head depth: {error}"
            return
        if msg.encoding == "16UC1":
            depth = depth / 1000.0  # millimetres (REP 118)
        check.offer(time.monotonic(), depth)
        self._cell_check_done()

    def _expire_cell_check(self) -> None:
        if self.cell_check is not None:
            self.cell_check.expire(time.monotonic())
            self._cell_check_done()

    def _cell_check_done(self) -> None:
        """Act on a final verdict once: log it, stop listening, refuse another cell."""
        check = self.cell_check
        if check is None or check.verdict == StaticSceneCheck.PENDING:
            return
        self.cell_note = check.message(self.config.grounding_artifact)
        self.destroy_subscription(self._depth_sub)
        self._check_timer.cancel()
        if check.verdict == StaticSceneCheck.PASSED:
            self.get_logger().info(self.cell_note)
        elif check.verdict == StaticSceneCheck.UNCHECKED:
            self.unchecked = True
            self.get_logger().warning(self.cell_note)
        else:
            self.refused = self.cell_note
            self.get_logger().error(self.cell_note)
            self._publish_diagnostics()
        self.cell_check = None

    def _apply(self, config: CellStatePublisherConfig) -> None:
        """Rebuild the description after an accepted parameter change and republish it."""
        with self._lock:
            self.config = config
            self.description = build_description(config.layout())
        self._publish_description()
        self._diagnostics_timer.timer_period_ns = int(config.diagnostics_period_s * 1e9)
        self._joint_stream.set_period(self._batch_period_s(config))

    def _publish_description(self) -> None:
        self._description_pub.publish(String(data=to_urdf(self.description)))
        if self.config.publish_fixed:
            stamp = self.get_clock().now().to_msg()
            self._static_pub.publish(
                TFMessage(
                    transforms=[
                        to_transform_msg(t, stamp) for t in fixed_transforms(self.description)
                    ]
                )
            )
        grounded = (
            f", grounded by {self.config.grounding_artifact}"
            if self.config.grounding_artifact
            else " (ungrounded)"
        )
        self.get_logger().info(
            f"published /robot_description ({len(self.description.links)} links) for "
            f"{self.config.world_path or 'the CAD layout'}{grounded}"
        )

    @staticmethod
    def _batch_period_s(config: CellStatePublisherConfig) -> float:
        """Joint states are taken at twice the publish frequency, at least every 20 ms."""
        if config.publish_frequency > 0.0:
            return min(0.5 / config.publish_frequency, MAX_BATCH_PERIOD_S)
        return MAX_BATCH_PERIOD_S

    def _on_joint_state_batch(self, batch: list[bytes]) -> None:
        """Handle the joint states queued since the last batch, oldest first."""
        for data in batch:
            self._on_joint_state_bytes(data)

    def _on_joint_state_bytes(self, data: bytes) -> None:
        """Decode a serialized joint state and turn it into /tf, only when it is due."""
        self.received += 1
        stamp_ns = serialized_stamp_ns(data)
        if stamp_ns is not None and stamp_ns != 0 and not self._due(stamp_ns):
            return
        self._publish_joint_state(deserialize_message(data, JointState))

    def _publish_joint_state(self, msg: JointState) -> None:
        """Publish the moving joints of a due joint state on /tf (or count why not)."""
        try:
            positions = check_joint_state(list(msg.name), list(msg.position))
        except JointStateError as error:
            self.rejected += 1
            self.last_error = str(error)
            self.get_logger().warning(str(error), throttle_duration_sec=5.0)
            return
        stamp = msg.header.stamp
        if stamp.sec == 0 and stamp.nanosec == 0:
            stamp = self.get_clock().now().to_msg()
        stamp_ns = stamp_to_ns(stamp)
        if not self._due(stamp_ns):
            return
        with self._lock:
            result = moving_transforms(self.description, positions)
        self.unknown_joints.update(result.unknown_joints)
        if result.transforms:
            self._tf_pub.publish(
                TFMessage(transforms=[to_transform_msg(t, stamp) for t in result.transforms])
            )
            self.published += 1
            self._last_published_ns = stamp_ns

    def destroy_node(self) -> None:
        """Destroy the node and the hidden reader node its joint-state batches come from."""
        stream = getattr(self, "_joint_stream", None)  # absent when __init__ failed early
        if stream is not None:
            stream.destroy()
        super().destroy_node()

    def _due(self, stamp_ns: int) -> bool:
        """Whether a joint state stamped ``stamp_ns`` is due on /tf (publish_frequency)."""
        frequency = self.config.publish_frequency
        last = self._last_published_ns
        return not (frequency > 0.0 and last is not None and 0 <= stamp_ns - last < 1e9 / frequency)

    def _publish_diagnostics(self) -> None:
        level = DiagnosticStatus.OK
        message = "publishing"
        if self.refused is not None:
            level, message = DiagnosticStatus.ERROR, self.refused
        elif self.unchecked:
            level, message = DiagnosticStatus.WARN, self.cell_note
        elif self.received == 0:
            level, message = DiagnosticStatus.WARN, "no /joint_states received yet"
        elif self.rejected or self.unknown_joints:
            level, message = DiagnosticStatus.WARN, "malformed joint states or unknown joints"
        values = {
            "world_path": self.config.world_path or "(CAD layout)",
            "grounding_artifact": self.config.grounding_artifact or "(ungrounded)",
            "joint_states_received": str(self.received),
            "joint_states_rejected": str(self.rejected),
            "tf_published": str(self.published),
            "publish_frequency": f"{self.config.publish_frequency:g}",
            "unknown_joints": ",".join(sorted(self.unknown_joints)),
            "last_error": self.last_error,
            "cell": self.cell_note,
        }
        array = diagnostics_array(
            f"{self.get_name()}: tf",
            level,
            message,
            "cell",
            values,
            self.get_clock().now().to_msg(),
        )
        self._diagnostics_pub.publish(array)


def main(args: list[str] | None = None) -> None:
    """Run the node until Ctrl-C; bad parameters or another cell end it with exit code 2."""
    sys.exit(
        run_node(
            CellStatePublisher,
            args=args,
            until=lambda node: node.refused is not None,
            exit_code=lambda node: ExitCode.BAD_INPUT,
        )
    )
