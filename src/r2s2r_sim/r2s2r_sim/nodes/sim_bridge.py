"""``sim_bridge``: the simulator next to a real cell (mirror) or in place of one (generation).

A lifecycle node with two modes (parameter ``mode``, read at configure):

``mirror`` (default)
    A kinematic MuJoCo copy of the cell (:class:`~r2s2r_sim.mirror.CellMirror`, world from
    ``world_path`` grounded by ``grounding_artifact`` when one is given) follows the real cell:
    ``/joint_states`` set the joints, ``/objects/tracks`` place the objects, and with
    ``mounts_from_tf`` fixed transforms on ``/tf_static`` and ``/tf`` move the mounts (base,
    belt, bins, cameras; without it the copy keeps its world's mounts and TF is only compared).
    Publishes ``/cell/markers`` (table, belt, bins, camera housing in their link frames;
    mirrored objects in ``world`` with their type's shape and colour; in namespace
    ``mirror_belt``, translucent, the objects the mirror's belt predicts),
    ``/diagnostics`` with the live grounding check (:mod:`r2s2r_sim.mirror_check`: palm
    distance between the cell's TF and the copy for the same joint state, tracked objects
    against the mirror's belt-carried objects, the age of every input; WARN beyond
    ``palm_error_warn_m``, ``object_error_warn_m`` or the timeouts) and the copy's own
    consistency (palm vs the forward kinematics of the received joint state), and optionally
    ``/sim/<camera>/image_raw`` renders of the copy for side-by-side views.

``generation``
    Serves a :class:`~r2s2r_sim.cell_runtime.SimCell` of the nominal or grounded world through
    the real twin's server (:class:`~r2s2r_sim.nodes.cell_server.CellServer`: cameras with the
    world's own camera_info, head depth, ``/joint_states``, controller topics, belt encoder,
    ``/tf_static``, ``/clock``, ``/trial/outcome``, ``/trial/start``, ``/trial/reset``,
    ``/diagnostics``), paced to the wall clock at ``real_time_factor``, plus ``/cell/markers``
    with the simulated objects. The twin's hidden world files (a ``twin/`` folder) are refused.

configure: parameters -> :class:`SimBridgeConfig`, load the world, build the simulator and
publishers (FAILURE with a logged reason on bad input). activate: subscriptions, services and
timers (generation: stepping). deactivate: stop them. cleanup: free the simulator.
``autostart`` configures and activates at start-up (there is no lifecycle manager here).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TransformStamped, TwistStamped
from pydantic import Field, field_validator
from r2s2r_common.config import ConfigError, ConfigModel, resolve_config_path
from r2s2r_common.image_conversion import ImageConversionError, from_image_msg, to_image_msg
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.lifecycle import ComponentLifecycleNode
from r2s2r_common.ros.qos import DEFAULT_QOS, LATCHED_QOS, SENSOR_DATA_QOS, TF_QOS
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_common.ros.time import time_msg
from r2s2r_common.stamps import stamp_to_ns, stamp_to_s
from r2s2r_common.topics import (
    BELT_SPEED,
    CELL_MARKERS,
    HEAD_DEPTH,
    JOINT_STATES,
    OBJECT_TRACKS,
    TF,
    TF_STATIC,
    sim_camera_image,
)
from r2s2r_description.cameras import CAMERA_NAMES, HEAD, camera
from r2s2r_description.cell import BELT_LENGTH_M, BELT_WIDTH_M, build_description
from r2s2r_description.frames import BASE_LINK, PALM_LINK, WORLD_FRAME
from r2s2r_description.transforms import make_transform, quat_to_matrix
from r2s2r_world.cell_identity import StaticSceneLimits, StaticSceneMatch
from r2s2r_world.grounding import load_cell_world
from r2s2r_world.world import WorldParams
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import Image, JointState
from visualization_msgs.msg import Marker, MarkerArray

from r2s2r_interfaces.msg import ObjectTrackArray
from r2s2r_sim.backend import BackendError
from r2s2r_sim.backend_config import make_backend
from r2s2r_sim.cell_runtime import CellConfig, SimCell
from r2s2r_sim.markers import MarkerShape, MarkerSpec, cell_markers, object_marker
from r2s2r_sim.mirror import CellMirror, MirrorError, TrackInput, TransformResult
from r2s2r_sim.mirror_check import (
    BeltGeometry,
    BeltObjectCheck,
    Level,
    MirrorCheckError,
    MirrorLimits,
    MirrorMeasurement,
    ObjectResidual,
    PositionHistory,
    TransformBuffer,
    input_ages,
    mirror_status,
    palm_error_m,
    rest_heights_m,
    static_scene_match,
)
from r2s2r_sim.nodes.cell_server import CellServer, CellServerOptions
from tf2_msgs.msg import TFMessage

STAMP_MATCH_TOLERANCE_NS = 1_000_000
"""A TF palm and a mirror palm belong to the same joint state within this (same stamp)."""

_DIAGNOSTIC_LEVELS = {
    Level.OK: DiagnosticStatus.OK,
    Level.WARN: DiagnosticStatus.WARN,
    Level.ERROR: DiagnosticStatus.ERROR,
}

_MARKER_TYPES = {
    MarkerShape.CUBE: Marker.CUBE,
    MarkerShape.CYLINDER: Marker.CYLINDER,
    MarkerShape.SPHERE: Marker.SPHERE,
}


class SimBridgeConfig(ConfigModel):
    """Parameters of the ``sim_bridge`` node (each one a declared ROS parameter)."""

    mode: Literal["mirror", "generation"] = Field(
        default="mirror",
        description="mirror: follow the real cell; generation: serve the simulator's own "
        "topics with the twin's interface.",
    )
    autostart: bool = Field(
        default=True, description="Configure and activate at start-up (no lifecycle manager)."
    )
    world_path: str = Field(
        default="world/nominal.yaml",
        description="World YAML of the simulator: the nominal or a grounded world (never the "
        "twin's). Relative paths resolve against the r2s2r share config/, then the source "
        "tree's config/.",
    )
    grounding_artifact: str = Field(
        default="",
        description="Grounding artifact YAML whose world_overrides ground world_path (the "
        "grounded world); empty = world_path as it is.",
    )
    markers_rate_hz: float = Field(
        default=5.0, gt=0.0, le=60.0, description="Rate of /cell/markers (wall clock)."
    )
    diagnostics_rate_hz: float = Field(
        default=1.0, gt=0.0, le=50.0, description="Rate of /diagnostics (wall clock)."
    )
    object_slots_per_type: int = Field(
        default=3, ge=1, le=20, description="Mirror: objects of one type shown at once."
    )
    joint_state_timeout_s: float = Field(
        default=0.5,
        gt=0.0,
        le=60.0,
        description="Mirror: older joint states make the mirror stale (diagnostics WARN).",
    )
    palm_error_warn_m: float = Field(
        default=0.001,
        gt=0.0,
        le=1.0,
        description="Mirror: palm distance between the copy and the cell's TF (or the FK of "
        "the joint state) above which diagnostics WARN.",
    )
    mounts_from_tf: bool = Field(
        default=True,
        description="Mirror: fixed transforms on /tf_static and /tf move the copy's mounts; "
        "false keeps the world's mounts, so the palm check compares them with the cell's TF.",
    )
    object_error_warn_m: float = Field(
        default=0.02,
        gt=0.0,
        le=1.0,
        description="Mirror: tracked object vs the mirror's belt-carried object (mean over its "
        "last 10 tracks) above which diagnostics WARN.",
    )
    object_lifted_m: float = Field(
        default=0.03,
        gt=0.0,
        le=0.5,
        description="Mirror: a track this far off its rest height on the belt is off the belt "
        "(in the hand): not compared.",
    )
    input_timeout_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="Mirror: /tf, /objects/tracks and /belt/speed older than this (or never "
        "received) are stale (diagnostics WARN).",
    )
    publish_sim_images: bool = Field(
        default=False, description="Mirror: publish renders of the copy on /sim/<camera>/image_raw."
    )
    sim_image_rate_hz: float = Field(
        default=5.0, gt=0.0, le=60.0, description="Mirror: rate of the /sim camera renders."
    )
    sim_image_cameras: list[str] = Field(
        default_factory=lambda: [HEAD.name],
        description="Mirror: cameras rendered on /sim/<camera>/image_raw.",
    )
    static_scene_check: bool = Field(
        default=True,
        description="Mirror: compare the cell's head depth with the copy's render of the same "
        "view every static_scene_period_s (checks the grounding while the belt is empty; "
        "needs an OpenGL backend, MUJOCO_GL=egl: without one the status says it cannot).",
    )
    static_scene_period_s: float = Field(
        default=5.0,
        gt=0.0,
        le=600.0,
        description="Mirror: period of the static-scene comparison (one depth render, ~ms).",
    )
    real_time_factor: float = Field(
        default=1.0, gt=0.0, le=1000.0, description="Generation: simulated s per wall s."
    )
    tick_rate_hz: float = Field(
        default=100.0, ge=1.0, le=1000.0, description="Generation: stepping timer rate."
    )
    encoder_rate_hz: float = Field(
        default=100.0, gt=0.0, le=1000.0, description="Generation: belt encoder rate (sim time)."
    )
    publish_depth: bool = Field(
        default=True, description="Generation: publish registered head depth."
    )
    max_lag_s: float = Field(
        default=0.25,
        gt=0.0,
        le=10.0,
        description="Generation: simulated lag behind the wall clock beyond which the backlog "
        "is dropped.",
    )
    seed: int = Field(default=0, ge=0, description="Generation: seed of the idle cell.")

    @field_validator("sim_image_cameras")
    @classmethod
    def _known_cameras(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in CAMERA_NAMES]
        if unknown:
            raise ValueError(f"unknown cameras {unknown}; expected names from {CAMERA_NAMES}")
        return value


def load_bridge_world(world_path: str, grounding_artifact: str = "") -> tuple[Path, WorldParams]:
    """Resolve and load the bridge's world (grounded by the artifact if given).

    Refuses the twin's hidden files.

    Raises:
        ConfigError: Missing or invalid file, or a file in a ``twin`` folder.

    """
    path = resolve_config_path(world_path)
    if path.resolve().parent.name == "twin":
        raise ConfigError(
            f"world_path = {world_path!r} ({path}): a twin world; only the real twin may read "
            "it. Expected the nominal world or a grounded world"
        )
    return path, load_cell_world(path, grounding_artifact)


def to_marker_msg(spec: MarkerSpec, stamp: Time) -> Marker:
    """Convert a :class:`MarkerSpec` into ``visualization_msgs/Marker`` (action ADD)."""
    marker = Marker(ns=spec.namespace, id=spec.marker_id, type=_MARKER_TYPES[spec.shape])
    marker.action = Marker.ADD
    marker.header.stamp = stamp
    marker.header.frame_id = spec.frame_id
    p, q = marker.pose.position, marker.pose.orientation
    p.x, p.y, p.z = spec.position_m
    q.w, q.x, q.y, q.z = spec.quat_wxyz
    marker.scale.x, marker.scale.y, marker.scale.z = spec.scale_m
    marker.color.r, marker.color.g, marker.color.b, marker.color.a = spec.rgba
    marker.frame_locked = True  # cell parts follow their link frame as /tf changes
    return marker


def marker_array(specs: list[MarkerSpec], stamp: Time) -> MarkerArray:
    """Build a full snapshot: DELETEALL first (vanished objects disappear), then every marker."""
    clear = Marker(action=Marker.DELETEALL)
    clear.header.stamp = stamp
    return MarkerArray(markers=[clear, *(to_marker_msg(spec, stamp) for spec in specs)])


def transform_matrix(msg: TransformStamped) -> np.ndarray:
    """4x4 ``parent <- child`` of a ``geometry_msgs/TransformStamped``."""
    t, q = msg.transform.translation, msg.transform.rotation
    return make_transform((t.x, t.y, t.z), quat_to_matrix((q.w, q.x, q.y, q.z)))


class _MirrorMode:
    """ROS wiring of mirror mode (the node owns it between configure and cleanup)."""

    def __init__(self, node: SimBridgeNode, config: SimBridgeConfig, world: WorldParams):
        self.node = node
        self.config = config
        self.static_scene: StaticSceneMatch | None = None
        self.static_scene_problem = "" if config.static_scene_check else "static_scene_check off"
        self.cell_depth: tuple[float, Image] | None = None
        self.mirror = self._build_mirror(world)
        self.cell_marker_specs = cell_markers(self.mirror.description)
        self.lock = threading.Lock()
        self.rejected_joint_states = 0
        self.rejected_tracks = 0
        self.last_error = ""
        self.ignored_joints: set[str] = set()
        self.missing_joints: tuple[str, ...] = ()
        self.frames_applied: set[str] = set()
        self.frames_not_mirrored: dict[str, str] = {}
        self.track_messages = 0
        self.unknown_types: set[str] = set()
        self.overflow = 0
        # The live grounding check (r2s2r_sim.mirror_check).
        self.object_types = world.objects
        self.tf = TransformBuffer()
        self.palm_history = PositionHistory()
        self.belt_check = self._belt_check()
        self.palm_tf_error_m: float | None = None
        self.residuals: list[ObjectResidual] = []
        self.received_s: dict[str, float | None] = {TF: None, OBJECT_TRACKS: None, BELT_SPEED: None}
        self.rejected_transforms = 0
        self.rejected_belt_speeds = 0
        self.markers_pub = node.create_lifecycle_publisher(MarkerArray, CELL_MARKERS, DEFAULT_QOS)
        self.image_pubs = {
            name: node.create_lifecycle_publisher(Image, sim_camera_image(name), SENSOR_DATA_QOS)
            for name in config.sim_image_cameras
        }
        self.entities: list[Any] = []

    def _build_mirror(self, world: WorldParams) -> CellMirror:
        """Build the copy, rendering when a check or the /sim images need it and GL allows."""
        config = self.config
        rendering = config.publish_sim_images or config.static_scene_check
        try:
            return CellMirror(world, config.object_slots_per_type, enable_rendering=rendering)
        except Exception as error:
            if config.publish_sim_images:
                raise
            self.static_scene_problem = f"cannot render the mirror's view ({error})"
            self.node.get_logger().warning(f"static scene not compared: {error}")
            return CellMirror(world, config.object_slots_per_type, enable_rendering=False)

    def _belt_check(self) -> BeltObjectCheck:
        """Build the object check on the copy's belt as it stands now."""
        sizes = {name: kind.size_m for name, kind in self.object_types.items()}
        belt = BeltGeometry(
            self.mirror.frame_pose("belt_link"), BELT_LENGTH_M, BELT_WIDTH_M, rest_heights_m(sizes)
        )
        return BeltObjectCheck(belt, self.config.object_lifted_m)

    def activate(self) -> None:
        node, config = self.node, self.config
        self.entities = [
            node.create_subscription(JointState, JOINT_STATES, self.on_joint_state, DEFAULT_QOS),
            node.create_subscription(TFMessage, TF, self.on_tf, TF_QOS),
            node.create_subscription(TFMessage, TF_STATIC, self.on_tf_static, LATCHED_QOS),
            node.create_subscription(ObjectTrackArray, OBJECT_TRACKS, self.on_tracks, DEFAULT_QOS),
            node.create_subscription(TwistStamped, BELT_SPEED, self.on_belt_speed, DEFAULT_QOS),
            node.create_timer(1.0 / config.markers_rate_hz, self.publish_markers),
        ]
        if config.publish_sim_images:
            self.entities.append(
                node.create_timer(1.0 / config.sim_image_rate_hz, self.publish_images)
            )
        if not self.static_scene_problem:
            self.entities += [
                node.create_subscription(Image, HEAD_DEPTH, self.on_depth, SENSOR_DATA_QOS),
                node.create_timer(config.static_scene_period_s, self.compare_static_scene),
            ]

    def deactivate(self) -> None:
        for entity in self.entities:
            if hasattr(entity, "timer_period_ns"):
                self.node.destroy_timer(entity)
            else:
                self.node.destroy_subscription(entity)
        self.entities = []

    def close(self) -> None:
        self.deactivate()
        self.node.destroy_lifecycle_publisher(self.markers_pub)
        for publisher in self.image_pubs.values():
            self.node.destroy_lifecycle_publisher(publisher)
        self.mirror.close()

    # -- inputs -------------------------------------------------------------------------------
    def on_joint_state(self, msg: JointState) -> None:
        with self.lock:
            try:
                update = self.mirror.apply_joint_state(
                    list(msg.name), list(msg.position), time.monotonic()
                )
            except MirrorError as error:
                self.rejected_joint_states += 1
                self.last_error = str(error)
                self.node.get_logger().warning(str(error), throttle_duration_sec=5.0)
                return
            self.ignored_joints.update(update.ignored)
            self.missing_joints = update.missing
            stamp_ns = stamp_to_ns(msg.header.stamp)
            if stamp_ns > 0:  # the palm of this joint state, for the TF comparison
                self.palm_history.add(stamp_ns, self.mirror.frame_pose(PALM_LINK)[:3, 3])

    def on_tf(self, msg: TFMessage) -> None:
        self._on_transforms(msg, static=False)

    def on_tf_static(self, msg: TFMessage) -> None:
        self._on_transforms(msg, static=True)

    def _on_transforms(self, msg: TFMessage, static: bool) -> None:
        with self.lock:
            if not static:
                self.received_s[TF] = time.monotonic()
            for transform in msg.transforms:
                parent = transform.header.frame_id.lstrip("/")
                child = transform.child_frame_id.lstrip("/")
                t, q = transform.transform.translation, transform.transform.rotation
                try:
                    self.tf.set_transform(
                        parent,
                        child,
                        (t.x, t.y, t.z),
                        (q.w, q.x, q.y, q.z),
                        None if static else stamp_to_ns(transform.header.stamp),
                    )
                except MirrorCheckError as error:
                    self.rejected_transforms += 1
                    self.last_error = str(error)
                    continue
                if self.config.mounts_from_tf:
                    self._apply_mount(parent, child, transform)
            self._compare_palm()

    def _apply_mount(self, parent: str, child: str, transform: TransformStamped) -> None:
        try:
            result = self.mirror.apply_fixed_transform(parent, child, transform_matrix(transform))
        except MirrorError as error:
            self.last_error = str(error)
            return
        if result == TransformResult.APPLIED:
            self.frames_applied.add(child)
            self.frames_not_mirrored.pop(child, None)
            if child == "belt_link":
                self.belt_check = self._belt_check()
        elif result != TransformResult.JOINT_DRIVEN:
            self.frames_not_mirrored[child] = f"{parent}: {result.value}"

    def _compare_palm(self) -> None:
        """Compare the TF palm with the copy's palm of the same joint state (when both exist)."""
        try:
            pose, stamp_ns = self.tf.lookup(WORLD_FRAME, PALM_LINK)
        except MirrorCheckError:
            return  # not every frame of the chain has arrived yet
        if stamp_ns is None:
            return
        mirrored = self.palm_history.at(stamp_ns, STAMP_MATCH_TOLERANCE_NS)
        if mirrored is not None:
            self.palm_tf_error_m = palm_error_m(pose[:3, 3], mirrored)

    def on_belt_speed(self, msg: TwistStamped) -> None:
        with self.lock:
            try:
                self.belt_check.set_belt_speed(float(msg.twist.linear.x))
            except MirrorCheckError as error:
                self.rejected_belt_speeds += 1
                self.last_error = str(error)
                return
            self.received_s[BELT_SPEED] = time.monotonic()

    def on_tracks(self, msg: ObjectTrackArray) -> None:
        tracks = [
            TrackInput(
                int(track.id),
                str(track.object_type),
                (track.pose.position.x, track.pose.position.y, track.pose.position.z),
                (
                    track.pose.orientation.w,
                    track.pose.orientation.x,
                    track.pose.orientation.y,
                    track.pose.orientation.z,
                ),
            )
            for track in msg.tracks
        ]
        with self.lock:
            self.track_messages += 1
            try:
                update = self.mirror.apply_tracks(msg.header.frame_id or BASE_LINK, tracks)
            except MirrorError as error:
                self.rejected_tracks += 1
                self.last_error = str(error)
                self.node.get_logger().warning(str(error), throttle_duration_sec=5.0)
                return
            self.unknown_types.update(update.unknown_types)
            self.overflow = update.overflow
            self.received_s[OBJECT_TRACKS] = time.monotonic()
            shown = [(o.track_id, o.object_type, o.position_m) for o in self.mirror.objects()]
            self.residuals = self.belt_check.update(stamp_to_s(msg.header.stamp), shown)

    # -- outputs ------------------------------------------------------------------------------
    def marker_specs(self) -> list[MarkerSpec]:
        with self.lock:
            objects = self.mirror.objects()
            residuals = list(self.residuals)
        specs = list(self.cell_marker_specs)
        for item in objects:
            specs.append(
                object_marker(
                    item.track_id,
                    item.object_type,
                    self.mirror.world.objects,
                    WORLD_FRAME,
                    item.position_m,
                    item.quat_wxyz,
                )
            )
        for residual in residuals:  # the mirror's belt-carried objects, translucent
            spec = object_marker(
                residual.track_id,
                residual.object_type,
                self.mirror.world.objects,
                WORLD_FRAME,
                residual.predicted_m,
                (1.0, 0.0, 0.0, 0.0),
                namespace="mirror_belt",
            )
            specs.append(dataclasses.replace(spec, rgba=(*spec.rgba[:3], 0.35)))
        return specs

    def publish_markers(self) -> None:
        stamp = self.node.get_clock().now().to_msg()
        self.markers_pub.publish(marker_array(self.marker_specs(), stamp))

    def on_depth(self, msg: Image) -> None:
        """Keep the cell's newest head depth image (compared every static_scene_period_s)."""
        self.cell_depth = (time.monotonic(), msg)

    def compare_static_scene(self) -> None:
        """Compare the cell's newest head depth with the copy's render of the same view."""
        received = self.cell_depth
        if received is None or time.monotonic() - received[0] > self.config.static_scene_period_s:
            return  # nothing new: the last comparison stands (the depth age is reported)
        try:
            depth = from_image_msg(received[1]).astype(np.float32)
            if received[1].encoding == "16UC1":
                depth /= 1000.0  # millimetres (REP 118)
            with self.lock:
                rendered = self.mirror.render_depth(HEAD.name)
            self.static_scene = static_scene_match(depth, rendered, StaticSceneLimits())
        except (ImageConversionError, MirrorCheckError, BackendError) as error:
            self.last_error = f"static scene: {error}"

    def publish_images(self) -> None:
        stamp = self.node.get_clock().now().to_msg()
        for name, publisher in self.image_pubs.items():
            with self.lock:
                rgb = self.mirror.render(name)
            publisher.publish(to_image_msg(rgb, "rgb8", stamp, camera(name).optical_frame))

    def diagnostics(self) -> DiagnosticArray:
        config = self.config
        with self.lock:
            now_s = time.monotonic()
            age_s = self.mirror.joint_state_age_s(now_s)
            fk_error_m = self.mirror.palm_error_m()
            ages = {JOINT_STATES: age_s, **input_ages(self.received_s, now_s)}
            object_errors = [r.mean_error_m for r in self.residuals]
            measurement = MirrorMeasurement(
                self.palm_tf_error_m,
                max(object_errors) if object_errors else None,
                ages,
                self.static_scene,
            )
            scene = self.static_scene
            depth_age = None if self.cell_depth is None else now_s - self.cell_depth[0]
            values = {
                "mode": "mirror",
                "joint_states_applied": str(self.mirror.joint_states_applied),
                "joint_states_rejected": str(self.rejected_joint_states),
                "joint_state_age_s": "none" if age_s is None else f"{age_s:.3f}",
                "palm_error_m": f"{fk_error_m:.3e}",
                "palm_tf_error_m": _figure(measurement.palm_error_m),
                "object_error_m": _figure(measurement.object_error_m),
                "objects_on_belt": str(len(object_errors)),
                "static_scene": self.static_scene_problem
                or ("not compared yet" if scene is None else scene.summary()),
                "head_depth_age_s": _figure(depth_age),
                **{
                    f"{name.strip('/').replace('/', '_')}_age_s": _figure(a)
                    for name, a in ages.items()
                },
                "transforms_rejected": str(self.rejected_transforms),
                "belt_speeds_rejected": str(self.rejected_belt_speeds),
                "ignored_joints": ",".join(sorted(self.ignored_joints)),
                "missing_joints": ",".join(self.missing_joints),
                "frames_mirrored": ",".join(sorted(self.frames_applied)),
                "frames_not_mirrored": ",".join(
                    f"{k} ({v})" for k, v in sorted(self.frames_not_mirrored.items())
                ),
                "track_messages": str(self.track_messages),
                "objects_shown": str(len(self.mirror.objects())),
                "track_messages_rejected": str(self.rejected_tracks),
                "unknown_object_types": ",".join(sorted(self.unknown_types)),
                "tracks_over_slots": str(self.overflow),
                "last_error": self.last_error,
            }
        limits = MirrorLimits(
            config.palm_error_warn_m,
            config.object_error_warn_m,
            {
                JOINT_STATES: config.joint_state_timeout_s,
                TF: config.input_timeout_s,
                OBJECT_TRACKS: config.input_timeout_s,
                BELT_SPEED: config.input_timeout_s,
            },
        )
        level, message = mirror_status(measurement, limits)
        if level == Level.OK and fk_error_m > config.palm_error_warn_m:
            level = Level.WARN
            message = f"mirror error: palm {fk_error_m * 1000:.2f} mm off the joint-state FK"
        array = diagnostics_array(
            f"{self.node.get_name()}: mirror",
            _DIAGNOSTIC_LEVELS[level],
            message,
            "sim",
            values,
            self.node.get_clock().now().to_msg(),
        )
        return array


def _figure(value: float | None) -> str:
    return "none" if value is None else f"{value:.3e}"


class _GenerationMode:
    """ROS wiring of generation mode: a :class:`SimCell` served like the real twin."""

    def __init__(self, node: SimBridgeNode, config: SimBridgeConfig, world: WorldParams):
        self.node = node
        self.config = config
        # The bridge's world is what it simulates *and* what it publishes (no hidden truth).
        cell = SimCell(
            make_backend(),
            world,
            world,
            CellConfig(encoder_rate_hz=config.encoder_rate_hz, render_depth=config.publish_depth),
            seed=config.seed,
        )
        self.server = CellServer(
            node,
            cell,
            CellServerOptions(
                real_time_factor=config.real_time_factor,
                tick_rate_hz=config.tick_rate_hz,
                max_lag_s=config.max_lag_s,
                reset_seed=config.seed,
                camera_frame_ids={name: camera(name).optical_frame for name in CAMERA_NAMES},
                camera_calibrations={name: cell.camera_calibration(name) for name in CAMERA_NAMES},
                status_name=f"{node.get_name()}: generation",
                hardware_id="sim",
                status_extra={"mode": "generation"},
            ),
        )
        self.cell_marker_specs = cell_markers(build_description(world.layout()))
        self.markers_pub = node.create_lifecycle_publisher(MarkerArray, CELL_MARKERS, DEFAULT_QOS)
        self.markers_timer: Any = None

    def activate(self) -> None:
        self.server.activate()
        self.markers_timer = self.node.create_timer(
            1.0 / self.config.markers_rate_hz, self.publish_markers
        )

    def deactivate(self) -> None:
        self.server.deactivate()
        if self.markers_timer is not None:
            self.node.destroy_timer(self.markers_timer)
            self.markers_timer = None

    def close(self) -> None:
        self.deactivate()
        self.node.destroy_lifecycle_publisher(self.markers_pub)
        self.server.close()

    def marker_specs(self) -> list[MarkerSpec]:
        with self.server.lock:
            cell = self.server.cell
            poses = list(cell.backend.object_poses().values())
            object_types = cell.world.objects
        specs = list(self.cell_marker_specs)
        active = [pose for pose in poses if pose.active]
        for index, pose in enumerate(active):
            specs.append(
                object_marker(
                    index,
                    pose.type_name,
                    object_types,
                    WORLD_FRAME,
                    pose.position_m,
                    pose.quat_wxyz,
                )
            )
        return specs

    def publish_markers(self) -> None:
        stamp = time_msg(self.server.time_s())
        self.markers_pub.publish(marker_array(self.marker_specs(), stamp))

    def diagnostics(self) -> DiagnosticArray:
        return self.server.diagnostics()


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = SimBridgeConfig


class SimBridgeNode(ComponentLifecycleNode[SimBridgeConfig, _MirrorMode | _GenerationMode]):
    """The sim bridge; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str = "sim_bridge", **kwargs: Any) -> None:
        super().__init__(node_name, PARAMETER_SCHEMA, **kwargs)
        self.config: SimBridgeConfig | None = None

    @property
    def mode(self) -> _MirrorMode | _GenerationMode | None:
        """The mode's wiring while configured, else None."""
        return self.component

    # -- lifecycle ---------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Build the config, load the world, build the simulator; FAILURE on bad input."""
        try:
            config = self.config_from_parameters()
            path, world = load_bridge_world(config.world_path, config.grounding_artifact)
            mode_type = _MirrorMode if config.mode == "mirror" else _GenerationMode
            mode = mode_type(self, config, world)
        except (ConfigError, ValueError) as error:
            self.get_logger().error(f"configure failed: {error}")
            return TransitionCallbackReturn.FAILURE
        self.config = config
        self.serve(mode, config.diagnostics_rate_hz)
        grounded = f", grounded by {config.grounding_artifact}" if config.grounding_artifact else ""
        self.get_logger().info(f"configured: {config.mode} mode, world {path}{grounded}")
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        """Free the mode (the mirror, or the cell and its server) and the diagnostics."""
        super().release()
        self.config = None


def main(args: list[str] | None = None) -> None:
    """Run the sim bridge; with ``autostart`` it configures and activates itself.

    Exits with code 2 when autostart fails (bad parameters or configuration files).
    """
    sys.exit(run_lifecycle_node(SimBridgeNode, SingleThreadedExecutor, args))
