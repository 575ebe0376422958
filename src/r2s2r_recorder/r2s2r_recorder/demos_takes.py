"""The takes of a record-demos session: what each recorded, and which go into the dataset."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .bag_reading import BagReadError
from .demos_config import RecordDemosConfig
from .grasp_miss import PalmInBase, read_grasp_miss
from .msg_types import make_typestore


@dataclass(frozen=True)
class TakeRecord:
    """One recorded take, as the manifest lists it.

    Attributes:
        bag: Bag directory name.
        seed: Trial seed (None if the bag has no outcome).
        outcome: 'success', 'failure' or 'unknown' (episode metadata).
        reason: The outcome's reason ('' if none recorded).
        object_type: The trial's object type.
        grasp_miss: For a failed take, where its grasp closed relative to the object
            (:meth:`r2s2r_recorder.grasp_miss.GraspMiss.as_dict`); None otherwise.

    """

    bag: str
    seed: int | None
    outcome: str
    reason: str
    object_type: str
    grasp_miss: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        data: dict[str, Any] = {
            "bag": self.bag,
            "seed": self.seed,
            "outcome": self.outcome,
            "reason": self.reason,
            "object_type": self.object_type,
        }
        if self.grasp_miss is not None:
            data["grasp_miss"] = self.grasp_miss
        return data


def with_grasp_misses(takes: list[TakeRecord], bag_of: dict[str, Path]) -> list[TakeRecord]:
    """Return ``takes`` with the grasp miss of every failed take read from its bag.

    A bag that cannot be read for it gets the reason instead of a figure.
    """
    palm = PalmInBase()  # compiled on its first use: only a take whose hand closed needs it
    typestore = make_typestore()
    result = []
    for take in takes:
        if take.outcome == "success" or take.bag not in bag_of:
            result.append(take)
            continue
        try:
            miss = read_grasp_miss(bag_of[take.bag], take.object_type, palm, typestore).as_dict()
        except BagReadError as error:
            miss = {"miss_m": None, "detail": f"bag not readable for the grasp: {error}"}
        result.append(replace(take, grasp_miss=miss))
    return result


def takes_to_convert(config: RecordDemosConfig, takes: list[TakeRecord]) -> list[TakeRecord]:
    """Return the takes that go into the dataset: all of them, or only the successful ones.

    Recording until N successes keeps failed takes out of the dataset (they are re-recorded,
    not demonstrations); a fixed count converts every take with its outcome. At most the
    wanted number of successes is converted (the first ones recorded).
    """
    if not config.until_successes:
        return list(takes)
    return [take for take in takes if take.outcome == "success"][: config.successes]


def take_summary(config: RecordDemosConfig, takes: list[TakeRecord]) -> dict[str, Any]:
    """Return the attempts, successes and failure reasons of a recording (manifest fields)."""
    successes = sum(1 for take in takes if take.outcome == "success")
    reasons = Counter(take.reason or take.outcome for take in takes if take.outcome != "success")
    summary: dict[str, Any] = {
        "attempts": len(takes),
        "successes": successes,
        "failure_reasons": dict(reasons),
    }
    if config.until_successes:
        summary["wanted_successes"] = config.successes
        summary["max_attempts"] = config.attempts_cap
        summary["short"] = successes < config.successes
    return summary
