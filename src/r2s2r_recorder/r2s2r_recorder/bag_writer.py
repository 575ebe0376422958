"""One rosbag2 (MCAP) bag per episode, written with the pure-Python ``rosbags`` library.

ROS-free: takes serialized CDR bytes as they come from an rclpy ``raw=True`` subscription. The
bag directory's layout is :mod:`r2s2r_recorder.bag_format`.

Crash safety: every episode has its own directory, finalised on stop, so a crash only ever
touches the current one. While recording, the pending MCAP chunk is closed and flushed to the
OS every ``flush_period_s``, so after SIGKILL the current bag is readable up to its last
flushed chunk through :func:`~r2s2r_recorder.bag_reading.inspect_bag` /
:func:`~r2s2r_recorder.bag_repair.repair_bag`, and the ``INCOMPLETE`` marker says it was not
closed. Disk full (ENOSPC) raises :class:`DiskFullError`; earlier episodes are never reopened.

Integrity: every chunk stores the CRC-32 of its records when it is closed, and the data-section
and summary CRCs are stored on close (:mod:`r2s2r_recorder.mcap_crc`), so that damage found
later is located by :func:`~r2s2r_recorder.mcap_scan.verify_mcap`.
"""

from __future__ import annotations

import errno
import json
import shutil
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.files import write_yaml_atomic
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.errors import WriterError
from rosbags.typesys.store import Typestore

from .bag_format import (
    CUSTOM_DATA_KEY,
    INCOMPLETE_MARKER,
    SIDECAR_NAME,
    EpisodeInfo,
    qos_for_profile,
)
from .mcap_crc import ChecksummedWriter
from .msg_types import ensure_type, has_header_first, header_stamp_ns, make_typestore


class BagWriteError(RuntimeError):
    """Writing an episode bag failed; the message names the bag directory."""


class DiskFullError(BagWriteError):
    """The disk is full (ENOSPC). Recording stopped; earlier episodes are untouched."""


class UnknownMessageTypeError(BagWriteError):
    """A topic's message type has no definition in the typestore or any ``.msg`` directory."""


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
        checksums: Store the MCAP CRC-32s (False: rosbags' plain writer, CRCs 0 = "not
            computed", as bags written before checksums; for benchmarks and tests).

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
        checksums: bool = True,
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
        writer_class = ChecksummedWriter if checksums else Writer
        self._writer = writer_class(self.bag_dir, version=9, storage_plugin=StoragePlugin.MCAP)
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
        write_yaml_atomic(self.bag_dir / SIDECAR_NAME, data)

    def add_topic(self, topic: str, msgtype: str, qos_profile: str = "default") -> None:
        """Add a connection for ``topic``.

        Args:
            topic: Topic name.
            msgtype: ROS type name as seen on the graph (``pkg/msg/Name``).
            qos_profile: One of :data:`~r2s2r_recorder.bag_format.QOS_PROFILE_NAMES`; stored
                as ``offered_qos_profiles``.

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
