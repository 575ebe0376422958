"""Motion style of a policy against the demonstrator's and the planner's (issue 37, item 5).

The paper's diagnostic policy (10 real demonstrations + ungrounded motion-planner episodes)
grasps with the planner's two-finger pinch and moves like the planner's data. This module
measures that with four metrics per trajectory:

- ``hand_closure_fraction``: share of the hand's flexion joints that take part in the grasp
  (:func:`r2s2r_sim.demonstrator.style.style_metrics`; 1 for a whole-hand grasp);
- ``fingers_engaged``: fingers (thumb, index, middle, ring) flexed more than
  :data:`GRASP_FLEXION_RAD` beyond the open hand at the grasp instant;
- ``speed_peak_to_mean`` and ``plateau_fraction`` of the palm speed per movement
  (``style_metrics``: a human's bell-shaped profile against a planner's trapezoid);

plus a grasp-type label at the grasp instant (:func:`grasp_type`): ``pinch`` (the thumb and at
most one finger), ``power`` (the thumb and two or more fingers, or three or more fingers) or
``none``. The grasp instant is the most closed moment of the hand; for a rollout, the most
closed moment within :data:`CLOSURE_SEARCH_WINDOW_S` after its grasp event (the first contact of two
hand parts, from the twin's truth), whose contact-based finger count is kept beside the
joint-based one.

Every trajectory is resampled to one rate (the datasets' control rate) before it is measured:
the style metrics' derivatives depend on the sampling. A group (a dataset, a folder of
rollouts) is summarised by per-metric means with bootstrap 95 % intervals
(:func:`~.domain.bootstrap_interval`) and its pinch share with a Wilson interval;
:func:`closeness` says per metric whether a policy is closer to the planner than to the
demonstrator. Trajectories whose style cannot be computed (too short, no movement) are counted
and skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from r2s2r_description.cell import NOMINAL_LAYOUT
from r2s2r_description.robot import ALL_JOINT_NAMES, HAND_JOINT_NAMES, HOME_POSITIONS
from r2s2r_description.transforms import Pose
from r2s2r_sim.demonstrator.style import FLEXION_INDICES, N_ARM, StyleError, style_metrics
from r2s2r_world.kinematics import PalmIk

from r2s2r_dataset import JOINT_POS_KEY, DatasetError, obs_path

from ..evaluation.rollouts import FINGERS, load_rollout
from ..evaluation.stats import wilson_interval
from .domain import bootstrap_interval
from .embeddings import AnalysisInputError

STYLE_METRICS = (
    "hand_closure_fraction",
    "fingers_engaged",
    "speed_peak_to_mean",
    "plateau_fraction",
)
"""The metrics a group is summarised and compared by, in report order."""
PINCH, POWER, NO_GRASP = "pinch", "power", "none"
GRASP_TYPES = (PINCH, POWER, NO_GRASP)
GRASP_FLEXION_RAD = 0.2
"""A finger is engaged when one of its flexion joints is this far beyond the open hand.

At the grasp, the planner's pinch flexes thumb and index by 0.27-0.63 rad and extends middle
and ring (-0.1); the demonstrator's power grasp flexes every finger by 1.2-1.5 rad (the
reduced experiment's datasets)."""
CLOSURE_SEARCH_WINDOW_S = 1.0
"""A rollout's grasp instant: the most closed moment this long after its grasp event.

Longer than the rollouts' contact count
(:data:`~r2s2r_policy.evaluation.rollouts.CONTACT_COUNT_WINDOW_S`, 0.5 s): the joints keep
closing after the fingers touch the object, and the most closed moment is what is searched."""
DEFAULT_RESAMPLES = 1000

Interval = tuple[float, float, float]
"""``(value, low, high)``; NaN when a group has no measured trajectory."""
FloatArray = NDArray[np.float64]

OPEN_HAND = np.array([HOME_POSITIONS[name] for name in HAND_JOINT_NAMES])
"""The open hand (its home pose), where every episode and trial starts."""
FINGER_JOINTS: dict[str, tuple[int, ...]] = {
    finger: tuple(i for i in FLEXION_INDICES if HAND_JOINT_NAMES[i].startswith(f"{finger}_"))
    for finger in FINGERS
}
"""Finger -> its flexion joints (indices into the hand's joints)."""


def style_ik() -> PalmIk:
    """Return the palm kinematics the metrics use (the nominal cell, robot base at the origin).

    Only relative motion of the palm matters, as in ``bench/bench_demonstrator.py``.
    """
    return PalmIk(dataclasses.replace(NOMINAL_LAYOUT, base_pose=Pose((0.0, 0.0, 0.0))))


@dataclass(frozen=True)
class EpisodeStyle:
    """Style of one trajectory (see the module docstring).

    Attributes:
        hand_closure_fraction: Share of flexion joints that take part in grasping.
        fingers_engaged: Fingers flexed beyond :data:`GRASP_FLEXION_RAD` at the grasp instant.
        speed_peak_to_mean: Median over movements of palm peak / mean speed.
        plateau_fraction: Median over movements of the time share above 90 % of peak speed.
        grasp_type: ``pinch``, ``power`` or ``none`` (:func:`grasp_type`).
        grasp_time_s: The grasp instant (s from the trajectory's start).
        fingers_in_contact: Rollouts: the most fingers touching the object at once as the
            hand closes (the twin's contacts, ``evaluation.rollouts.CONTACT_COUNT_WINDOW_S``); None
            for a dataset episode and a trial without a grasp.

    """

    hand_closure_fraction: float
    fingers_engaged: int
    speed_peak_to_mean: float
    plateau_fraction: float
    grasp_type: str
    grasp_time_s: float
    fingers_in_contact: int | None = None

    def metric(self, name: str) -> float:
        """Return one of :data:`STYLE_METRICS`."""
        return float(getattr(self, name))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return dataclasses.asdict(self)


def finger_flexion(hand_positions: NDArray) -> FloatArray:
    """Return per finger the largest flexion of its joints beyond the open hand.

    Args:
        hand_positions: ``(K, 12)`` hand joint positions, ``HAND_JOINT_NAMES`` order.

    Returns:
        ``(K, 4)`` flexion (rad; negative: extended), :data:`FINGERS` order.

    """
    relative = np.asarray(hand_positions, dtype=np.float64) - OPEN_HAND
    return np.stack([relative[:, list(FINGER_JOINTS[f])].max(axis=1) for f in FINGERS], axis=1)


def grasp_type(engaged: Sequence[bool]) -> str:
    """Label a grasp from which fingers are engaged (:data:`FINGERS` order).

    ``pinch``: the thumb and at most one finger; ``power``: the thumb and two or more fingers,
    or three or more fingers; ``none`` otherwise (the hand did not close on anything).
    """
    if len(engaged) != len(FINGERS):
        raise ValueError(f"engaged: expected {len(FINGERS)} flags ({FINGERS}), got {engaged}")
    thumb, fingers = bool(engaged[0]), sum(bool(flag) for flag in engaged[1:])
    if (thumb and fingers >= 2) or fingers >= 3:
        return POWER
    return PINCH if thumb else NO_GRASP


def grasp_instant(times_s: NDArray, flexion: NDArray, grasp_event_s: float | None = None) -> int:
    """Return the sample index of the grasp: the hand's most closed moment.

    Closure is the summed positive flexion of the fingers. With a grasp event (a rollout),
    only the :data:`CLOSURE_SEARCH_WINDOW_S` after it are searched (the fingers keep closing
    after the first contact).
    """
    closure = np.clip(flexion, 0.0, None).sum(axis=1)
    if grasp_event_s is None or not math.isfinite(grasp_event_s):
        return int(np.argmax(closure))
    window = np.flatnonzero(
        (times_s >= grasp_event_s - 1e-9) & (times_s <= grasp_event_s + CLOSURE_SEARCH_WINDOW_S)
    )
    if window.size == 0:  # the event after the last sample: the closest sample
        return int(np.argmin(np.abs(times_s - grasp_event_s)))
    return int(window[np.argmax(closure[window])])


def resample(times_s: NDArray, positions: NDArray, rate_hz: float) -> tuple[FloatArray, FloatArray]:
    """Return the trajectory linearly interpolated at ``rate_hz`` from its first sample.

    Raises:
        StyleError: Shapes disagree, times do not increase, or fewer than 2 samples.

    """
    times = np.asarray(times_s, dtype=np.float64)
    values = np.asarray(positions, dtype=np.float64)
    if values.ndim != 2 or values.shape != (times.size, len(ALL_JOINT_NAMES)):
        raise StyleError(
            f"joint positions {values.shape} at {times.shape} times: expected "
            f"(K, {len(ALL_JOINT_NAMES)})"
        )
    if times.size < 2 or np.any(np.diff(times) <= 0.0):
        raise StyleError(f"{times.size} samples: expected at least 2 at increasing times")
    count = math.floor((times[-1] - times[0]) * rate_hz + 1e-6) + 1
    grid = times[0] + np.arange(count) / rate_hz
    columns = [np.interp(grid, times, values[:, j]) for j in range(values.shape[1])]
    return grid - times[0], np.stack(columns, axis=1)


def episode_style(
    times_s: NDArray,
    joint_positions: NDArray,
    ik: PalmIk,
    rate_hz: float,
    grasp_event_s: float | None = None,
    fingers_in_contact: int | None = None,
) -> EpisodeStyle:
    """Measure one trajectory (see the module docstring).

    Args:
        times_s: ``(K,)`` increasing sample times (s).
        joint_positions: ``(K, 18)`` positions, ``ALL_JOINT_NAMES`` order.
        ik: Palm kinematics (:func:`style_ik`).
        rate_hz: Rate the trajectory is resampled to before it is measured.
        grasp_event_s: Time of the grasp event, same clock as ``times_s`` (rollouts).
        fingers_in_contact: Contact-based finger count at the grasp event (rollouts).

    Raises:
        StyleError: Too short, malformed, or no movement of the palm.

    """
    start = float(np.asarray(times_s, dtype=np.float64)[0]) if len(times_s) else 0.0
    times, positions = resample(times_s, joint_positions, rate_hz)
    metrics = style_metrics(times, positions, ik)
    flexion = finger_flexion(positions[:, N_ARM:])
    event = None if grasp_event_s is None else grasp_event_s - start
    index = grasp_instant(times, flexion, event)
    engaged = flexion[index] > GRASP_FLEXION_RAD
    return EpisodeStyle(
        hand_closure_fraction=metrics.hand_closure_fraction,
        fingers_engaged=int(engaged.sum()),
        speed_peak_to_mean=metrics.speed_peak_to_mean,
        plateau_fraction=metrics.plateau_fraction,
        grasp_type=grasp_type(engaged.tolist()),
        grasp_time_s=float(times[index]),
        fingers_in_contact=fingers_in_contact,
    )


@dataclass
class StyleGroup:
    """The measured trajectories of one group (a dataset, a folder of rollouts).

    Attributes:
        name: Group name (``demonstrator``, ``planner``, a policy).
        source: Where the trajectories came from (a dataset, a rollout folder).
        styles: One per measured trajectory, in source order.
        skipped: Why trajectories were not measured -> how many (``StyleError`` messages).
        keys: Which trajectory each style is (``episode 3``, ``trial_007.npz``).

    """

    name: str
    source: str
    styles: list[EpisodeStyle] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)

    def add(self, key: str, measure: Callable[[], EpisodeStyle]) -> EpisodeStyle | None:
        """Measure trajectory ``key``; count it as skipped when its style cannot be computed."""
        try:
            style = measure()
        except StyleError as error:
            self.skipped[str(error)] = self.skipped.get(str(error), 0) + 1
            return None
        self.styles.append(style)
        self.keys.append(key)
        return style

    def extend(self, other: StyleGroup) -> None:
        """Add another group's measured and skipped trajectories to this one."""
        self.styles += other.styles
        self.keys += other.keys
        for reason, count in other.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    def values(self, metric: str) -> FloatArray:
        """Return one metric of every measured trajectory."""
        return np.array([style.metric(metric) for style in self.styles], dtype=np.float64)

    def grasp_counts(self) -> dict[str, int]:
        """Return trajectories per grasp type (:data:`GRASP_TYPES`)."""
        return {kind: sum(s.grasp_type == kind for s in self.styles) for kind in GRASP_TYPES}


def _joint_columns(names: Sequence[str], where: str) -> list[int]:
    missing = [name for name in ALL_JOINT_NAMES if name not in names]
    if missing:
        raise AnalysisInputError(f"{where}: joint positions lack {missing}")
    return [list(names).index(name) for name in ALL_JOINT_NAMES]


def dataset_group(
    name: str,
    path: str | Path,
    ik: PalmIk,
    rate_hz: float | None = None,
    outcomes: Sequence[str] | None = ("success",),
) -> tuple[StyleGroup, float]:
    """Measure every kept episode of a dataset (its joint positions).

    Args:
        name: Group name.
        path: Dataset file or shard folder.
        ik: Palm kinematics.
        rate_hz: Resampling rate (default: the dataset's control rate).
        outcomes: Episodes kept (as training keeps them; None: all).

    Returns:
        The group and the rate it was measured at.

    Raises:
        AnalysisInputError: Unreadable or empty dataset, or one without joint positions.

    """
    from ..data.sources import HDF5EpisodeSource

    try:
        source = HDF5EpisodeSource(path, outcomes=outcomes)
    except (DatasetError, ValueError) as error:
        raise AnalysisInputError(str(error).splitlines()[0]) from None
    rate = float(rate_hz or source.control_rate_hz)
    columns = _joint_columns(source.joint_names, str(path))
    group = StyleGroup(name, str(path))
    try:
        for episode in range(source.num_episodes()):
            arrays = source.low_dim(episode)
            if JOINT_POS_KEY not in arrays:
                raise AnalysisInputError(
                    f"{path}: episode {episode} has no {obs_path(JOINT_POS_KEY)}: no joint "
                    "trajectory to measure"
                )
            positions = arrays[JOINT_POS_KEY][:, columns]
            times = np.arange(len(positions)) / source.control_rate_hz
            group.add(
                f"episode {episode}", functools.partial(episode_style, times, positions, ik, rate)
            )
    except DatasetError as error:
        raise AnalysisInputError(str(error).splitlines()[0]) from None
    finally:
        source.close()
    return group, rate


def rollout_group(
    name: str, paths: Sequence[str | Path], ik: PalmIk, rate_hz: float, policy: Any = None
) -> StyleGroup:
    """Measure recorded rollouts (:func:`~.rollouts.record_rollouts` files).

    Args:
        name: Group name.
        paths: Trial files.
        ik: Palm kinematics.
        rate_hz: Resampling rate (the datasets' control rate).
        policy: When given, a rollout of another policy is refused.

    Raises:
        AnalysisInputError: No trial file, or a file that is not a rollout of ``policy``.

    """
    if not paths:
        raise AnalysisInputError(f"{name}: no rollout to measure (no trial_NNN.npz)")
    group = StyleGroup(name, str(Path(paths[0]).parent))
    for path in paths:
        try:
            rollout = load_rollout(path, policy)
        except (OSError, ValueError) as error:
            raise AnalysisInputError(str(error).splitlines()[0]) from None
        trace = rollout.trace
        grasp = rollout.events()["grasp"]
        group.add(
            Path(path).name,
            functools.partial(
                episode_style,
                trace.extra("cell_time_s"),
                trace.extra("cell_joint_pos"),
                ik,
                rate_hz,
                None if math.isnan(grasp) else grasp,
                None if math.isnan(grasp) else int(trace.extra("fingers_at_grasp")),
            ),
        )
    return group


def _mean(a: FloatArray, _b: FloatArray) -> float:
    return float(np.mean(a[:, 0]))


def mean_interval(values: NDArray, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Interval:
    """Return the mean and its percentile bootstrap 95 % interval (NaN when empty)."""
    column = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    if column.size == 0:
        return math.nan, math.nan, math.nan
    # bootstrap_interval resamples two sets; the statistic reads the first.
    return bootstrap_interval(_mean, column, column, resamples=resamples, seed=seed)


def summarize(
    group: StyleGroup, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, Interval]:
    """Return metric -> mean with its bootstrap interval (``fingers_in_contact`` for rollouts)."""
    summary = {m: mean_interval(group.values(m), resamples, seed) for m in STYLE_METRICS}
    contacts = [s.fingers_in_contact for s in group.styles if s.fingers_in_contact is not None]
    if contacts:
        summary["fingers_in_contact"] = mean_interval(np.array(contacts), resamples, seed)
    return summary


def pinch_share(group: StyleGroup) -> dict[str, Any]:
    """Return the share of pinches among the group's pinch and power grasps (Wilson 95 %)."""
    counts = group.grasp_counts()
    labelled = counts[PINCH] + counts[POWER]
    low, high = wilson_interval(counts[PINCH], labelled)
    share = counts[PINCH] / labelled if labelled else math.nan
    return {"share": share, "ci95": [low, high], "of": labelled, "counts": counts}


@dataclass(frozen=True)
class Closeness:
    """Whether a policy's mean of one metric is nearer the planner's or the demonstrator's.

    Attributes:
        metric: The metric.
        scale: Distance unit: the pooled within-group standard deviation of the three groups.
        separation: ``|demonstrator mean - planner mean|`` in that unit (how well the metric
            tells the two apart at all).
        to_demonstrator: ``|policy mean - demonstrator mean|`` in pooled std.
        to_planner: ``|policy mean - planner mean|`` in pooled std.
        difference: ``to_demonstrator - to_planner`` with its bootstrap 95 % interval
            (positive: closer to the planner).
        verdict: ``planner`` or ``demonstrator`` when the interval excludes 0, else
            ``undecided``.
        beyond: ``planner`` or ``demonstrator`` when the policy's mean lies outside the two
            references' means, on that one's side ('' between them): closer to a reference
            then also means more extreme than it.

    """

    metric: str
    scale: float
    separation: float
    to_demonstrator: float
    to_planner: float
    difference: Interval
    verdict: str
    beyond: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        value, low, high = self.difference
        return {
            "metric": self.metric,
            "scale": self.scale,
            "separation": self.separation,
            "to_demonstrator": self.to_demonstrator,
            "to_planner": self.to_planner,
            "difference": value,
            "ci95": [low, high],
            "verdict": self.verdict,
            "beyond": self.beyond,
        }


def _pooled_std(groups: Sequence[FloatArray]) -> float:
    dof = sum(len(g) - 1 for g in groups if len(g) > 1)
    if dof == 0:
        return 0.0
    return math.sqrt(
        sum(float(np.var(g, ddof=1)) * (len(g) - 1) for g in groups if len(g) > 1) / dof
    )


def _distance_difference(
    scale: float, policy: FloatArray, demo: FloatArray, planner: FloatArray
) -> float:
    mean = float(policy.mean())
    return (abs(mean - float(demo.mean())) - abs(mean - float(planner.mean()))) / scale


def closeness(
    metric: str,
    policy: NDArray,
    demonstrator: NDArray,
    planner: NDArray,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> Closeness:
    """Compare a policy's mean of ``metric`` with the demonstrator's and the planner's.

    Distances are in units of the three groups' pooled within-group standard deviation (when
    every group is constant: the distance between the demonstrator's and the planner's means).
    The interval of their difference resamples the three groups independently (percentile
    bootstrap) with that scale held fixed: the verdict depends on the difference's sign only.

    Raises:
        ValueError: A group without values.

    """
    groups = [np.asarray(g, dtype=np.float64).ravel() for g in (policy, demonstrator, planner)]
    if any(g.size == 0 for g in groups):
        sizes = [g.size for g in groups]
        raise ValueError(
            f"{metric}: policy, demonstrator and planner values {sizes}, expected >= 1"
        )
    policy_values, demo_values, planner_values = groups
    separation = abs(float(demo_values.mean() - planner_values.mean()))
    scale = _pooled_std(groups) or separation or 1.0
    to_demo = abs(float(policy_values.mean() - demo_values.mean())) / scale
    to_planner = abs(float(policy_values.mean() - planner_values.mean())) / scale
    rng = np.random.default_rng(seed)
    draws = [
        _distance_difference(scale, *(g[rng.integers(0, g.size, g.size)] for g in groups))
        for _ in range(resamples)
    ]
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = (float(v) for v in np.percentile(draws, [tail, 100.0 - tail]))
    verdict = "planner" if low > 0.0 else "demonstrator" if high < 0.0 else "undecided"
    difference = (to_demo - to_planner, low, high)
    beyond = ""
    if max(to_demo, to_planner) > separation / scale + 1e-12:  # not between the two means
        beyond = "planner" if to_planner < to_demo else "demonstrator"
    return Closeness(
        metric, scale, separation / scale, to_demo, to_planner, difference, verdict, beyond
    )


@dataclass
class StyleComparison:
    """A policy's style beside the demonstrator's and the planner's, with the verdicts.

    Attributes:
        groups: Name -> group (``demonstrator``, ``planner``, then the policy).
        policy: Name of the policy's group.
        summaries: Name -> metric -> mean interval.
        pinch: Name -> :func:`pinch_share`.
        verdicts: Metric -> closeness of the policy.

    """

    groups: dict[str, StyleGroup]
    policy: str
    summaries: dict[str, dict[str, Interval]]
    pinch: dict[str, dict[str, Any]]
    verdicts: dict[str, Closeness]

    def conclusion(self) -> str:
        """Return one sentence: on how many metrics the policy is closer to whom."""
        by = {
            v: [m for m, c in self.verdicts.items() if c.verdict == v]
            for v in ("planner", "demonstrator", "undecided")
        }
        share = self.pinch[self.policy]
        grasp = (
            f"pinch share {share['share']:.0%} of {share['of']} grasp postures"
            if share["of"]
            else "no pinch or power grasp posture"
        )
        return (
            f"{self.policy}: closer to the planner on {len(by['planner'])} of "
            f"{len(self.verdicts)} metrics {by['planner']}, to the demonstrator on "
            f"{len(by['demonstrator'])} {by['demonstrator']}, undecided on "
            f"{len(by['undecided'])} {by['undecided']}; {grasp}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "policy": self.policy,
            "groups": {
                name: {
                    "source": group.source,
                    "measured": len(group.styles),
                    "skipped": group.skipped,
                    "metrics": {
                        m: {"mean": v[0], "ci95": [v[1], v[2]]}
                        for m, v in self.summaries[name].items()
                    },
                    "grasp_types": group.grasp_counts(),
                    "pinch_share": self.pinch[name],
                }
                for name, group in self.groups.items()
            },
            "verdicts": {m: c.to_dict() for m, c in self.verdicts.items()},
            "conclusion": self.conclusion(),
        }

    def table(self) -> str:
        """Return the comparison as a text table (several lines, no trailing newline)."""
        names = list(self.groups)
        metrics = list(dict.fromkeys(m for s in self.summaries.values() for m in s))
        width = max(len(m) for m in [*metrics, "pinch share [Wilson CI]", "measured (skipped)"])
        lines = [
            "style: mean [bootstrap 95% CI]",
            f"{'':<{width}}  " + "  ".join(f"{n:<22}" for n in names),
        ]
        for metric in metrics:
            cells = []
            for name in names:
                mean, low, high = self.summaries[name].get(metric, (math.nan,) * 3)
                cells.append("-" if math.isnan(mean) else f"{mean:.2f} [{low:.2f}, {high:.2f}]")
            lines.append(f"{metric:<{width}}  " + "  ".join(f"{c:<22}" for c in cells))
        cells = []
        for name in names:
            share = self.pinch[name]
            low, high = share["ci95"]
            cells.append(
                f"{share['share']:.0%} [{low:.0%}, {high:.0%}] n={share['of']}"
                if share["of"]
                else "- n=0"
            )
        lines.append(
            f"{'pinch share [Wilson CI]':<{width}}  " + "  ".join(f"{c:<22}" for c in cells)
        )
        cells = [f"{len(g.styles)} ({sum(g.skipped.values())})" for g in self.groups.values()]
        lines.append(f"{'measured (skipped)':<{width}}  " + "  ".join(f"{c:<22}" for c in cells))
        lines += [
            "",
            f"{self.policy} closer to whom: d(demonstrator) - d(planner) [95% CI], in pooled "
            "std; separation = |demonstrator - planner|",
        ]
        for metric, verdict in self.verdicts.items():
            value, low, high = verdict.difference
            lines.append(
                f"{metric:<{width}}  {value:+.2f} [{low:+.2f}, {high:+.2f}]  "
                f"separation {verdict.separation:.2f}  -> {verdict.verdict}"
                + (f" (beyond the {verdict.beyond})" if verdict.beyond else "")
            )
        lines += ["", self.conclusion()]
        return "\n".join(lines)


def compare_styles(
    demonstrator: StyleGroup,
    planner: StyleGroup,
    policy: StyleGroup,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> StyleComparison:
    """Summarise three groups and judge, per metric, whom the policy is closer to.

    Raises:
        AnalysisInputError: A group with no measured trajectory.

    """
    groups = {g.name: g for g in (demonstrator, planner, policy)}
    if len(groups) != 3:
        raise AnalysisInputError(
            f"group names {[g.name for g in (demonstrator, planner, policy)]}: expected 3 distinct"
        )
    empty = [g.name for g in groups.values() if not g.styles]
    if empty:
        raise AnalysisInputError(
            f"no measurable trajectory in {empty} (skipped: "
            f"{ {g.name: g.skipped for g in groups.values() if g.name in empty} })"
        )
    verdicts = {
        metric: closeness(
            metric,
            policy.values(metric),
            demonstrator.values(metric),
            planner.values(metric),
            resamples,
            seed=seed,
        )
        for metric in STYLE_METRICS
    }
    return StyleComparison(
        groups=groups,
        policy=policy.name,
        summaries={n: summarize(g, resamples, seed) for n, g in groups.items()},
        pinch={n: pinch_share(g) for n, g in groups.items()},
        verdicts=verdicts,
    )


def plot_intervals(comparison: StyleComparison) -> Mapping[str, Mapping[str, Interval]]:
    """Return the intervals a style figure draws: group -> metric -> interval (and pinch share)."""
    out: dict[str, dict[str, Interval]] = {}
    for name, summary in comparison.summaries.items():
        share = comparison.pinch[name]
        out[name] = {**summary, "pinch_share": (share["share"], *share["ci95"])}
    return out
