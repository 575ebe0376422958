"""Does the in-process evaluator predict the ROS graph? Paired trials, compared seed by seed.

Both paths run the same trials (seed + condition) of the same policy. Per pair: whether the
outcomes agree; over pairs: the agreement rate, McNemar's exact test on the discordant pairs
(:func:`mcnemar_exact_p`) and the two success rates. Per trial, from the inference traces
(:mod:`r2s2r_policy.inference.trace`) of both paths, what the policy saw and sent
(:func:`trace_timing`): when it first commanded after the trial started, the cell time from the
newest image to the command (the in-process path commands at the image's instant; the graph
adds perception and inference time), how far the tracked object lagged the image, inference
latency, observation ages, and the first instant at which the two paths' measured arm
positions part (:func:`divergence_time`), which is where a disagreement is to be traced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from r2s2r_dataset import JOINT_POS_KEY, OBJECT_TRACK_KEY

from ..inference.trace import LoadedTrace
from .trials import TrialRecord

ARM_JOINTS = 6
"""The first joints of the state are the arm's (``r2s2r_description.robot``)."""


def mcnemar_exact_p(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts (binomial, p = 1/2).

    Args:
        only_first: Pairs where only the first path succeeded.
        only_second: Pairs where only the second path succeeded.

    """
    if only_first < 0 or only_second < 0:
        raise ValueError("discordant counts must be >= 0")
    n = only_first + only_second
    if n == 0:
        return 1.0
    k = min(only_first, only_second)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True)
class PairedSummary:
    """Agreement of two evaluation paths over paired trials.

    Attributes:
        pairs: Paired trials.
        agree: Pairs with the same outcome.
        first_successes: Successes of the first path (in process).
        second_successes: Successes of the second path (ROS).
        only_first: Pairs only the first path won.
        only_second: Pairs only the second path won.
        agreement: ``agree / pairs``.
        mcnemar_p: :func:`mcnemar_exact_p`.
        rate_difference: Second rate minus first (fraction).

    """

    pairs: int
    agree: int
    first_successes: int
    second_successes: int
    only_first: int
    only_second: int
    agreement: float
    mcnemar_p: float
    rate_difference: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)


def paired_summary(first: Sequence[bool], second: Sequence[bool]) -> PairedSummary:
    """Summarise paired outcomes (same trials, same order).

    Raises:
        ValueError: If the lists differ in length or are empty.

    """
    if len(first) != len(second) or not first:
        raise ValueError(
            f"expected two equal, non-empty outcome lists, got {len(first)}, {len(second)}"
        )
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    only_first = int(np.sum(a & ~b))
    only_second = int(np.sum(~a & b))
    pairs = int(a.size)
    return PairedSummary(
        pairs=pairs,
        agree=pairs - only_first - only_second,
        first_successes=int(a.sum()),
        second_successes=int(b.sum()),
        only_first=only_first,
        only_second=only_second,
        agreement=(pairs - only_first - only_second) / pairs,
        mcnemar_p=mcnemar_exact_p(only_first, only_second),
        rate_difference=float(b.mean() - a.mean()),
    )


def pair_records(
    first: Sequence[TrialRecord], second: Sequence[TrialRecord]
) -> list[tuple[TrialRecord, TrialRecord]]:
    """Pair two evaluations' records by trial (both must have run the same seeds).

    Raises:
        ValueError: If a trial's seed or condition differs between the two.

    """
    by_index = {record.index: record for record in second}
    pairs = []
    for record in first:
        other = by_index.get(record.index)
        if other is None:
            continue
        if (other.seed, other.condition) != (record.seed, record.condition):
            raise ValueError(
                f"trial {record.index}: seed/condition {record.seed}/{record.condition} vs "
                f"{other.seed}/{other.condition}: not the same protocol"
            )
        pairs.append((record, other))
    return pairs


@dataclass(frozen=True)
class TraceTiming:
    """What one trial's trace says about timing (seconds; NaN where nothing was commanded).

    Attributes:
        inferences: Steps that sent a chunk.
        first_command_s: Cell time from the trial's start to the first chunk's image.
        image_to_command_s: Median cell time from the newest image to its chunk's sending
            (the joint state's stamp plus its age estimates the cell time at sending).
        image_to_command_p95_s: Its 95th percentile.
        track_lag_s: Median of (newest image stamp - tracked-object stamp); 0 when the
            object of the same frame was used, one camera period when the previous one.
        track_lag_max_s: Its maximum.
        latency_p50_s: Median inference latency (snapshot + model + safety).
        latency_p99_s: Its 99th percentile.
        image_age_p99_s: 99th percentile of the newest image's age at inference.
        image_period_s: Median spacing of the images the chunks were computed from.

    """

    inferences: int
    first_command_s: float
    image_to_command_s: float
    image_to_command_p95_s: float
    track_lag_s: float
    track_lag_max_s: float
    latency_p50_s: float
    latency_p99_s: float
    image_age_p99_s: float
    image_period_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (NaN as None)."""
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in asdict(self).items()
        }


def _image_keys(trace: LoadedTrace) -> list[str]:
    return [key for key in trace.input_keys if key.endswith("_rgb")]


def image_stamps(trace: LoadedTrace) -> np.ndarray:
    """Stamp of the newest image each step was computed from (cell time)."""
    return np.max([trace.column("stamp_s", key) for key in _image_keys(trace)], axis=0)


def trace_timing(trace: LoadedTrace, started_at_s: float) -> TraceTiming:
    """Return the timing figures of one trial's trace (see :class:`TraceTiming`)."""
    nan = float("nan")
    mask = trace.commanded()
    if not mask.any():
        return TraceTiming(0, nan, nan, nan, nan, nan, nan, nan, nan, nan)
    images = image_stamps(trace)[mask]
    sent = (trace.column("stamp_s", JOINT_POS_KEY) + trace.column("age_s", JOINT_POS_KEY))[mask]
    to_command = sent - images
    if OBJECT_TRACK_KEY in trace.input_keys:
        lag = images - trace.column("stamp_s", OBJECT_TRACK_KEY)[mask]
    else:
        lag = np.zeros_like(images)
    ages = np.min([trace.column("age_s", key) for key in _image_keys(trace)], axis=0)[mask]
    latency = trace.arrays["latency_s"][mask]
    return TraceTiming(
        inferences=int(mask.sum()),
        first_command_s=float(images[0] - started_at_s) if started_at_s >= 0 else nan,
        image_to_command_s=float(np.median(to_command)),
        image_to_command_p95_s=float(np.percentile(to_command, 95)),
        track_lag_s=float(np.median(lag)),
        track_lag_max_s=float(np.max(lag)),
        latency_p50_s=float(np.median(latency)),
        latency_p99_s=float(np.percentile(latency, 99)),
        image_age_p99_s=float(np.percentile(ages, 99)),
        image_period_s=float(np.median(np.diff(images))) if images.size > 1 else nan,
    )


def divergence_time(
    first: LoadedTrace,
    first_start_s: float,
    second: LoadedTrace,
    second_start_s: float,
    threshold_rad: float = 0.05,
    match_s: float = 0.05,
) -> float | None:
    """First trial time at which the two paths' measured arm positions differ by a threshold.

    Steps are matched by their image's time since the trial started (within ``match_s``);
    the largest arm-joint difference of a matched pair is compared with ``threshold_rad``.

    Returns:
        Seconds since the trial started, or None if the paths never part (or no pair matched).

    """
    a_mask, b_mask = first.commanded(), second.commanded()
    if not a_mask.any() or not b_mask.any():
        return None
    a_time = image_stamps(first)[a_mask] - first_start_s
    b_time = image_stamps(second)[b_mask] - second_start_s
    a_joints = first.arrays["joint_pos"][a_mask][:, :ARM_JOINTS]
    b_joints = second.arrays["joint_pos"][b_mask][:, :ARM_JOINTS]
    for i, time_s in enumerate(a_time):
        j = int(np.argmin(np.abs(b_time - time_s)))
        if abs(b_time[j] - time_s) > match_s:
            continue
        if float(np.max(np.abs(a_joints[i] - b_joints[j]))) > threshold_rad:
            return float(time_s)
    return None
