"""Check the source demonstrations before MimicGen spends attempts on them (issue 34).

MimicGen carries each source demo's reach-and-grasp segment from the source object's moving
frame to the new object's (:mod:`.geometry`); the source frame is the *tracked* object's
motion (:func:`.source.fit_object_motion`). If the tracker that recorded the demos was biased
(e.g. a cell recorded before grounding: 17-26 mm median error with the datasheet camera model,
``docs/architecture.md`` section 3), every transformed segment is offset by that bias and the
generated grasps miss, while the demos themselves succeeded (the person saw the object).

The check: at each demo's grasp moment (:attr:`.annotation.SubtaskAnnotation.grasp_closed`, the
frame the hand counts as closed), the tracked object's position (the fitted motion, what
MimicGen transforms by) against the palm's (FK of the commanded arm joints,
:attr:`.source.SourceDemo.palm_poses`: what MimicGen replays). A person grasps an object with
the palm centred over it, so the *horizontal* offset is small on a good tracker; a consistent
horizontal offset over the demos is a biased tracker. The vertical offset holds the palm's
height above the object's centre by design (6-8 cm for the cell's objects), so it is reported,
not judged.

Thresholds, from demos recorded through ROS on the family's edge twin
(``results/family/twin_outer_fifth_seed1.yaml``, and the edge twin of issue 34): with a
grounded tracker (20 demos, and 4) the horizontal mean offset was 0.2-0.5 cm and its spread
(RMS distance of the demos' offsets from their mean) 0.2-0.3 cm, no single demo above 1.0 cm;
with the ungrounded tracker (6 demos, the operator steering by what they see) 2.2 cm, spread
0.5 cm. Hence a consistent offset is a horizontal mean above :data:`CONSISTENT_OFFSET_M`
(1.5 cm: three times the largest good mean) and above :data:`SPREAD_RATIO` (2) times the
spread. The palm is the *commanded* one: the measured palm lags it along the belt by about
1 cm (the arm's tracking lag at 0.1 m/s), which would shift the good means to ~0.9 cm and
hide half of the bias (1.2 cm on the ungrounded demos).

What such a bias costs: 24 nominal_mimicgen episodes from the 6 ungrounded demos yielded 24 %
of attempts (12 episodes), from the 20 grounded ones 66 % (21 episodes), same seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from r2s2r_datagen.mimicgen.geometry import FloatArray
from r2s2r_datagen.mimicgen.source import SourceDemo, SourceLibrary

CONSISTENT_OFFSET_M = 0.015
"""Horizontal mean offset (tracked object − palm at grasp) above which the tracker is suspect."""

SPREAD_RATIO = 2.0
"""A mean offset counts as consistent when it exceeds this many times the demos' spread."""

TRACK_GAP_WARN_S = 1.0
"""A demo whose track ended this long before the grasp has its grasp-time object extrapolated."""

Verdict = Literal["ok", "consistent_offset", "large_offset", "scattered", "no_demos"]
"""``ok``; ``consistent_offset`` (a biased tracker, likely); ``large_offset`` (one demo only,
offset large, consistency unknown); ``scattered`` (large offsets in no common direction);
``no_demos`` (nothing to check)."""


@dataclass(frozen=True)
class GraspOffset:
    """Where the tracked object sat relative to the palm when the hand closed, in one demo.

    Attributes:
        demo_index: The demo's episode index in the source dataset.
        object_type: The demo's object type.
        grasp_time_s: Time of the hand-closed frame.
        offset_m: ``(3,)`` tracked object (fitted motion) − palm (FK of the commands), base_link.
        track_gap_s: Grasp time − time of the last valid track frame at or before it.

    """

    demo_index: int
    object_type: str
    grasp_time_s: float
    offset_m: FloatArray
    track_gap_s: float

    @property
    def horizontal_m(self) -> float:
        """Length of the offset's horizontal (base_link xy) part."""
        return float(np.linalg.norm(self.offset_m[:2]))

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (centimetres rounded to 0.1 mm)."""
        return {
            "demo": self.demo_index,
            "object_type": self.object_type,
            "grasp_time_s": round(self.grasp_time_s, 3),
            "offset_m": [round(float(v), 4) for v in self.offset_m],
            "horizontal_m": round(self.horizontal_m, 4),
            "track_gap_s": round(self.track_gap_s, 3) if np.isfinite(self.track_gap_s) else None,
        }


@dataclass(frozen=True)
class SourceCheck:
    """The source demos' grasp offsets, their statistics and a verdict.

    Attributes:
        offsets: One per usable demo.
        skipped: Skip reason → count of the demos the library left out (``no_object_track``:
            demos without a usable track).
        mean_offset_m: ``(3,)`` mean of the offsets (zeros without demos).
        spread_m: RMS horizontal distance of the offsets from their mean.
        verdict: See :data:`Verdict`.
        message: One line for the user (empty when ``ok`` and nothing else to say).
        notes: Further lines (demos without tracks, tracks that ended early).

    """

    offsets: list[GraspOffset]
    skipped: dict[str, int]
    mean_offset_m: FloatArray
    spread_m: float
    verdict: Verdict
    message: str
    notes: list[str] = field(default_factory=list)

    @property
    def mean_horizontal_m(self) -> float:
        """Length of the mean offset's horizontal part."""
        return float(np.linalg.norm(self.mean_offset_m[:2]))

    @property
    def warns(self) -> bool:
        """Whether the check found something MimicGen's yield will suffer from."""
        return self.verdict in ("consistent_offset", "large_offset", "scattered")

    def lines(self) -> list[str]:
        """Return the message and the notes (what a log shows)."""
        return [line for line in (self.message, *self.notes) if line]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (for the generation summary)."""
        return {
            "verdict": self.verdict,
            "message": self.message,
            "notes": list(self.notes),
            "demos": len(self.offsets),
            "skipped": dict(self.skipped),
            "mean_offset_m": [round(float(v), 4) for v in self.mean_offset_m],
            "mean_horizontal_m": round(self.mean_horizontal_m, 4),
            "spread_m": round(self.spread_m, 4),
            "thresholds": {
                "consistent_offset_m": CONSISTENT_OFFSET_M,
                "spread_ratio": SPREAD_RATIO,
            },
            "offsets": [o.as_dict() for o in self.offsets],
        }


def grasp_offset(demo: SourceDemo) -> GraspOffset:
    """Tracked object − palm at the demo's grasp moment (see the module docstring).

    The track gap is 0 when the demo kept no track validity (unknown).
    """
    closed = demo.annotation.grasp_closed
    time_s = float(demo.times_s[closed])
    offset = demo.motion.position_at(time_s) - demo.palm_poses[closed, :3, 3]
    gap = 0.0
    if demo.object_valid is not None:
        frames = np.flatnonzero(np.asarray(demo.object_valid, dtype=bool)[: closed + 1])
        gap = time_s - float(demo.times_s[frames[-1]]) if frames.size else float("inf")
    return GraspOffset(demo.index, demo.object_type, time_s, np.asarray(offset, float), gap)


def _cm(vector: FloatArray) -> str:
    return "[" + ", ".join(f"{100.0 * float(v):+.1f}" for v in vector) + "] cm"


def summarize_offsets(
    offsets: Sequence[GraspOffset],
    skipped: Mapping[str, int] | None = None,
    consistent_offset_m: float = CONSISTENT_OFFSET_M,
    spread_ratio: float = SPREAD_RATIO,
) -> SourceCheck:
    """Mean, spread and verdict over the demos' grasp offsets.

    Args:
        offsets: One per demo (:func:`grasp_offset`).
        skipped: The library's skip counts (demos without tracks are named in the notes).
        consistent_offset_m: See :data:`CONSISTENT_OFFSET_M`.
        spread_ratio: See :data:`SPREAD_RATIO`.

    """
    skipped = dict(skipped or {})
    notes = []
    untracked = skipped.get("no_object_track", 0)
    if untracked:
        notes.append(
            f"{untracked} source demo(s) have no usable object track (obs/object_pose missing "
            "or invalid before the grasp): not used by MimicGen"
        )
    late = [o for o in offsets if o.track_gap_s > TRACK_GAP_WARN_S]
    if late:
        notes.append(
            f"{len(late)} source demo(s) lost the object's track more than "
            f"{TRACK_GAP_WARN_S:.0f} s before the grasp (demos "
            f"{[o.demo_index for o in late][:10]}): their object at grasp is extrapolated"
        )
    if not offsets:
        return SourceCheck(
            [], skipped, np.zeros(3), 0.0, "no_demos", "no usable source demo to check", notes
        )
    stacked = np.stack([o.offset_m for o in offsets])
    mean = stacked.mean(axis=0)
    spread = float(np.sqrt(np.mean(np.sum((stacked[:, :2] - mean[:2]) ** 2, axis=1))))
    horizontal = float(np.linalg.norm(mean[:2]))
    what = (
        f"mean {_cm(mean)}, spread {100.0 * spread:.1f} cm over {len(offsets)} demos; "
        "z holds the palm's height above the object"
    )
    verdict: Verdict
    if (
        len(offsets) >= 2
        and horizontal > consistent_offset_m
        and horizontal > spread_ratio * spread
    ):
        verdict = "consistent_offset"
        message = (
            f"source demos' tracked object sits {100.0 * horizontal:.1f} cm from the palm at "
            f"grasp, consistently ({what}): the tracker that recorded them is likely biased "
            "(a cell recorded before grounding?); MimicGen transforms segments by these poses, "
            "so its grasps will be off by as much and many will miss"
        )
    elif len(offsets) == 1 and horizontal > consistent_offset_m:
        verdict = "large_offset"
        message = (
            f"the only source demo's tracked object sits {100.0 * horizontal:.1f} cm from the "
            f"palm at grasp ({what}): with one demo a biased tracker cannot be told from an "
            "off-centre grasp; MimicGen transforms segments by this pose, so its episodes may miss"
        )
    elif (median := float(np.median([o.horizontal_m for o in offsets]))) > consistent_offset_m:
        verdict = "scattered"
        message = (
            f"source demos' tracked object sits {100.0 * median:.1f} cm "
            f"(median) from the palm at grasp, in no common direction ({what}): a noisy "
            "tracker or off-centre grasps; MimicGen's transformed grasps will scatter as much"
        )
    else:
        verdict = "ok"
        message = ""
    return SourceCheck(list(offsets), skipped, mean, spread, verdict, message, notes)


def check_source_demos(
    library: SourceLibrary,
    consistent_offset_m: float = CONSISTENT_OFFSET_M,
    spread_ratio: float = SPREAD_RATIO,
) -> SourceCheck:
    """Check every usable demo of ``library`` (see the module docstring).

    Args:
        library: The source demos (and the skip counts).
        consistent_offset_m: See :data:`CONSISTENT_OFFSET_M`.
        spread_ratio: See :data:`SPREAD_RATIO`.

    """
    offsets = [grasp_offset(demo) for demo in library.demos]
    return summarize_offsets(offsets, library.skipped, consistent_offset_m, spread_ratio)


def check_configured_sources(options: Mapping[str, Any]) -> SourceCheck:
    """Check the source demos that behavior ``mimicgen`` would use with ``options``.

    Args:
        options: The configurations file's ``behavior_options.mimicgen`` (as
            :func:`.generator.make_generator` takes them).

    Raises:
        r2s2r_datagen.generator.GeneratorUnavailableError: No readable source dataset or no
            usable demo in it.
        r2s2r_common.config.ConfigError: Unknown option or invalid value.

    """
    from r2s2r_datagen.mimicgen.generator import make_generator

    return check_source_demos(make_generator(options).library)
