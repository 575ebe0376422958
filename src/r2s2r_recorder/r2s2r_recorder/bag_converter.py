"""One episode bag → one dataset episode: recorded streams synchronised onto the control rate.

ROS-free: messages are deserialised with the rosbags typestore (project messages registered
from ``.msg`` text), so conversion runs without a ROS installation.

At every control tick ``t`` (``1 / control_rate_hz`` apart, from the moment every required
sensor stream has produced a message to the moment the first of them ends; the wait before the
first command is kept, since when to move is part of the behaviour):

- observations are the latest sample at or before ``t`` (zero-order hold, what a policy
  running at ``t`` would have seen): both camera images (resized to the policy resolution,
  RGB), joint positions (ordered arm then hand), belt speed (the ``belt_speed`` node's), the
  tracked-object vector (``obs/object_track``: the policy node's
  :class:`~r2s2r_dataset.ObjectTrackLatch` over every ``/objects/tracks`` message up
  to ``t``), and the episode object's pose (for MimicGen; not a policy input);
- the action is the trajectory controller's reference at ``t``: what the JointTrajectory
  messages received up to ``t`` on each controller command for ``t``, interpolated between
  points as ``joint_trajectory_controller`` does
  (:func:`~r2s2r_dataset.reference.controller_reference`, the same rule as simulated
  data); before a controller's first command, the measured joint positions (it holds).

Commands with a zero header stamp ("start now" for joint_trajectory_controller) are placed
at their receive time, mapped into the header clock with the median receive-minus-header
offset of the joint states, so sim-time stamps and wall-clock receive times never mix.

A bag that is readable but not a usable episode raises
:class:`~r2s2r_recorder.conversion_summary.EpisodeSkippedError` with its reason; one that cannot
be read raises :class:`~r2s2r_recorder.bag_reading.BagReadError` (naming the file and offset) or
an error of the reader (:data:`~r2s2r_recorder.conversion_summary.READER_ERRORS`).
:func:`~r2s2r_recorder.bag_to_dataset.convert_bags` runs it over many bags into one file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from r2s2r_dataset.object_track import (
    TRACKER_SOURCE,
    ObjectTrackLatch,
    object_track_fields,
    track_view_from_msg,
)
from r2s2r_dataset.reference import TimedCommand, TrajectoryReferenceError, controller_reference
from rosbags.rosbag2.errors import ReaderError
from rosbags.serde import SerdeError
from rosbags.typesys.store import Typestore

from r2s2r_dataset import (
    HAND_CAMERA_KEY,
    HEAD_CAMERA_KEY,
    OBJECT_TRACK_KEY,
    Episode,
    EpisodeMetadata,
)

from .bag_format import EpisodeInfo
from .bag_reading import BagReadError, describe_read_failure, open_reader, read_episode_info
from .bag_repair import is_repaired, outcome_before_repair
from .config import ConversionConfig
from .conversion_summary import EpisodeSkippedError
from .msg_types import deserialize, make_typestore

_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}


def _stamp_ns(msg: Any) -> int:
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def decode_image(msg: Any, topic: str) -> np.ndarray:
    """Decode a sensor_msgs/Image into an RGB uint8 ``(H, W, 3)`` array.

    Raises:
        EpisodeSkippedError: ``image_encoding`` for unsupported encodings or bad sizes.

    """
    encoding = str(msg.encoding)
    if encoding not in _CHANNELS:
        raise EpisodeSkippedError(
            "image_encoding", f"{topic}: encoding {encoding!r} not in {sorted(_CHANNELS)}"
        )
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    channels = _CHANNELS[encoding]
    data = np.asarray(msg.data, dtype=np.uint8)
    if step < width * channels or data.size < height * step:
        raise EpisodeSkippedError(
            "image_encoding",
            f"{topic}: {data.size} bytes for {width}x{height} {encoding} with step {step}",
        )
    image = data[: height * step].reshape(height, step)[:, : width * channels]
    image = image.reshape(height, width, channels)
    if encoding == "rgb8":
        return image
    if encoding == "bgr8":
        return image[:, :, ::-1]
    if encoding == "rgba8":
        return image[:, :, :3]
    if encoding == "bgra8":
        return image[:, :, 2::-1]
    return np.repeat(image, 3, axis=2)


@dataclass
class _Stream:
    stamps_ns: list[int] = field(default_factory=list)
    receive_ns: list[int] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)


@dataclass
class _Command:
    stamp_ns: int
    names: list[str]
    points: list[tuple[int, np.ndarray]]
    velocities: np.ndarray | None = None


def _check_finite(episode: Episode) -> None:
    """Skip an episode holding NaN or Inf (a policy cannot be trained on it)."""
    arrays = {
        "obs/joint_pos_rad": episode.joint_pos_rad,
        "obs/belt_speed_mps": episode.belt_speed_mps,
        "actions": episode.actions,
        **{f"obs/{key}": values for key, values in episode.extra_obs.items()},
    }
    for name, values in arrays.items():
        bad = ~np.isfinite(np.asarray(values, dtype=np.float64))
        if bad.any():
            frame = int(np.argwhere(bad)[0][0])
            raise EpisodeSkippedError(
                "non_finite", f"{name}: {int(bad.sum())} NaN/Inf values, the first at frame {frame}"
            )


def _check_monotonic(topic: str, stamps: Sequence[int]) -> None:
    array = np.asarray(stamps, dtype=np.int64)
    if array.size > 1:
        back = np.nonzero(np.diff(array) < 0)[0]
        if back.size:
            i = int(back[0]) + 1
            raise EpisodeSkippedError(
                "non_monotonic",
                f"{topic}: header stamp of message {i} ({array[i]} ns) is before message "
                f"{i - 1} ({array[i - 1]} ns)",
            )


class BagConverter:
    """Converts episode bags into dataset episodes.

    Args:
        config: Conversion settings.
        typestore: Typestore; :func:`make_typestore` when None.

    """

    def __init__(self, config: ConversionConfig, typestore: Typestore | None = None) -> None:
        self.config = config
        self.typestore = typestore or make_typestore()

    def _read(self, bag_dir: Path) -> tuple[dict[str, _Stream], Any]:
        cfg = self.config
        required = [
            cfg.head_camera_topic,
            cfg.hand_camera_topic,
            cfg.joint_states_topic,
            cfg.arm_command_topic,
            cfg.hand_command_topic,
            cfg.belt_speed_topic,
        ]
        wanted = {*required, cfg.object_tracks_topic, cfg.outcome_topic}
        reader = open_reader(bag_dir)
        try:
            present = {c.topic for c in reader.connections}
            missing = [t for t in required if t not in present]
            if missing:
                raise EpisodeSkippedError("missing_topic", f"topics not in bag: {missing}")
            connections = [c for c in reader.connections if c.topic in wanted]
            streams: dict[str, _Stream] = {t: _Stream() for t in wanted}
            encodings: dict[str, str] = {}
            size = (cfg.image_width_px, cfg.image_height_px)
            for connection, receive_ns, raw in reader.messages(connections=connections):
                try:
                    msg = deserialize(self.typestore, raw, connection.msgtype)
                except (ValueError, SerdeError) as error:
                    raise BagReadError(
                        f"{bag_dir}: {connection.topic} message at {receive_ns} ns: {error}"
                    ) from None
                topic = connection.topic
                stream = streams[topic]
                stream.receive_ns.append(int(receive_ns))
                if hasattr(msg, "header"):
                    stream.stamps_ns.append(_stamp_ns(msg))
                else:
                    stream.stamps_ns.append(int(receive_ns))
                if topic in (cfg.head_camera_topic, cfg.hand_camera_topic):
                    first = encodings.setdefault(topic, str(msg.encoding))
                    if str(msg.encoding) != first:
                        raise EpisodeSkippedError(
                            "image_encoding",
                            f"{topic}: message {len(stream.values)} has encoding "
                            f"{msg.encoding!r}, earlier ones {first!r}",
                        )
                    rgb = decode_image(msg, topic)
                    if rgb.shape[1::-1] != size:
                        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
                    stream.values.append(np.ascontiguousarray(rgb))
                else:
                    stream.values.append(msg)
        except ReaderError as error:
            raise BagReadError(describe_read_failure(bag_dir, error)) from None
        finally:
            reader.close()
        return streams, present

    def _outcome(self, info: EpisodeInfo | None, outcome_stream: _Stream) -> str:
        if info is not None and info.outcome != "unknown":
            return info.outcome
        if outcome_stream.values:
            last = outcome_stream.values[-1]
            value = getattr(last, "data", None)
            if isinstance(value, bool):
                return "success" if value else "failure"
            text = str(value if value is not None else getattr(last, "outcome", "")).lower()
            if text in ("success", "failure"):
                return text
        return "unknown"

    def _commands(self, stream: _Stream, clock_offset_ns: int) -> list[_Command]:
        commands = []
        for msg, stamp, receive in zip(
            stream.values, stream.stamps_ns, stream.receive_ns, strict=True
        ):
            start = stamp if stamp != 0 else receive - clock_offset_ns
            points = [
                (
                    int(p.time_from_start.sec) * 1_000_000_000 + int(p.time_from_start.nanosec),
                    np.asarray(p.positions, dtype=np.float64),
                )
                for p in msg.points
            ]
            velocities = None
            width = len(msg.joint_names)
            if msg.points and all(len(p.velocities) == width for p in msg.points):
                velocities = np.asarray([p.velocities for p in msg.points], dtype=np.float64)
            if points:
                commands.append(_Command(start, list(msg.joint_names), points, velocities))
        commands.sort(key=lambda c: c.stamp_ns)
        return commands

    def convert_bag(self, bag_dir: str | Path) -> Episode:
        """Convert one episode bag.

        Raises:
            EpisodeSkippedError: The bag is readable but not a usable episode (reason attached).
            BagReadError: The bag cannot be read (names the file and offset).

        """
        cfg = self.config
        root = Path(bag_dir)
        streams, _present = self._read(root)
        info = read_episode_info(root)
        repaired = is_repaired(root, info)
        # A repaired bag's metadata may predate the loss of its outcome message: only the
        # message that survived counts.
        outcome = self._outcome(None if repaired else info, streams[cfg.outcome_topic])
        if outcome == "unknown" and cfg.require_outcome:
            if repaired:
                before = outcome_before_repair(root, info)
                claimed = f" (its metadata said {before!r})" if before else ""
                raise EpisodeSkippedError(
                    "lost_outcome",
                    f"repaired bag without its {cfg.outcome_topic} message{claimed}: outcome "
                    "unknown, not used as a demonstration",
                )
            raise EpisodeSkippedError(
                "no_outcome", "episode metadata says 'unknown' and no outcome message recorded"
            )
        if cfg.time_source == "receive":
            for stream in streams.values():
                stream.stamps_ns = list(stream.receive_ns)
        sensors = [
            cfg.head_camera_topic,
            cfg.hand_camera_topic,
            cfg.joint_states_topic,
            cfg.belt_speed_topic,
        ]
        for topic in sensors:
            if not streams[topic].values:
                raise EpisodeSkippedError("missing_topic", f"{topic}: no messages in bag")
            _check_monotonic(topic, streams[topic].stamps_ns)
        joints = streams[cfg.joint_states_topic]
        offset_ns = int(
            np.median(np.asarray(joints.receive_ns, np.int64) - np.asarray(joints.stamps_ns))
        )
        arm = self._commands(streams[cfg.arm_command_topic], offset_ns)
        hand = self._commands(streams[cfg.hand_command_topic], offset_ns)
        if not arm or not hand:
            which = cfg.arm_command_topic if not arm else cfg.hand_command_topic
            raise EpisodeSkippedError("missing_topic", f"{which}: no command with points in bag")
        arm_names = list(cfg.arm_joint_names) or arm[0].names
        hand_names = list(cfg.hand_joint_names) or hand[0].names
        names = arm_names + hand_names

        # The episode starts with the sensors, not with the first command: the wait while the
        # object approaches is part of the behaviour (the policy must learn when to move).
        # Before a controller's first command its target is the measured position (it holds).
        start = max(streams[t].stamps_ns[0] for t in sensors)
        end = min(streams[t].stamps_ns[-1] for t in sensors)
        period_ns = 1e9 / cfg.control_rate_hz
        count = int(np.floor((end - start) / period_ns)) + 1 if end >= start else 0
        if count < 2:
            raise EpisodeSkippedError(
                "too_short", f"{count} control ticks between {start} and {end} ns"
            )
        ticks = start + np.round(np.arange(count) * period_ns).astype(np.int64)

        def latest(topic: str) -> np.ndarray:
            stamps = np.asarray(streams[topic].stamps_ns, dtype=np.int64)
            index = np.searchsorted(stamps, ticks, side="right") - 1
            age_s = (ticks - stamps[index]) * 1e-9
            worst = int(np.argmax(age_s))
            if age_s[worst] > cfg.max_staleness_s:
                raise EpisodeSkippedError(
                    "stale_stream",
                    f"{topic}: latest sample is {age_s[worst]:.3f} s old at frame {worst} "
                    f"(limit {cfg.max_staleness_s} s)",
                )
            return index

        images = {
            HEAD_CAMERA_KEY: np.stack(
                [streams[cfg.head_camera_topic].values[i] for i in latest(cfg.head_camera_topic)]
            ),
            HAND_CAMERA_KEY: np.stack(
                [streams[cfg.hand_camera_topic].values[i] for i in latest(cfg.hand_camera_topic)]
            ),
        }
        joint_pos = np.zeros((count, len(names)), dtype=np.float32)
        for row, i in enumerate(latest(cfg.joint_states_topic)):
            msg = joints.values[i]
            lookup = dict(zip(msg.name, msg.position, strict=False))
            missing = [n for n in names if n not in lookup]
            if missing:
                raise EpisodeSkippedError(
                    "joint_mismatch",
                    f"{cfg.joint_states_topic}: message {i} lacks joints {missing}",
                )
            joint_pos[row] = [lookup[n] for n in names]
        belt = np.asarray(
            [
                float(streams[cfg.belt_speed_topic].values[i].twist.linear.x)
                for i in latest(cfg.belt_speed_topic)
            ],
            dtype=np.float32,
        )
        actions = np.concatenate(
            [
                self._targets(
                    arm, arm_names, ticks, cfg.arm_command_topic, joint_pos[:, : len(arm_names)]
                ),
                self._targets(
                    hand, hand_names, ticks, cfg.hand_command_topic, joint_pos[:, len(arm_names) :]
                ),
            ],
            axis=1,
        )
        object_pose, object_valid = self._object_poses(
            streams[cfg.object_tracks_topic], ticks, info
        )
        extra_obs: dict[str, np.ndarray] = {}
        track_fields: list[str] = []
        if streams[cfg.object_tracks_topic].values:
            extra_obs[OBJECT_TRACK_KEY] = self._object_track(
                streams[cfg.object_tracks_topic], ticks
            )
            track_fields = object_track_fields(cfg.object_track_types)
        episode_info = info or EpisodeInfo(episode_id=root.name)
        metadata = EpisodeMetadata(
            source=cfg.source,
            world_config_id=cfg.world_config_id,
            behavior_source=episode_info.behavior_source,
            task=episode_info.task,
            object_type=episode_info.object_type,
            belt_speed_mps=episode_info.belt_speed_mps,
            outcome=outcome,  # type: ignore[arg-type]
            joint_names=names,
            action_names=names,
            control_rate_hz=cfg.control_rate_hz,
            provenance={
                "bag_path": str(root.resolve()),
                "episode_id": episode_info.episode_id,
                "start_time_ns": int(ticks[0]),
                "end_time_ns": int(ticks[-1]),
                "time_source": cfg.time_source,
                "operator_notes": episode_info.operator_notes,
            },
            belt_speed_source="belt_speed",
            object_track_source=TRACKER_SOURCE if track_fields else "",
            object_track_fields=track_fields,
        )
        episode = Episode(
            metadata=metadata,
            timestamps_s=(ticks - ticks[0]).astype(np.float64) * 1e-9,
            images=images,
            joint_pos_rad=joint_pos,
            belt_speed_mps=belt,
            actions=actions.astype(np.float32),
            object_pose=object_pose,
            object_pose_valid=object_valid,
            extra_obs=extra_obs,
        )
        episode.validate()
        _check_finite(episode)
        return episode

    def _object_track(self, stream: _Stream, ticks: np.ndarray) -> np.ndarray:
        """Make the tracked-object vector of each tick: the latch over every message up to it.

        The same :class:`ObjectTrackLatch` the policy node runs, fed in stamp order with each
        message (header stamp, or receive time with ``time_source: receive``); the vector of a
        tick is taken after every message stamped at or before it.
        """
        latch = ObjectTrackLatch(self.config.object_track_types)
        order = np.argsort(np.asarray(stream.stamps_ns, dtype=np.int64), kind="stable")
        stamps = np.asarray(stream.stamps_ns, dtype=np.int64)[order]
        out = np.zeros((ticks.size, latch.width), dtype=np.float32)
        position = 0
        for row, tick in enumerate(ticks):
            while position < len(order) and stamps[position] <= tick:
                msg = stream.values[int(order[position])]
                latch.update(stamps[position] * 1e-9, [track_view_from_msg(t) for t in msg.tracks])
                position += 1
            out[row] = latch.features(tick * 1e-9)
        return out

    @staticmethod
    def _targets(
        commands: list[_Command],
        names: list[str],
        ticks: np.ndarray,
        topic: str,
        measured: np.ndarray,
    ) -> np.ndarray:
        """Return the controller's reference at each tick (see module docstring).

        Before the first command the target is ``measured`` (the controller holds position);
        from it on, the reference the commands define
        (:func:`~r2s2r_dataset.reference.controller_reference`), starting from the
        position measured when the first command arrived.
        """
        out = np.array(measured, dtype=np.float64, copy=True)
        first = int(np.searchsorted(ticks, commands[0].stamp_ns, side="left"))
        if first >= ticks.size:
            return out
        timed = []
        for command in commands:
            missing = [n for n in names if n not in command.names]
            if missing:
                raise EpisodeSkippedError(
                    "joint_mismatch", f"{topic}: command lacks joints {missing}"
                )
            order = [command.names.index(n) for n in names]
            timed.append(
                TimedCommand(
                    start_s=command.stamp_ns * 1e-9,
                    joint_names=tuple(names),
                    times_s=np.array([offset * 1e-9 for offset, _ in command.points]),
                    positions=np.stack([p[order] for _, p in command.points]),
                    velocities=None if command.velocities is None else command.velocities[:, order],
                )
            )
        initial = measured[max(first - 1, 0)]
        try:
            out[first:] = controller_reference(timed, names, ticks[first:] * 1e-9, initial)
        except TrajectoryReferenceError as error:
            raise EpisodeSkippedError("bad_command", f"{topic}: {error}") from None
        return out

    def _object_poses(
        self, stream: _Stream, ticks: np.ndarray, info: EpisodeInfo | None
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Pose of the episode's object at each tick, from the latest track message."""
        if not stream.values:
            return None, None
        counts: Counter[int] = Counter()
        typed: Counter[int] = Counter()
        for msg in stream.values:
            for track in msg.tracks:
                counts[int(track.id)] += 1
                if info is not None and str(track.object_type) == info.object_type:
                    typed[int(track.id)] += 1
        chosen = typed or counts
        if not chosen:
            return None, None
        track_id = chosen.most_common(1)[0][0]
        stamps = np.asarray(stream.stamps_ns, dtype=np.int64)
        poses = np.zeros((ticks.size, 7), dtype=np.float32)
        valid = np.zeros(ticks.size, dtype=np.bool_)
        for row, tick in enumerate(ticks):
            index = int(np.searchsorted(stamps, tick, side="right")) - 1
            if index < 0 or (tick - stamps[index]) * 1e-9 > self.config.max_staleness_s:
                continue
            for track in stream.values[index].tracks:
                if int(track.id) == track_id:
                    p, q = track.pose.position, track.pose.orientation
                    poses[row] = [p.x, p.y, p.z, q.x, q.y, q.z, q.w]
                    valid[row] = True
                    break
        return poses, valid
