"""Recording engine: message queue, writer thread and episode lifecycle (ROS-free).

Subscription callbacks only call :meth:`RecordingEngine.enqueue` (a non-blocking queue put);
one writer thread owns the :class:`EpisodeBagWriter` and does all file I/O. Episode control
(start, stop, discard) goes through the same queue, so every message received before a stop
is written before the bag is closed.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.typesys.store import Typestore

from .bag_format import EpisodeInfo
from .bag_writer import (
    BagWriteError,
    DiskFullError,
    EpisodeBagWriter,
    EpisodeReport,
    UnknownMessageTypeError,
)
from .config import RecorderConfig
from .msg_types import deserialize, make_typestore

_LATCHED_KEEP = 16


class RecorderStateError(RuntimeError):
    """An episode command does not fit the recorder's state (e.g. stop while idle)."""


@dataclass
class _Control:
    action: str
    future: Future[Any]
    outcome: str | None = None
    notes: str | None = None
    info: EpisodeInfo | None = None


class RecordingEngine:
    """Owns the writer thread and the current episode.

    Args:
        config: Recorder configuration.
        typestore: Typestore for message definitions; :func:`make_typestore` when None.

    """

    def __init__(self, config: RecorderConfig, typestore: Typestore | None = None) -> None:
        self.config = config
        self._typestore = typestore or make_typestore()
        self._queue: queue.Queue[tuple[str, bytes, int] | _Control | None] = queue.Queue(
            maxsize=config.queue_size
        )
        self._types: dict[str, str] = {}
        self._latched: dict[str, list[tuple[bytes, int]]] = defaultdict(list)
        self._lock = threading.Lock()
        self._recording = False
        self._writer: EpisodeBagWriter | None = None
        self._last_outcome: str | None = None
        self.queue_drops: dict[str, int] = defaultdict(int)
        self.skipped_topics: dict[str, str] = {}
        self.last_error: str | None = None
        self.reports: list[EpisodeReport] = []
        self._thread = threading.Thread(target=self._run, name="recorder-writer", daemon=True)
        self._thread.start()

    @property
    def recording(self) -> bool:
        """True while an episode is open."""
        return self._recording

    def register_topic(self, topic: str, msgtype: str) -> None:
        """Declare the message type of a topic before its messages are enqueued."""
        with self._lock:
            self._types[topic] = msgtype

    def enqueue(self, topic: str, data: bytes, receive_time_ns: int) -> bool:
        """Hand one serialized message to the writer thread (never blocks).

        Returns:
            False when the message was dropped because the queue is full.

        """
        if topic in self.config.latched_topics:
            with self._lock:
                kept = self._latched[topic]
                kept.append((data, receive_time_ns))
                del kept[:-_LATCHED_KEEP]
        if topic == self.config.outcome_topic:
            self._note_outcome(topic, data)
        if not self._recording:
            return True
        try:
            self._queue.put_nowait((topic, data, receive_time_ns))
        except queue.Full:
            self.queue_drops[topic] += 1
            return False
        return True

    def _note_outcome(self, topic: str, data: bytes) -> None:
        msgtype = self._types.get(topic)
        if msgtype is None:
            return
        try:
            msg = deserialize(self._typestore, data, msgtype)
        except (ValueError, KeyError):
            return
        value = getattr(msg, "data", None)
        if isinstance(value, bool):
            self._last_outcome = "success" if value else "failure"
        elif str(value).lower() in ("success", "failure"):
            self._last_outcome = str(value).lower()

    def _submit(self, control: _Control) -> Future[Any]:
        self._queue.put(control, timeout=10.0)
        return control.future

    def start_episode_async(self, info: EpisodeInfo) -> Future[Path]:
        """Ask the writer thread to open ``output_dir/<info.episode_id>``; see start_episode.

        Raises:
            RecorderStateError: If an episode is already open.

        """
        if self._recording:
            raise RecorderStateError("an episode is already being recorded; stop it first")
        self._last_outcome = None
        self.queue_drops.clear()
        return self._submit(_Control("start", Future(), info=info))

    def start_episode(self, info: EpisodeInfo, timeout_s: float = 10.0) -> Path:
        """Open a new episode bag under ``output_dir/<info.episode_id>``.

        Raises:
            RecorderStateError: If an episode is already open.
            BagWriteError: If the bag cannot be created (DiskFullError when the disk is full).

        """
        result: Path = self.start_episode_async(info).result(timeout=timeout_s)
        return result

    def stop_episode_async(
        self, outcome: str | None = None, notes: str | None = None
    ) -> Future[EpisodeReport]:
        """Ask the writer thread to close the current episode; see stop_episode.

        Raises:
            RecorderStateError: If no episode is open.

        """
        if not self._recording:
            raise RecorderStateError(
                f"no episode is being recorded (last error: {self.last_error or 'none'})"
            )
        if outcome in (None, "unknown"):
            outcome = self._last_outcome or "unknown"
        return self._submit(_Control("stop", Future(), outcome=outcome, notes=notes))

    def stop_episode(
        self, outcome: str | None = None, notes: str | None = None, timeout_s: float = 30.0
    ) -> EpisodeReport:
        """Close the current episode after writing every message queued before this call.

        Args:
            outcome: 'success'/'failure', or None/'unknown' to use the last outcome message.
            notes: Operator notes, or None to keep those given at start.
            timeout_s: How long to wait for the writer thread.

        Raises:
            RecorderStateError: If no episode is open.
            BagWriteError: If finalising failed (DiskFullError when the disk is full).

        """
        report: EpisodeReport = self.stop_episode_async(outcome, notes).result(timeout=timeout_s)
        return report

    def discard_episode_async(self) -> Future[Path]:
        """Ask the writer thread to abort and delete the current episode.

        Raises:
            RecorderStateError: If no episode is open.

        """
        if not self._recording:
            raise RecorderStateError("no episode is being recorded")
        return self._submit(_Control("discard", Future()))

    def discard_episode(self, timeout_s: float = 10.0) -> Path:
        """Abort the current episode and delete its bag directory.

        Raises:
            RecorderStateError: If no episode is open.

        """
        result: Path = self.discard_episode_async().result(timeout=timeout_s)
        return result

    def shutdown(self, outcome: str | None = None, timeout_s: float = 30.0) -> EpisodeReport | None:
        """Finish the current episode properly (if any) and stop the writer thread."""
        report = None
        if self._recording:
            try:
                report = self.stop_episode(outcome, timeout_s=timeout_s)
            except (BagWriteError, RecorderStateError) as error:
                self.last_error = str(error)
        self._queue.put(None)
        self._thread.join(timeout=timeout_s)
        return report

    # --- writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, _Control):
                self._handle_control(item)
                continue
            writer = self._writer
            if writer is None:
                continue
            topic, data, receive_ns = item
            try:
                self._write(writer, topic, data, receive_ns)
            except BagWriteError as error:
                # Disk full or I/O failure: the episode stops here; earlier ones are untouched.
                self.last_error = str(error)
                self._writer = None
                self._recording = False

    def _write(self, writer: EpisodeBagWriter, topic: str, data: bytes, receive_ns: int) -> None:
        if topic not in writer.topics:
            msgtype = self._types.get(topic)
            if msgtype is None or topic in self.skipped_topics:
                return
            try:
                writer.add_topic(topic, msgtype, self.config.qos_profile(topic))
            except UnknownMessageTypeError as error:
                self.skipped_topics[topic] = str(error)
                return
        writer.write(topic, data, receive_ns)

    def _handle_control(self, control: _Control) -> None:
        try:
            if control.action == "start":
                assert control.info is not None
                bag_dir = Path(self.config.output_dir) / control.info.episode_id
                writer = EpisodeBagWriter(
                    bag_dir,
                    control.info,
                    self._typestore,
                    flush_period_s=self.config.flush_period_s,
                )
                with self._lock:
                    latched = {t: list(v) for t, v in self._latched.items()}
                for topic, messages in latched.items():
                    for data, receive_ns in messages:
                        self._write(writer, topic, data, receive_ns)
                self._writer = writer
                self.last_error = None
                self._recording = True
                control.future.set_result(bag_dir)
            elif control.action == "stop":
                writer = self._require_writer()
                self._recording = False
                self._writer = None
                report = writer.close(outcome=control.outcome, operator_notes=control.notes)
                self.reports.append(report)
                control.future.set_result(report)
            elif control.action == "discard":
                writer = self._require_writer()
                self._recording = False
                self._writer = None
                writer.discard()
                control.future.set_result(writer.bag_dir)
        except (BagWriteError, RecorderStateError, OSError) as error:
            if isinstance(error, DiskFullError | BagWriteError):
                self.last_error = str(error)
            control.future.set_exception(error)

    def _require_writer(self) -> EpisodeBagWriter:
        if self._writer is None:
            raise RecorderStateError(
                f"no open episode bag (last error: {self.last_error or 'none'})"
            )
        return self._writer


def next_episode_id(output_dir: str | Path) -> str:
    """Return ``episode_<NNNNNN>`` one past the highest existing episode directory."""
    root = Path(output_dir)
    numbers = [
        int(p.name.split("_", 1)[1].split(".", 1)[0])
        for p in (root.iterdir() if root.is_dir() else [])
        if p.name.startswith("episode_") and p.name.split("_", 1)[1].split(".", 1)[0].isdigit()
    ]
    return f"episode_{(max(numbers) + 1) if numbers else 0:06d}"
