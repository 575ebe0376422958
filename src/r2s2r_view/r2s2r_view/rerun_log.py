"""The cell's messages as Rerun log calls: the one place that decides what the view shows.

:class:`CellLogger` takes the cell's messages, as rclpy delivers them or as the rosbags reader
decodes them from a bag (the same field names), and logs them to a Rerun recording:

==========================================  ====================================================
message                                     drawn as
==========================================  ====================================================
``/robot_description`` (URDF text)          every link's primitives (box, cylinder, sphere)
                                            attached to the link's frame (``cell/robot/<link>``)
``/tf``, ``/tf_static``                     named-frame transforms parent -> child
                                            (``cell/tf/<child>``): they pose the robot, as
                                            rviz's RobotModel is posed by TF
``/joint_states``                           one line per arm joint (``plots/joints/<joint>``, rad)
``/<camera>/image_raw``                     an image (``cameras/head``, ``cameras/hand``)
``/objects/tracks``                         a 5 cm box per track in the header's frame,
                                            labelled with type and id (``cell/objects``)
``/belt/speed``                             ``plots/belt_speed_mps``
``/<controller>/joint_trajectory``          the arm chunk's palm path, by forward kinematics of
                                            the URDF, in ``base_link`` (``cell/chunk/arm``); its
                                            joints' targets (``plots/chunk/<joint>``, rad)
``/diagnostics``                            ``<node>: real-likeness``: ``plots/real_likeness``
                                            and ``plots/real_likeness_mean``; any status that
                                            turns WARN/ERROR (or back): a line in
                                            ``status/diagnostics``
==========================================  ====================================================

Each message is logged at its header stamp on the ``ros_time`` timeline (a bag replays at the
stamps it recorded). ROS-free: no rclpy, no message types; tested directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import rerun as rr
import rerun.blueprint as rrb
from r2s2r_common.image_conversion import ImageConversionError, image_fields_to_array
from r2s2r_common.topics import HAND_CAMERA, HEAD_CAMERA
from r2s2r_description.frames import BASE_LINK, PALM_LINK, WORLD_FRAME
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_description.transforms import (
    FloatArray,
    axis_angle_matrix,
    make_transform,
    matrix_to_quat,
)
from r2s2r_description.urdf import UrdfJoint, parse_urdf_joints, parse_urdf_visuals

TIMELINE = "ros_time"
"""The timeline every message is logged on, at its header stamp."""

FIXED_FRAME = WORLD_FRAME
"""The 3D view's frame (rviz's Fixed Frame in config/r2s2r.rviz)."""

CAMERA_ENTITIES: dict[str, str] = {HEAD_CAMERA: "cameras/head", HAND_CAMERA: "cameras/hand"}
"""Camera name -> entity of its image."""
ROBOT_ENTITY = "cell/robot"
TF_ENTITY = "cell/tf"
OBJECTS_ENTITY = "cell/objects"
CHUNK_ENTITY = "cell/chunk"
BELT_SPEED_ENTITY = "plots/belt_speed_mps"
JOINTS_ENTITY = "plots/joints"
CHUNK_TARGETS_ENTITY = "plots/chunk"
REAL_LIKENESS_ENTITY = "plots/real_likeness"
REAL_LIKENESS_MEAN_ENTITY = "plots/real_likeness_mean"
STATUS_ENTITY = "status"

REAL_LIKENESS_STATUS_SUFFIX = ": real-likeness"
"""Name suffix of the policy node's real-likeness status (``policy_inference: real-likeness``)."""

OBJECT_MARKER_SIZE_M = 0.05
"""Edge of the box drawn at a track (a marker: tracks carry no size)."""
OBJECT_COLORS: dict[str, tuple[int, int, int]] = {
    "cube": (230, 40, 40),
    "cylinder": (40, 90, 230),
    "prism": (240, 200, 30),
    "sphere": (160, 60, 200),
}
"""Colour of a track's box by object type (others: white)."""
CHUNK_COLOR = (30, 220, 90)
"""Colour of the chunk's palm path."""

DIAGNOSTIC_LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}
"""diagnostic_msgs/DiagnosticStatus level -> name (also Rerun's TextLog levels)."""

# The 3D view's starting eye: rviz's orbit (config/r2s2r.rviz) brought closer to the arm.
EYE_TARGET_M = (0.25, 0.0, 0.75)
EYE_POSITION_M = (1.75, 1.15, 1.55)


def stamp_ns(header: Any) -> int:
    """Return a ``std_msgs/Header``'s stamp in nanoseconds."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def diagnostic_level(level: Any) -> int:
    """Return a DiagnosticStatus level as an int (rclpy gives ``byte`` fields as bytes)."""
    if isinstance(level, bytes | bytearray):
        return int(level[0]) if level else 0
    return int(level)


def _rgba(rgba: Sequence[float]) -> tuple[int, int, int, int]:
    r, g, b, a = (round(255 * min(max(float(c), 0.0), 1.0)) for c in rgba)
    return r, g, b, a


def _xyzw(rotation: FloatArray) -> list[float]:
    w, x, y, z = (float(v) for v in matrix_to_quat(rotation))
    return [x, y, z, w]


def blueprint() -> rrb.Blueprint:
    """Return the view's layout: the cell in 3D beside both cameras, plots and status lines."""
    return rrb.Blueprint(
        rrb.Horizontal(
            rrb.Spatial3DView(
                origin="/cell",
                name="cell",
                spatial_information=rrb.archetypes.SpatialInformation(target_frame=FIXED_FRAME),
                eye_controls=rrb.EyeControls3D(
                    position=EYE_POSITION_M, look_target=EYE_TARGET_M, eye_up=(0.0, 0.0, 1.0)
                ),
            ),
            rrb.Vertical(
                rrb.Spatial2DView(origin=f"/{CAMERA_ENTITIES[HEAD_CAMERA]}", name="head camera"),
                rrb.Spatial2DView(origin=f"/{CAMERA_ENTITIES[HAND_CAMERA]}", name="hand camera"),
                rrb.TimeSeriesView(origin="/plots", name="belt, joints, policy"),
                rrb.TextLogView(origin=f"/{STATUS_ENTITY}", name="status"),
                row_shares=[3, 3, 2, 1],
            ),
            column_shares=[3, 2],
        ),
        # Following: the newest data is shown (live: now; a replay: its end).
        rrb.TimePanel(timeline=TIMELINE, play_state="following", state="collapsed"),
        collapse_panels=True,
    )


@dataclass(frozen=True)
class _PalmChain:
    """The URDF joints from ``base_link`` to ``palm_link``, base first."""

    joints: tuple[UrdfJoint, ...]

    @staticmethod
    def of(joints: Sequence[UrdfJoint]) -> _PalmChain | None:
        by_child = {joint.child: joint for joint in joints}
        chain: list[UrdfJoint] = []
        link = PALM_LINK
        while link != BASE_LINK:
            joint = by_child.get(link)
            if joint is None:
                return None
            chain.append(joint)
            link = joint.parent
        return _PalmChain(tuple(reversed(chain)))

    def palm_in_base(self, positions: Mapping[str, float]) -> FloatArray:
        """Palm position (m) in ``base_link`` for the given joint positions (rad)."""
        pose: FloatArray = np.eye(4)
        for joint in self.joints:
            pose = pose @ joint.origin
            if joint.joint_type in ("revolute", "continuous"):
                angle = float(positions.get(joint.name, 0.0))
                pose = pose @ make_transform((0, 0, 0), axis_angle_matrix(joint.axis, angle))
        return np.asarray(pose[:3, 3], dtype=float)


class CellLogger:
    """Turns the cell's messages into Rerun log calls on one recording (see the module doc).

    Not thread-safe: call it from one thread (the node's executor, the bag replay).

    Args:
        recording: The Rerun recording to log to.

    """

    def __init__(self, recording: rr.RecordingStream) -> None:
        self.recording = recording
        self.counts: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self._chain: _PalmChain | None = None
        self._joint_positions: dict[str, float] = {}
        self._status_levels: dict[str, int] = {}

    def _at(self, time_ns: int) -> None:
        self.recording.set_time(TIMELINE, timestamp=np.datetime64(int(time_ns), "ns"))

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _drop(self, what: str) -> None:
        self.dropped[what] = self.dropped.get(what, 0) + 1

    def send_layout(self) -> None:
        """Send the view's layout (:func:`blueprint`)."""
        self.recording.send_blueprint(blueprint())

    def log_robot(self, urdf_text: str) -> None:
        """Draw every link of the URDF in its own frame (static: TF moves the frames).

        Raises:
            r2s2r_description.urdf.UrdfError: The text is not a URDF.

        """
        self._chain = _PalmChain.of(parse_urdf_joints(urdf_text))
        by_link: dict[tuple[str, str], list[Any]] = {}
        for visual in parse_urdf_visuals(urdf_text):
            by_link.setdefault((visual.link, visual.kind), []).append(visual)
        for (link, kind), visuals in by_link.items():
            entity = f"{ROBOT_ENTITY}/{link}/{kind}"
            centers = [v.origin[:3, 3].tolist() for v in visuals]
            quaternions = [_xyzw(v.origin[:3, :3]) for v in visuals]
            colors = [_rgba(v.rgba) for v in visuals]
            shapes: Any
            if kind == "box":
                shapes = rr.Boxes3D(
                    centers=centers,
                    half_sizes=[[0.5 * s for s in v.size_m] for v in visuals],
                    quaternions=quaternions,
                    colors=colors,
                    fill_mode="solid",
                )
            elif kind == "cylinder":
                shapes = rr.Cylinders3D(
                    centers=centers,
                    radii=[v.size_m[0] for v in visuals],
                    lengths=[v.size_m[1] for v in visuals],
                    quaternions=quaternions,
                    colors=colors,
                    fill_mode="solid",
                )
            else:
                shapes = rr.Ellipsoids3D(
                    centers=centers,
                    radii=[v.size_m[0] for v in visuals],
                    quaternions=quaternions,
                    colors=colors,
                    fill_mode="solid",
                )
            self.recording.log(entity, rr.CoordinateFrame(link), shapes, static=True)
        self._count("robot_description")

    def log_transforms(self, msg: Any, *, static: bool) -> None:
        """Log a ``tf2_msgs/TFMessage``: one named-frame transform per child frame."""
        for transform in msg.transforms:
            child = str(transform.child_frame_id).lstrip("/")
            parent = str(transform.header.frame_id).lstrip("/")
            t, q = transform.transform.translation, transform.transform.rotation
            archetype = rr.Transform3D(
                translation=[float(t.x), float(t.y), float(t.z)],
                quaternion=rr.Quaternion(xyzw=[float(q.x), float(q.y), float(q.z), float(q.w)]),
                parent_frame=parent,
                child_frame=child,
            )
            if static:
                self.recording.log(f"{TF_ENTITY}/{child}", archetype, static=True)
            else:
                self._at(stamp_ns(transform.header))
                self.recording.log(f"{TF_ENTITY}/{child}", archetype)
        self._count("tf_static" if static else "tf")

    def log_joint_state(self, msg: Any) -> None:
        """Log a ``sensor_msgs/JointState``'s arm joint positions (rad)."""
        names, positions = list(msg.name), list(msg.position)
        if len(names) != len(positions):
            self._drop("joint_states")
            return
        self._joint_positions.update(
            (str(name), float(value)) for name, value in zip(names, positions, strict=True)
        )
        self._at(stamp_ns(msg.header))
        for name, value in zip(names, positions, strict=True):
            if name in ARM_JOINT_NAMES:
                self.recording.log(f"{JOINTS_ENTITY}/{name}", rr.Scalars(float(value)))
        self._count("joint_states")

    def log_image(self, camera: str, msg: Any) -> bool:
        """Log a ``sensor_msgs/Image`` of ``camera``; False (counted) when it cannot be decoded."""
        entity = CAMERA_ENTITIES.get(camera, f"cameras/{camera}")
        encoding = str(msg.encoding)
        try:
            pixels = image_fields_to_array(
                int(msg.height),
                int(msg.width),
                encoding,
                int(msg.is_bigendian),
                int(msg.step),
                msg.data,
            )
        except ImageConversionError:
            self._drop(camera)
            return False
        color_model: Literal["RGB", "BGR", "L"] = (
            "RGB" if encoding == "rgb8" else "BGR" if encoding == "bgr8" else "L"
        )
        if pixels.dtype != np.uint8:  # depth: scaled to 8 bits for display
            peak = float(np.nanmax(pixels)) if pixels.size else 0.0
            pixels = np.nan_to_num(pixels / peak * 255 if peak > 0 else pixels).astype(np.uint8)
        self._at(stamp_ns(msg.header))
        self.recording.log(entity, rr.Image(pixels, color_model=color_model))
        self._count(camera)
        return True

    def log_tracks(self, msg: Any) -> None:
        """Log an ``r2s2r_interfaces/ObjectTrackArray`` as boxes in its header's frame."""
        centers, quaternions, colors, labels = [], [], [], []
        for track in msg.tracks:
            p, q = track.pose.position, track.pose.orientation
            centers.append([float(p.x), float(p.y), float(p.z)])
            quaternions.append([float(q.x), float(q.y), float(q.z), float(q.w)])
            colors.append(OBJECT_COLORS.get(str(track.object_type), (255, 255, 255)))
            labels.append(f"{track.object_type} #{int(track.id)}")
        half = 0.5 * OBJECT_MARKER_SIZE_M
        self._at(stamp_ns(msg.header))
        self.recording.log(
            OBJECTS_ENTITY,
            rr.CoordinateFrame(str(msg.header.frame_id).lstrip("/") or BASE_LINK),
            rr.Boxes3D(
                centers=centers,
                half_sizes=[[half, half, half]] * len(centers),
                quaternions=quaternions,
                colors=colors,
                labels=labels,
                fill_mode="solid",
            ),
        )
        self._count("tracks")

    def log_belt_speed(self, msg: Any) -> None:
        """Log a ``geometry_msgs/TwistStamped`` belt speed (m/s, along the belt)."""
        self._at(stamp_ns(msg.header))
        self.recording.log(BELT_SPEED_ENTITY, rr.Scalars(float(msg.twist.linear.x)))
        self._count("belt_speed")

    def log_trajectory(self, controller: str, msg: Any, receive_ns: int) -> None:
        """Log a ``trajectory_msgs/JointTrajectory`` sent to ``controller`` (``arm``/``hand``).

        Its points' targets go to ``plots/chunk/<joint>`` at their scheduled times; the arm's
        palm path (forward kinematics of the URDF, hand joints as last measured) is drawn in
        ``base_link``. A zero header stamp means "start now": the receive time is used.
        """
        names = [str(name) for name in msg.joint_names]
        start_ns = stamp_ns(msg.header) or int(receive_ns)
        points = list(msg.points)
        if not points or any(len(p.positions) != len(names) for p in points):
            self._drop(controller)
            return
        palm: list[list[float]] = []
        for point in points:
            at_ns = start_ns + int(point.time_from_start.sec) * 1_000_000_000
            at_ns += int(point.time_from_start.nanosec)
            self._at(at_ns)
            for name, value in zip(names, point.positions, strict=True):
                self.recording.log(f"{CHUNK_TARGETS_ENTITY}/{name}", rr.Scalars(float(value)))
            if self._chain is not None:
                positions = dict(self._joint_positions)
                positions.update(zip(names, (float(v) for v in point.positions), strict=True))
                palm.append(self._chain.palm_in_base(positions).tolist())
        if palm:
            self._at(start_ns)
            self.recording.log(
                f"{CHUNK_ENTITY}/{controller}",
                rr.CoordinateFrame(BASE_LINK),
                rr.LineStrips3D([palm], colors=[CHUNK_COLOR], radii=[0.006]),
                rr.Points3D(palm, colors=[CHUNK_COLOR], radii=[0.01]),
            )
        self._count(f"chunk_{controller}")

    def log_diagnostics(self, msg: Any) -> None:
        """Log a ``diagnostic_msgs/DiagnosticArray``: real-likeness, and level changes."""
        time_ns = stamp_ns(msg.header)
        for status in msg.status:
            name, level = str(status.name), diagnostic_level(status.level)
            values = {str(kv.key): str(kv.value) for kv in status.values}
            self._at(time_ns)
            if name.endswith(REAL_LIKENESS_STATUS_SUFFIX):
                for key, entity in (
                    ("real_likeness", REAL_LIKENESS_ENTITY),
                    ("real_likeness_mean", REAL_LIKENESS_MEAN_ENTITY),
                ):
                    try:
                        value = float(values[key])
                    except (KeyError, ValueError):
                        self._drop("diagnostics")
                        continue
                    self.recording.log(entity, rr.Scalars(value))
                self._count("real_likeness")
            previous = self._status_levels.get(name, 0)
            if level != previous:
                self.recording.log(
                    f"{STATUS_ENTITY}/diagnostics",
                    rr.TextLog(
                        f"{name}: {DIAGNOSTIC_LEVELS.get(level, level)}: {status.message}",
                        level=DIAGNOSTIC_LEVELS.get(level, "INFO") if level else "INFO",
                    ),
                )
            self._status_levels[name] = level
        self._count("diagnostics")

    def note(self, text: str, level: str = "INFO") -> None:
        """Log one line on the view's status panel (static: shown at every time)."""
        self.recording.log(f"{STATUS_ENTITY}/notes", rr.TextLog(text, level=level), static=True)
