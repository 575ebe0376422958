"""A recorded bag's episode metadata, completed from what the bag recorded of its trial.

The object type, belt speed and outcome become known only during a trial; they are read from
the bag's ``/trial/outcome`` and ``/belt/speed`` messages and written back where the recorder
keeps the metadata (``metadata.yaml`` custom data and the sidecar).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from r2s2r_common.files import write_yaml_atomic
from r2s2r_common.topics import BELT_SPEED, TRIAL_OUTCOME
from rosbags.typesys.store import Typestore

from .bag_format import CUSTOM_DATA_KEY, SIDECAR_NAME, EpisodeInfo
from .bag_reading import BagReadError, open_reader, read_episode_info
from .msg_types import deserialize, make_typestore


@dataclass(frozen=True)
class RecordedTrial:
    """What a bag recorded about its trial.

    Attributes:
        object_type: From the last ``/trial/outcome`` message ('' if none).
        success: The operator's verdict from that message (None if none).
        belt_speed_mps: Median of ``/belt/speed`` (None if none recorded).
        reason: The outcome's reason ('success', 'missed_grasp', ...; '' if none).
        seed: The trial's seed (None if no outcome).

    """

    object_type: str
    success: bool | None
    belt_speed_mps: float | None
    reason: str = ""
    seed: int | None = None


def read_recorded_trial(bag_dir: str | Path, typestore: Typestore | None = None) -> RecordedTrial:
    """Read the trial outcome and belt speed a bag recorded.

    Raises:
        BagReadError: If the bag cannot be read.

    """
    store = typestore or make_typestore()
    object_type, success, speeds = "", None, []
    reason, seed = "", None
    reader = open_reader(bag_dir)
    try:
        wanted = [c for c in reader.connections if c.topic in (TRIAL_OUTCOME, BELT_SPEED)]
        for connection, _stamp, raw in reader.messages(connections=wanted):
            msg = deserialize(store, raw, connection.msgtype)
            if connection.topic == TRIAL_OUTCOME and hasattr(msg, "object_type"):
                object_type, success = str(msg.object_type), bool(msg.success)
                reason, seed = str(msg.reason), int(msg.seed)
            elif connection.topic == BELT_SPEED:
                speeds.append(float(msg.twist.linear.x))
    except (ValueError, KeyError) as error:
        raise BagReadError(
            f"{bag_dir}: cannot read {TRIAL_OUTCOME}/{BELT_SPEED}: {error}"
        ) from None
    finally:
        reader.close()
    return RecordedTrial(
        object_type, success, statistics.median(speeds) if speeds else None, reason, seed
    )


def complete_episode_info(info: EpisodeInfo, trial: RecordedTrial) -> EpisodeInfo:
    """Fill what the operator could not know when the episode started (from the bag).

    The object type and belt speed become known only during the trial; the outcome is the
    operator's verdict. Values the recorder already holds (not 'unknown' / 0) are kept.
    """
    updates: dict[str, Any] = {}
    if info.object_type == "unknown" and trial.object_type:
        updates["object_type"] = trial.object_type
    if info.belt_speed_mps == 0.0 and trial.belt_speed_mps is not None:
        updates["belt_speed_mps"] = round(trial.belt_speed_mps, 6)
    if info.outcome == "unknown" and trial.success is not None:
        updates["outcome"] = "success" if trial.success else "failure"
    return EpisodeInfo.model_validate({**info.model_dump(), **updates}) if updates else info


def write_episode_info(bag_dir: str | Path, info: EpisodeInfo) -> None:
    """Store episode metadata where the recorder keeps it (metadata.yaml custom_data, sidecar).

    Raises:
        BagReadError: If the bag has no metadata.yaml (an unfinished bag).

    """
    root = Path(bag_dir)
    meta_path = root / "metadata.yaml"
    if not meta_path.is_file():
        raise BagReadError(f"{root}: no metadata.yaml (bag not finalised)")
    meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
    section = meta.setdefault("rosbag2_bagfile_information", {})
    custom = section.get("custom_data") or {}
    custom[CUSTOM_DATA_KEY] = info.model_dump_json()
    section["custom_data"] = custom
    write_yaml_atomic(meta_path, meta)
    sidecar = root / SIDECAR_NAME
    if sidecar.is_file():
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}
        data["episode"] = info.model_dump(mode="json")
        write_yaml_atomic(sidecar, data)


def complete_bag_metadata(bag_dir: str | Path, typestore: Typestore | None = None) -> EpisodeInfo:
    """Complete one finalised bag's episode metadata from its recorded messages.

    Raises:
        BagReadError: Unreadable bag, or one without episode metadata.

    """
    return complete_bag(bag_dir, typestore)[0]


def complete_bag(
    bag_dir: str | Path, typestore: Typestore | None = None
) -> tuple[EpisodeInfo, RecordedTrial]:
    """Complete one bag's episode metadata; return it with what the bag recorded of its trial.

    Raises:
        BagReadError: Unreadable bag, or one without episode metadata.

    """
    info = read_episode_info(bag_dir)
    if info is None:
        raise BagReadError(f"{bag_dir}: no episode metadata (not recorded by the recorder)")
    trial = read_recorded_trial(bag_dir, typestore)
    completed = complete_episode_info(info, trial)
    if completed != info:
        write_episode_info(bag_dir, completed)
    return completed, trial
