"""One rosbag2 (MCAP) bag per episode, written with the pure-Python ``rosbags`` library.

ROS-free: takes serialized CDR bytes as they come from an rclpy ``raw=True`` subscription.

Episode bag directory ``<root>/episode_<NNNNNN>/``::

    episode_<NNNNNN>.mcap   MCAP storage (rosbag2 format version 9)
    metadata.yaml           rosbag2 metadata, written on clean close; episode metadata in
                            ``custom_data`` (key ``r2s2r.episode``, JSON)
    episode.yaml            sidecar: episode metadata, topics (type, QoS, type hash), cadence
                            report; written atomically at start and again at close
    INCOMPLETE              marker present while recording; removed on clean close

Crash safety: every episode has its own directory, finalised on stop, so a crash only ever
touches the current one. While recording, the pending MCAP chunk is closed and flushed to the
OS every ``flush_period_s``, so after SIGKILL the current bag is readable up to its last
flushed chunk through :func:`inspect_bag` / :func:`repair_bag`, and the ``INCOMPLETE`` marker
says it was not closed. Disk full (ENOSPC) raises :class:`DiskFullError`; earlier episodes
are never reopened.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_common.errors import BadInputError
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.rosbag2.errors import ReaderError, WriterError
from rosbags.typesys.store import Typestore

from .mcap_scan import McapScan, iter_mcap
from .msg_types import (
    deserialize,
    ensure_type,
    has_header_first,
    header_stamp_ns,
    make_typestore,
)

INCOMPLETE_MARKER = "INCOMPLETE"
SIDECAR_NAME = "episode.yaml"
CUSTOM_DATA_KEY = "r2s2r.episode"

QosProfileName = Literal[
    "sensor_data", "default", "reliable", "best_effort", "reliable_transient_local"
]
QOS_PROFILE_NAMES: tuple[str, ...] = (
    "sensor_data",
    "default",
    "reliable",
    "best_effort",
    "reliable_transient_local",
)


class BagWriteError(RuntimeError):
    """Writing an episode bag failed; the message names the bag directory."""


class DiskFullError(BagWriteError):
    """The disk is full (ENOSPC). Recording stopped; earlier episodes are untouched."""


class UnknownMessageTypeError(BagWriteError):
    """A topic's message type has no definition in the typestore or any ``.msg`` directory."""


class BagReadError(BadInputError, RuntimeError):
    """A bag cannot be read; the message names the file and, when known, the byte offset."""


def qos_for_profile(profile: str, depth: int | None = None) -> Qos:
    """Return the rosbags QoS record for a profile name (stored as ``offered_qos_profiles``).

    Args:
        profile: One of :data:`QOS_PROFILE_NAMES`.
        depth: History depth; the profile's default when None.

    Raises:
        ValueError: If the profile name is unknown.

    """
    # rosbag2's spelling of "infinite" for deadline, lifespan and lease duration.
    infinite = QosTime(9223372036, 854775807)
    table = {
        "sensor_data": (QosReliability.BEST_EFFORT, QosDurability.VOLATILE, 5),
        "default": (QosReliability.RELIABLE, QosDurability.VOLATILE, 10),
        "reliable": (QosReliability.RELIABLE, QosDurability.VOLATILE, 10),
        "best_effort": (QosReliability.BEST_EFFORT, QosDurability.VOLATILE, 10),
        "reliable_transient_local": (QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL, 1),
    }
    if profile not in table:
        raise ValueError(f"qos profile = {profile!r}: expected one of {QOS_PROFILE_NAMES}")
    reliability, durability, default_depth = table[profile]
    return Qos(
        history=QosHistory.KEEP_LAST,
        depth=default_depth if depth is None else depth,
        reliability=reliability,
        durability=durability,
        deadline=infinite,
        lifespan=infinite,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=infinite,
        avoid_ros_namespace_conventions=False,
    )


class EpisodeInfo(ConfigModel):
    """Episode metadata stored with every bag (task, object, belt speed, outcome, notes)."""

    episode_id: str = Field(description="Episode directory name, e.g. 'episode_000003'.")
    task: str = Field(default="pick_sort", description="Task name.")
    object_type: str = Field(default="unknown", description="Object type on the belt.")
    belt_speed_mps: float = Field(default=0.0, ge=-5.0, le=5.0, description="Belt speed (m/s).")
    outcome: Literal["success", "failure", "unknown"] = Field(
        default="unknown", description="Trial outcome; 'unknown' until judged."
    )
    operator_notes: str = Field(default="", description="Free text from the operator.")
    source: Literal["real", "sim"] = Field(default="real", description="Real cell or simulator.")
    world_config_id: str = Field(default="real", description="World configuration identifier.")
    behavior_source: Literal["demo", "mimicgen", "planner"] = Field(
        default="demo", description="What produced the motion."
    )


@dataclass
class TopicCadence:
    """Cadence of one topic over an episode.

    Attributes:
        topic: Topic name.
        count: Messages recorded.
        rate_hz: Mean rate over the topic's own time span.
        median_period_s: Median time between messages.
        worst_gap_s: Largest time between consecutive messages.
        estimated_drops: Messages missing judged from gaps over 1.5 median periods.
        stamp_source: ``header`` (header.stamp) or ``receive`` (arrival time at the recorder).

    """

    topic: str
    count: int
    rate_hz: float
    median_period_s: float
    worst_gap_s: float
    estimated_drops: int
    stamp_source: str


def cadence_from_stamps(topic: str, stamps_ns: list[int], stamp_source: str) -> TopicCadence:
    """Compute rate, drops and worst gap from message times (ns).

    Drops are estimated as ``round(gap / median_period) - 1`` for every gap longer than 1.5
    median periods, which assumes a nominally periodic stream.
    """
    count = len(stamps_ns)
    if count < 2:
        return TopicCadence(topic, count, 0.0, 0.0, 0.0, 0, stamp_source)
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    periods = np.diff(stamps).astype(np.float64) * 1e-9
    positive = periods[periods > 0]
    if positive.size == 0:
        return TopicCadence(topic, count, 0.0, 0.0, 0.0, 0, stamp_source)
    median = float(np.median(positive))
    span = float(stamps.max() - stamps.min()) * 1e-9
    long_gaps = positive[positive > 1.5 * median]
    drops = int(np.sum(np.maximum(np.round(long_gaps / median) - 1, 0)))
    return TopicCadence(
        topic=topic,
        count=count,
        rate_hz=(count - 1) / span if span > 0 else 0.0,
        median_period_s=median,
        worst_gap_s=float(positive.max()),
        estimated_drops=drops,
        stamp_source=stamp_source,
    )


@dataclass
class EpisodeReport:
    """Summary of one closed episode bag.

    Attributes:
        bag_dir: The episode's bag directory.
        info: Episode metadata as stored.
        duration_s: Time between first and last message (receive time).
        message_count: Messages written.
        cadence: Per-topic cadence.
        size_bytes: Size of the bag directory on disk.

    """

    bag_dir: Path
    info: EpisodeInfo
    duration_s: float
    message_count: int
    cadence: list[TopicCadence] = field(default_factory=list)
    size_bytes: int = 0

    def format(self) -> str:
        """Human-readable cadence table."""
        lines = [
            f"episode {self.info.episode_id}: {self.message_count} messages, "
            f"{self.duration_s:.2f} s, outcome {self.info.outcome}, {self.size_bytes / 1e6:.2f} MB",
            f"  {'topic':40s} {'count':>6s} {'rate_hz':>8s} {'drops':>6s} {'worst_gap_s':>11s}",
        ]
        for item in self.cadence:
            lines.append(
                f"  {item.topic:40s} {item.count:6d} {item.rate_hz:8.2f} "
                f"{item.estimated_drops:6d} {item.worst_gap_s:11.4f}"
            )
        return "\n".join(lines)


def _write_yaml_atomic(path: Path, data: Any) -> None:
    """Write YAML through a temporary file, fsync, and rename over ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as stream:
        yaml.safe_dump(data, stream, sort_keys=False)
        stream.flush()
        os.fsync(stream.fileno())
    tmp.replace(path)


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class _Topic:
    msgtype: str
    qos_profile: str
    connection: Any
    has_header: bool
    rihs01: str
    stamps_ns: list[int] = field(default_factory=list)


class EpisodeBagWriter:
    """Writes one episode into its own rosbag2 MCAP bag directory.

    Not thread-safe: one writer thread owns it (the recorder node queues messages to it).

    Args:
        bag_dir: Directory to create (must not exist).
        info: Episode metadata (outcome and notes may be updated at :meth:`close`).
        typestore: Typestore for message definitions; :func:`make_typestore` when None.
        flush_period_s: Close and flush the pending chunk at least this often (crash safety).

    Raises:
        BagWriteError: If the directory exists or cannot be created.
        DiskFullError: If the disk is full.

    """

    def __init__(
        self,
        bag_dir: str | Path,
        info: EpisodeInfo,
        typestore: Typestore | None = None,
        flush_period_s: float = 1.0,
    ) -> None:
        self.bag_dir = Path(bag_dir)
        self.info = info
        self._typestore = typestore or make_typestore()
        self._flush_period_s = flush_period_s
        self._topics: dict[str, _Topic] = {}
        self._last_flush = time.monotonic()
        self._first_ns: int | None = None
        self._last_ns: int | None = None
        self._count = 0
        self._closed = False
        self.bag_dir.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.bag_dir, version=9, storage_plugin=StoragePlugin.MCAP)
        try:
            self._writer.open()
            (self.bag_dir / INCOMPLETE_MARKER).write_text(
                "recording started; removed when the episode is closed cleanly\n"
            )
            self._write_sidecar("recording", None)
        except WriterError as error:
            raise BagWriteError(f"{self.bag_dir}: cannot create episode bag: {error}") from None
        except OSError as error:
            self._raise_os_error(error, "creating the episode bag")

    @property
    def topics(self) -> list[str]:
        """Topics with a connection in this bag."""
        return list(self._topics)

    @property
    def message_count(self) -> int:
        """Messages written so far."""
        return self._count

    def _raise_os_error(self, error: OSError, action: str) -> None:
        if error.errno == errno.ENOSPC:
            try:
                free = shutil.disk_usage(self.bag_dir.parent).free
            except OSError:
                free = -1
            self._abort_quietly()
            raise DiskFullError(
                f"{self.bag_dir}: disk full while {action} ({free} bytes free); recording "
                f"stopped, this episode is incomplete, earlier episodes are untouched"
            ) from None
        self._abort_quietly()
        raise BagWriteError(f"{self.bag_dir}: OS error while {action}: {error}") from None

    def _abort_quietly(self) -> None:
        self._closed = True
        # Already failing; the first error is the one to report.
        with suppress(Exception):
            self._writer.abort()

    def _write_sidecar(self, state: str, report: EpisodeReport | None) -> None:
        data: dict[str, Any] = {
            "state": state,
            "episode": self.info.model_dump(mode="json"),
            "topics": {
                name: {"type": t.msgtype, "qos_profile": t.qos_profile, "rihs01": t.rihs01}
                for name, t in self._topics.items()
            },
        }
        if report is not None:
            data["duration_s"] = report.duration_s
            data["message_count"] = report.message_count
            data["cadence"] = [vars(c) for c in report.cadence]
        _write_yaml_atomic(self.bag_dir / SIDECAR_NAME, data)

    def add_topic(self, topic: str, msgtype: str, qos_profile: str = "default") -> None:
        """Add a connection for ``topic``.

        Args:
            topic: Topic name.
            msgtype: ROS type name as seen on the graph (``pkg/msg/Name``).
            qos_profile: One of :data:`QOS_PROFILE_NAMES`; stored as ``offered_qos_profiles``.

        Raises:
            UnknownMessageTypeError: If no definition of ``msgtype`` can be found.
            BagWriteError: If the topic was already added with another type.

        """
        if topic in self._topics:
            if self._topics[topic].msgtype != msgtype:
                raise BagWriteError(
                    f"{self.bag_dir}: topic {topic} already recorded as "
                    f"{self._topics[topic].msgtype}, not {msgtype}"
                )
            return
        if not ensure_type(self._typestore, msgtype):
            raise UnknownMessageTypeError(
                f"topic {topic}: message type {msgtype} has no definition in the typestore or "
                f"any share/<pkg>/msg directory on AMENT_PREFIX_PATH"
            )
        qos = qos_for_profile(qos_profile)
        connection = self._writer.add_connection(
            topic, msgtype, typestore=self._typestore, offered_qos_profiles=[qos]
        )
        self._topics[topic] = _Topic(
            msgtype=msgtype,
            qos_profile=qos_profile,
            connection=connection,
            has_header=has_header_first(self._typestore, msgtype),
            rihs01=self._typestore.hash_rihs01(msgtype),
        )

    def write(self, topic: str, data: bytes | memoryview, receive_time_ns: int) -> None:
        """Write one serialized message.

        Args:
            topic: A topic added with :meth:`add_topic`.
            data: CDR bytes.
            receive_time_ns: Arrival time at the recorder (the bag's log time).

        Raises:
            KeyError: If the topic was not added.
            DiskFullError: If the disk is full.
            BagWriteError: On other I/O errors.

        """
        if self._closed:
            raise BagWriteError(f"{self.bag_dir}: episode bag is closed")
        entry = self._topics[topic]
        try:
            self._writer.write(entry.connection, receive_time_ns, data)
            now = time.monotonic()
            if now - self._last_flush >= self._flush_period_s:
                self.flush()
                self._last_flush = now
        except OSError as error:
            self._raise_os_error(error, f"writing {topic}")
        stamp = receive_time_ns
        if entry.has_header:
            try:
                stamp = header_stamp_ns(data)
            except ValueError:
                stamp = receive_time_ns
        entry.stamps_ns.append(stamp)
        self._count += 1
        if self._first_ns is None or receive_time_ns < self._first_ns:
            self._first_ns = receive_time_ns
        if self._last_ns is None or receive_time_ns > self._last_ns:
            self._last_ns = receive_time_ns

    def flush(self) -> None:
        """Close the pending MCAP chunk and hand it to the OS (survives a process kill)."""
        storage = self._writer.storage
        if storage is None:
            return
        chunk = getattr(storage, "chunk", None)
        if chunk is not None and chunk.bio.tell() > 0 and hasattr(storage, "close_chunk"):
            storage.close_chunk()
        bio = getattr(storage, "bio", None)
        if bio is not None:
            bio.flush()

    def cadence(self) -> list[TopicCadence]:
        """Per-topic cadence so far."""
        return [
            cadence_from_stamps(name, t.stamps_ns, "header" if t.has_header else "receive")
            for name, t in self._topics.items()
        ]

    def close(self, outcome: str | None = None, operator_notes: str | None = None) -> EpisodeReport:
        """Finalise the bag: metadata.yaml with custom_data, sidecar, remove INCOMPLETE.

        Args:
            outcome: Final outcome ('success', 'failure', 'unknown'); unchanged when None.
            operator_notes: Notes; unchanged when None.

        Returns:
            The episode's :class:`EpisodeReport`.

        Raises:
            DiskFullError: If the disk filled while finalising (the bag stays INCOMPLETE).
            BagWriteError: If the writer was already closed or aborted.

        """
        if self._closed:
            raise BagWriteError(f"{self.bag_dir}: episode bag already closed")
        updates: dict[str, Any] = {}
        if outcome is not None:
            updates["outcome"] = outcome
        if operator_notes is not None:
            updates["operator_notes"] = operator_notes
        if updates:
            self.info = EpisodeInfo.model_validate({**self.info.model_dump(), **updates})
        duration = 0.0
        if self._first_ns is not None and self._last_ns is not None:
            duration = (self._last_ns - self._first_ns) * 1e-9
        report = EpisodeReport(
            bag_dir=self.bag_dir,
            info=self.info,
            duration_s=duration,
            message_count=self._count,
            cadence=self.cadence(),
        )
        self._writer.set_custom_data(CUSTOM_DATA_KEY, self.info.model_dump_json())
        try:
            self._writer.close()
            self._closed = True
            self._write_sidecar("complete", report)
            (self.bag_dir / INCOMPLETE_MARKER).unlink(missing_ok=True)
        except OSError as error:
            self._raise_os_error(error, "closing the episode bag")
        report.size_bytes = _dir_size(self.bag_dir)
        return report

    def discard(self) -> None:
        """Abort and delete this episode's directory."""
        self._abort_quietly()
        shutil.rmtree(self.bag_dir, ignore_errors=True)


def read_episode_info(bag_dir: str | Path) -> EpisodeInfo | None:
    """Episode metadata of a bag: ``custom_data`` in metadata.yaml, else the sidecar.

    Returns:
        None when neither holds episode metadata (e.g. a bag recorded by ``ros2 bag``).

    """
    root = Path(bag_dir)
    meta_path = root / "metadata.yaml"
    if meta_path.is_file():
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
        custom = (meta.get("rosbag2_bagfile_information") or {}).get("custom_data") or {}
        if CUSTOM_DATA_KEY in custom:
            return EpisodeInfo.model_validate_json(custom[CUSTOM_DATA_KEY])
    sidecar = root / SIDECAR_NAME
    if sidecar.is_file():
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}
        if "episode" in data:
            return EpisodeInfo.model_validate(data["episode"])
    return None


@dataclass
class BagInspection:
    """What :func:`inspect_bag` found.

    Attributes:
        bag_dir: The bag directory.
        complete: Closed cleanly (metadata.yaml present, no INCOMPLETE marker, footer read).
        topic_counts: Readable messages per topic.
        readable_messages: Total readable messages.
        valid_until_offset: Bytes of the MCAP file that could be read.
        file_size: Size of the MCAP file.
        error: Why reading stopped early (file and offset), or None.

    """

    bag_dir: Path
    complete: bool
    topic_counts: dict[str, int]
    readable_messages: int
    valid_until_offset: int
    file_size: int
    error: str | None


def mcap_file_of(bag_dir: str | Path) -> Path:
    """Return the ``.mcap`` storage file of a bag directory.

    Raises:
        BagReadError: If there is none.

    """
    root = Path(bag_dir)
    if root.is_file():
        hint = f"; give its folder {root.parent}" if root.suffix == ".mcap" else ""
        raise BagReadError(
            f"{root}: a file, expected an episode bag directory (episode_NNNNNN/ holding the "
            f".mcap file and metadata.yaml){hint}"
        )
    if not root.is_dir():
        raise BagReadError(f"{root}: no such bag directory")
    files = sorted(root.glob("*.mcap"))
    if not files:
        raise BagReadError(
            f"{root}: no .mcap file in the bag directory (expected an episode bag recorded by "
            "the recorder: episode_NNNNNN/episode_NNNNNN.mcap)"
        )
    return files[0]


def inspect_bag(bag_dir: str | Path) -> BagInspection:
    """Scan a bag (complete or not) and report what is readable.

    Raises:
        BagReadError: If the directory holds no MCAP file.

    """
    root = Path(bag_dir)
    mcap = mcap_file_of(root)
    scan = McapScan(path=mcap)
    counts: dict[str, int] = {}
    for channel, _stamp, _data in iter_mcap(mcap, scan):
        counts[channel.topic] = counts.get(channel.topic, 0) + 1
    complete = (
        scan.complete
        and (root / "metadata.yaml").is_file()
        and not (root / INCOMPLETE_MARKER).exists()
    )
    return BagInspection(
        bag_dir=root,
        complete=complete,
        topic_counts=counts,
        readable_messages=scan.messages,
        valid_until_offset=scan.valid_until_offset,
        file_size=scan.file_size,
        error=scan.error,
    )


REPAIR_STATE = "repaired"
"""Sidecar ``state`` of a bag written by :func:`repair`."""

OUTCOME_TOPIC = "/trial/outcome"
"""Topic whose last message is the trial's outcome (operator's verdict)."""


def outcome_from_message(msg: Any) -> Literal["success", "failure", "unknown"]:
    """Outcome named by a ``/trial/outcome`` message (TrialOutcome, or std_msgs Bool/String)."""
    for name in ("success", "data"):
        value = getattr(msg, name, None)
        if isinstance(value, bool):
            return "success" if value else "failure"
    text = str(getattr(msg, "data", getattr(msg, "outcome", ""))).lower()
    return "success" if text == "success" else "failure" if text == "failure" else "unknown"


@dataclass
class RepairResult:
    """What :func:`repair` did.

    Attributes:
        source: The bag asked to repair.
        output: The repaired bag (``source`` itself when it was complete).
        action: ``repaired`` (written now), ``already_repaired`` (an earlier repair of this
            bag is there: nothing written) or ``complete`` (nothing to repair).
        messages: Messages in the output bag (readable part of the source).
        outcome: Episode outcome of the output: from the last recorded outcome message, else
            ``unknown`` (never the source metadata's label, which the lost part may have
            produced).
        lost_outcome: The source's metadata claimed an outcome its readable part does not hold.

    """

    source: Path
    output: Path
    action: Literal["repaired", "already_repaired", "complete"]
    messages: int = 0
    outcome: str = "unknown"
    lost_outcome: str = ""

    def format(self) -> str:
        """One line for the command line."""
        if self.action == "complete":
            return f"{self.source}: complete, nothing to repair"
        if self.action == "already_repaired":
            return f"{self.source}: already repaired as {self.output} (nothing written)"
        lost = (
            f"; its metadata said '{self.lost_outcome}' but no {OUTCOME_TOPIC} message survived"
            if self.lost_outcome
            else ""
        )
        return (
            f"{self.source}: repaired into {self.output} ({self.messages} messages, outcome "
            f"{self.outcome}{lost})"
        )


def _repair_owner(bag_dir: Path) -> tuple[str, str] | None:
    """``(state, repaired_from)`` of a bag written by :func:`repair`, else None."""
    sidecar = bag_dir / SIDECAR_NAME
    if not sidecar.is_file():
        return None
    try:
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict) or "repaired_from" not in data:
        return None
    return str(data.get("state", "")), str(data["repaired_from"])


def is_repaired(bag_dir: str | Path, info: EpisodeInfo | None = None) -> bool:
    """Whether a bag was written by :func:`repair` (its sidecar, or ``[recovered]`` notes).

    Args:
        bag_dir: The bag directory.
        info: Its episode metadata, if already read.

    """
    if _repair_owner(Path(bag_dir)) is not None:
        return True
    return info is not None and info.operator_notes.startswith("[recovered]")


def outcome_before_repair(bag_dir: str | Path, info: EpisodeInfo | None = None) -> str:
    """Return the outcome a repaired bag's source metadata claimed ('' if none or unknown)."""
    claimed = ""
    sidecar = Path(bag_dir) / SIDECAR_NAME
    if sidecar.is_file():
        with suppress(yaml.YAMLError, AttributeError):
            claimed = str(
                (yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}).get(
                    "outcome_before_repair", ""
                )
            )
    if not claimed and info is not None:
        claimed = info.outcome  # an older repair kept the source's label in the metadata
    return "" if claimed == "unknown" else claimed


def repair(
    bag_dir: str | Path,
    output_dir: str | Path | None = None,
    outcome_topic: str = OUTCOME_TOPIC,
) -> RepairResult:
    """Rewrite the readable part of an unfinished or damaged bag as a finalised bag.

    Messages up to the last complete chunk are copied (in file order, which is time order for
    a single recorder). Message definitions come from the MCAP schemas; type hashes from the
    sidecar (or the typestore). The episode metadata says what happened: ``operator_notes``
    prefixed with ``[recovered]``, and the outcome of the last ``outcome_topic`` message that
    survived, else ``unknown`` (a bag cut after its trial ended keeps its metadata's verdict
    but not the message it came from; that verdict is not trusted).

    Idempotent: a complete bag is left alone; a finished earlier repair of the same bag is
    reported, not redone; an interrupted one is redone.

    Args:
        bag_dir: The bag directory.
        output_dir: Where to write the repaired bag; ``<bag_dir>.recovered`` when None.
        outcome_topic: Topic of the trial outcome messages.

    Returns:
        What was done.

    Raises:
        BagReadError: No .mcap file, or nothing in the bag is readable.
        BagWriteError: The output directory exists and is not a repair of this bag.

    """
    root = Path(bag_dir)
    out = Path(output_dir) if output_dir is not None else root.with_name(root.name + ".recovered")
    mcap = mcap_file_of(root)
    if inspect_bag(root).complete:
        return RepairResult(root, root, "complete")
    if out.exists():
        owner = _repair_owner(out)
        if owner is None or Path(owner[1]) != root.resolve():
            raise BagWriteError(
                f"{out}: exists and is not a repair of {root}; remove it or give another output"
            )
        if owner[0] == REPAIR_STATE and not (out / INCOMPLETE_MARKER).exists():
            with opened_bag(out) as reader:
                count = reader.message_count
            info = read_episode_info(out)
            return RepairResult(
                root, out, "already_repaired", count, info.outcome if info else "unknown"
            )
        shutil.rmtree(out)  # an interrupted repair of this bag: redo it
    sidecar: dict[str, Any] = {}
    if (root / SIDECAR_NAME).is_file():
        sidecar = yaml.safe_load((root / SIDECAR_NAME).read_text(encoding="utf-8")) or {}
    topic_meta = sidecar.get("topics") or {}
    typestore = make_typestore()
    scan = McapScan(path=mcap)
    connections: dict[int, Any] = {}
    last_outcome: tuple[str, bytes] | None = None
    writer = Writer(out, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    (out / INCOMPLETE_MARKER).write_text("repair in progress\n")
    _write_yaml_atomic(
        out / SIDECAR_NAME, {"state": "repairing", "repaired_from": str(root.resolve())}
    )
    for channel, stamp, data in iter_mcap(mcap, scan):
        schema = scan.schemas[channel.schema_id]
        if channel.id not in connections:
            rihs01 = (topic_meta.get(channel.topic) or {}).get("rihs01")
            if not rihs01 and ensure_type(typestore, schema.name):
                rihs01 = typestore.hash_rihs01(schema.name)
            profile = (topic_meta.get(channel.topic) or {}).get("qos_profile", "default")
            connections[channel.id] = writer.add_connection(
                channel.topic,
                schema.name,
                msgdef=schema.data,
                rihs01=rihs01 or "RIHS01_" + "0" * 64,
                offered_qos_profiles=[qos_for_profile(profile)],
            )
        if channel.topic == outcome_topic:
            last_outcome = (schema.name, bytes(data))
        writer.write(connections[channel.id], stamp, data)
    if scan.messages == 0:
        writer.abort()
        shutil.rmtree(out, ignore_errors=True)
        raise BagReadError(
            f"{mcap}: no readable messages ({scan.error or 'empty'}); nothing to recover"
        )
    outcome: Literal["success", "failure", "unknown"] = "unknown"
    if last_outcome is not None and ensure_type(typestore, last_outcome[0]):
        with suppress(ValueError, KeyError):
            outcome = outcome_from_message(deserialize(typestore, last_outcome[1], last_outcome[0]))
    info = info_before = read_episode_info(root)
    lost = ""
    if info is not None:
        if info.outcome != "unknown" and last_outcome is None:
            lost = info.outcome
        notes = info.operator_notes
        notes = notes if notes.startswith("[recovered]") else ("[recovered] " + notes).strip()
        info = EpisodeInfo.model_validate(
            {**info.model_dump(), "operator_notes": notes, "outcome": outcome}
        )
        writer.set_custom_data(CUSTOM_DATA_KEY, info.model_dump_json())
    writer.close()
    _write_yaml_atomic(
        out / SIDECAR_NAME,
        {
            "state": REPAIR_STATE,
            "repaired_from": str(root.resolve()),
            "episode": info.model_dump(mode="json") if info is not None else None,
            "recovered_messages": scan.messages,
            "source_stopped": scan.error or "",
            "outcome_from": "message" if last_outcome is not None else "none (unknown)",
            "outcome_before_repair": info_before.outcome if info_before is not None else "",
            "topics": topic_meta,
        },
    )
    (out / INCOMPLETE_MARKER).unlink()
    return RepairResult(root, out, "repaired", scan.messages, outcome, lost)


def repair_bag(bag_dir: str | Path, output_dir: str | Path | None = None) -> Path:
    """Repair a bag (:func:`repair`) and return the finalised bag (the source if complete).

    Raises:
        BagReadError: If nothing in the bag is readable.
        BagWriteError: If the output directory exists and is not a repair of this bag.

    """
    return repair(bag_dir, output_dir).output


def open_reader(bag_dir: str | Path) -> Reader:
    """Open a finalised bag with the rosbags reader, turning failures into named errors.

    Raises:
        BagReadError: Naming the file and, via a scan, the offset where the data stops.

    """
    root = Path(bag_dir)
    if (root / INCOMPLETE_MARKER).exists():
        raise BagReadError(
            f"{root}: episode bag is marked {INCOMPLETE_MARKER} (recorder stopped before "
            f"closing it); run repair_bag() to recover the readable part"
        )
    reader = Reader(root)
    try:
        reader.open()
    except (ReaderError, OSError, KeyError, ValueError) as error:
        raise BagReadError(describe_read_failure(root, error)) from None
    return reader


def describe_read_failure(root: Path, error: BaseException) -> str:
    """Combine a reader error with the byte offset where a scan of the MCAP file stops.

    Args:
        root: Bag directory.
        error: The reader's exception.

    Returns:
        One line naming the bag, the error, and the file and offset.

    """
    detail = f"{root}: cannot read bag: {error}"
    try:
        mcap = mcap_file_of(root)
    except BagReadError:
        return detail
    scan = McapScan(path=mcap)
    for _ in iter_mcap(mcap, scan):
        pass
    if scan.error:
        return f"{detail}; {scan.error}"
    return f"{detail}; {mcap}: readable up to offset {scan.valid_until_offset} of {scan.file_size}"


def dump_report_json(report: EpisodeReport) -> str:
    """JSON form of an episode report (for logs and services)."""
    return json.dumps(
        {
            "bag_dir": str(report.bag_dir),
            "episode": report.info.model_dump(mode="json"),
            "duration_s": report.duration_s,
            "message_count": report.message_count,
            "size_bytes": report.size_bytes,
            "cadence": [vars(c) for c in report.cadence],
        }
    )


@contextmanager
def opened_bag(bag_dir: str | Path) -> Iterator[Reader]:
    """Context manager around :func:`open_reader` that closes the reader.

    Raises:
        BagReadError: See :func:`open_reader`.

    """
    reader = open_reader(bag_dir)
    try:
        yield reader
    finally:
        reader.close()
