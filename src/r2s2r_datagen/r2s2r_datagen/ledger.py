"""The run ledger: one JSON line per finished episode job, appended durably.

A record is appended (flushed and fsync'ed) only after the worker has closed the shard holding
the episode, so a record never points at data that is not on disk. A line cut short by a kill
is ignored when reading (the next record starts a line of its own). The last record of an
episode wins (a ``lost`` record, written when a success's shard turned out unreadable, re-opens
it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

FINISHED_STATUSES = ("success", "failed", "skipped")
"""Statuses that mean the episode is finished (a resume skips it, but see
:data:`INTERRUPTED_REASONS`)."""

JOB_TIMEOUT = "job_timeout"
"""Reason of a job that overran its deadline (``job_timeout_s``); not the trial's ``timeout``
(:class:`r2s2r_sim.task.TrialOutcome`: the object was still moving when the trial's time ran
out), which is the generator's verdict."""

INTERRUPTED_REASONS = ("write_failed", "worker_crashed", JOB_TIMEOUT)
"""Reasons of a ``failed`` record that are no verdict on the episode: its shard could not be
written (a full disk), its worker died, or it overran its deadline. A resume runs such an
episode again unless told not to (``retry_interrupted = false``); a failure the generator
decided (a missed grasp, a drop, a trial that timed out) is a result, and its seed would fail
the same way again, so only ``retry_failed`` runs it again."""


def is_interrupted(record: dict[str, Any]) -> bool:
    """Whether a ledger record is a failure without a verdict (:data:`INTERRUPTED_REASONS`).

    Ledgers written before :data:`JOB_TIMEOUT` named a job's deadline ``timeout``, like the
    trial's; there the job's record is the one without a generation attempt.
    """
    if record.get("status") != "failed":
        return False
    reason = record.get("reason")
    legacy_job_timeout = reason == "timeout" and int(record.get("attempts", 0)) == 0
    return reason in INTERRUPTED_REASONS or legacy_job_timeout


EpisodeKey = tuple[str, int]


class Ledger:
    """Append-only JSONL file of job records.

    Args:
        path: The ledger file (created on first append).

    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record durably (write, flush, fsync)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**record, "recorded_unix_s": round(time.time(), 3)}, sort_keys=True)
        with self.path.open("ab+") as stream:
            end = stream.seek(0, os.SEEK_END)
            if end:
                stream.seek(end - 1)  # writes still go to the end ("a" mode)
                if stream.read(1) != b"\n":
                    line = "\n" + line  # after a line cut short by a kill: a line of its own
            stream.write((line + "\n").encode())
            stream.flush()
            os.fsync(stream.fileno())

    def records(self) -> list[dict[str, Any]]:
        """Every complete record in file order (a truncated last line is skipped)."""
        if not self.path.is_file():
            return []
        out = []
        with self.path.open(encoding="utf-8") as stream:
            for line in stream:
                if not line.endswith("\n"):
                    break  # cut short by a kill: not a record
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and "configuration" in record:
                    out.append(record)
        return out

    def latest(self) -> dict[EpisodeKey, dict[str, Any]]:
        """Return the last record of every episode, keyed ``(configuration, episode_index)``."""
        latest: dict[EpisodeKey, dict[str, Any]] = {}
        for record in self.records():
            latest[(str(record["configuration"]), int(record["episode_index"]))] = record
        return latest
