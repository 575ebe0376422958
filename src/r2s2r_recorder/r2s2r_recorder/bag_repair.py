"""Repair of an unfinished or damaged episode bag: its readable part as a finalised bag.

A recorder killed mid-episode leaves a bag marked ``INCOMPLETE``
(:mod:`r2s2r_recorder.bag_format`) that the rosbags reader refuses; :func:`repair` copies what
:func:`~r2s2r_recorder.bag_reading.inspect_bag` finds readable into a new, finalised bag next
to it.

A damaged bag (a CRC fails: :mod:`r2s2r_recorder.mcap_scan`) is repaired the same way and never
keeps a damaged chunk: the copy stops at the first chunk whose CRC fails (the intact part
before it is kept; that chunk and every later one are dropped and counted, since a hole in the
middle of an episode would make a trajectory that never happened). Damage outside the chunks
(data-section or summary CRC: indexes, headers) loses no message: every chunk was verified,
and the copy is a new file with a new index. The repaired bag stores its own CRCs.
"""

from __future__ import annotations

import shutil
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from r2s2r_common.files import write_yaml_atomic
from r2s2r_common.topics import TRIAL_OUTCOME
from rosbags.rosbag2 import StoragePlugin

from .bag_format import (
    CUSTOM_DATA_KEY,
    INCOMPLETE_MARKER,
    SIDECAR_NAME,
    EpisodeInfo,
    qos_for_profile,
)
from .bag_reading import BagReadError, inspect_bag, mcap_file_of, opened_bag, read_episode_info
from .bag_writer import BagWriteError
from .mcap_crc import ChecksummedWriter
from .mcap_scan import McapScan, iter_mcap, verify_mcap
from .msg_types import deserialize, ensure_type, make_typestore

REPAIR_STATE = "repaired"
"""Sidecar ``state`` of a bag written by :func:`repair`."""

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
        damage: The source's records whose CRC fails (one phrase each, with its offset).
        dropped_chunks: Chunks not copied: the first damaged chunk and every one after it.

    """

    source: Path
    output: Path
    action: Literal["repaired", "already_repaired", "complete"]
    messages: int = 0
    outcome: str = "unknown"
    lost_outcome: str = ""
    damage: list[str] = field(default_factory=list)
    dropped_chunks: int = 0

    def format(self) -> str:
        """One line for the command line."""
        if self.action == "complete":
            return f"{self.source}: complete, nothing to repair"
        if self.action == "already_repaired":
            return f"{self.source}: already repaired as {self.output} (nothing written)"
        lost = (
            f"; its metadata said '{self.lost_outcome}' but no {TRIAL_OUTCOME} message survived"
            if self.lost_outcome
            else ""
        )
        damaged = ""
        if self.damage:
            more = f" and {len(self.damage) - 1} more" if len(self.damage) > 1 else ""
            kept = (
                f"copied the intact part before it, dropped {self.dropped_chunks} chunk"
                f"{'s' if self.dropped_chunks != 1 else ''} from there on"
                if self.dropped_chunks
                else "every chunk verified, all messages copied into a new index"
            )
            damaged = f"; damaged: {self.damage[0]}{more}: {kept}"
        return (
            f"{self.source}: repaired into {self.output} ({self.messages} messages, outcome "
            f"{self.outcome}{lost}{damaged})"
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
    outcome_topic: str = TRIAL_OUTCOME,
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
    if inspect_bag(root).usable:
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
    checked = verify_mcap(mcap)
    scan = McapScan(path=mcap)
    connections: dict[int, Any] = {}
    last_outcome: tuple[str, bytes] | None = None
    writer = ChecksummedWriter(out, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    (out / INCOMPLETE_MARKER).write_text("repair in progress\n")
    write_yaml_atomic(
        out / SIDECAR_NAME, {"state": "repairing", "repaired_from": str(root.resolve())}
    )
    # Stops at the first chunk whose CRC fails: a damaged chunk is never copied.
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
    damage = [d.format() for d in checked.damage]
    dropped = (
        checked.chunks - (scan.chunks - 1) if any(d.what == "chunk" for d in checked.damage) else 0
    )
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
    write_yaml_atomic(
        out / SIDECAR_NAME,
        {
            "state": REPAIR_STATE,
            "repaired_from": str(root.resolve()),
            "episode": info.model_dump(mode="json") if info is not None else None,
            "recovered_messages": scan.messages,
            "source_stopped": scan.error or "",
            "source_damage": damage,
            "dropped_chunks": dropped,
            "outcome_from": "message" if last_outcome is not None else "none (unknown)",
            "outcome_before_repair": info_before.outcome if info_before is not None else "",
            "topics": topic_meta,
        },
    )
    (out / INCOMPLETE_MARKER).unlink()
    return RepairResult(root, out, "repaired", scan.messages, outcome, lost, damage, dropped)


def repair_bag(bag_dir: str | Path, output_dir: str | Path | None = None) -> Path:
    """Repair a bag (:func:`repair`) and return the finalised bag (the source if complete).

    Raises:
        BagReadError: If nothing in the bag is readable.
        BagWriteError: If the output directory exists and is not a repair of this bag.

    """
    return repair(bag_dir, output_dir).output
