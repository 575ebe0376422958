"""How well the mirror agrees with the real cell, free of ROS: the live grounding check.

The mirror (:class:`~r2s2r_sim.mirror.CellMirror`) runs on the nominal or grounded world; the
real cell publishes what its own description and perception say. Three measurements compare
the two while the cell runs:

- **palm error** (:class:`TransformBuffer`, :class:`PositionHistory`): the palm where the real
  cell's TF puts it (``world -> palm_link`` chained through ``/tf_static`` and ``/tf``) against
  the mirror's palm for the *same* joint state (matched by stamp, so motion does not count as
  error). The mirror keeps its own world's mounts, so a cell whose static frames differ from
  the mirror's world (another grounding, a moved base) shows here.
- **object error** (:class:`BeltObjectCheck`): each tracked object while it rides the belt,
  against the object the mirror's world predicts: resting on the mirror's belt surface and
  carried along belt ``x`` at the measured belt speed (``/belt/speed``). The prediction's
  in-plane start is the least-squares fit over the object's track so far (a constant in-plane
  offset of the whole perception is not observable this way); what is observable is the height
  off the mirror's belt, motion off the belt's axis and travel at another speed than the belt's
  (an extrinsic that drifted, a belt that moved, a wrong roller radius).
- **static scene** (:func:`static_scene_match`): the cell's head depth image against the
  mirror's render of the same view, as grids of per-cell medians
  (:mod:`r2s2r_world.cell_identity`). It needs no object on the belt and no motion, so it
  checks the grounding when the object check has nothing to compare: another cell's artifact
  or a camera that was knocked shows as a static scene that differs.
- **input ages** (:func:`input_ages`): seconds since each input last arrived.

The status says what each check compared, and when one had nothing to compare.

:func:`mirror_status` turns them into one level and message against :class:`MirrorLimits`.
Poses are 4x4 homogeneous transforms; positions in metres, in ``world`` (REP 103/105).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt
from r2s2r_description.transforms import invert_transform, make_transform, quat_to_matrix
from r2s2r_world.cell_identity import (
    StaticSceneLimits,
    StaticSceneMatch,
    compare_static_depth,
    static_depth_grid,
)

from r2s2r_sim.backend import FloatArray

Point = Sequence[float] | FloatArray
"""A 3-D position or vector: a sequence of floats or a (3,) array."""


class MirrorCheckError(ValueError):
    """A transform or measurement the check cannot use."""


class Level(IntEnum):
    """Diagnostic levels (the values of ``diagnostic_msgs/DiagnosticStatus``)."""

    OK = 0
    WARN = 1
    ERROR = 2


@dataclass(frozen=True)
class StampedTransform:
    """One ``parent <- child`` transform as TF carries it.

    Attributes:
        parent: Parent frame.
        matrix: 4x4 ``parent <- child``.
        stamp_ns: Its stamp (ns); ``None`` for a static transform (``/tf_static``).

    """

    parent: str
    matrix: FloatArray
    stamp_ns: int | None


class TransformBuffer:
    """The newest transform of every child frame, chained on request (a minimal TF listener).

    Args:
        max_depth: Longest chain followed (a loop in the tree is reported, not followed).

    """

    def __init__(self, max_depth: int = 64) -> None:
        self._by_child: dict[str, StampedTransform] = {}
        self._max_depth = max_depth

    def set_transform(
        self,
        parent: str,
        child: str,
        translation_m: Point,
        quat_wxyz: Sequence[float] | FloatArray,
        stamp_ns: int | None,
    ) -> None:
        """Store ``parent <- child`` (replacing the child's previous transform).

        Raises:
            MirrorCheckError: Empty frame names, a non-finite value or a zero quaternion.

        """
        if not parent or not child:
            raise MirrorCheckError(f"transform {parent!r} -> {child!r}: empty frame name")
        values = np.asarray([*translation_m, *quat_wxyz], dtype=float)
        if values.shape != (7,) or not np.all(np.isfinite(values)):
            raise MirrorCheckError(f"transform {parent} -> {child}: not finite")
        if not np.linalg.norm(values[3:]) > 1e-9:
            raise MirrorCheckError(f"transform {parent} -> {child}: zero quaternion")
        matrix = make_transform(values[:3].tolist(), quat_to_matrix(values[3:].tolist()))
        self._by_child[child] = StampedTransform(parent, matrix, stamp_ns)

    def lookup(self, root: str, frame: str) -> tuple[FloatArray, int | None]:
        """Pose of ``frame`` in ``root`` and the stamp of its moving transforms.

        Returns:
            The 4x4 ``root <- frame`` and the common stamp (ns) of the non-static transforms
            on the chain (``None`` when all are static).

        Raises:
            MirrorCheckError: The chain does not reach ``root``, loops, or mixes stamps (the
                moving transforms come from different joint states).

        """
        pose = np.eye(4)
        stamps: set[int] = set()
        current = frame
        for _ in range(self._max_depth):
            if current == root:
                if len(stamps) > 1:
                    raise MirrorCheckError(
                        f"{root} -> {frame}: moving transforms of {len(stamps)} different stamps"
                    )
                return pose, next(iter(stamps), None)
            link = self._by_child.get(current)
            if link is None:
                raise MirrorCheckError(f"{root} -> {frame}: no transform to {current!r}")
            pose = link.matrix @ pose
            if link.stamp_ns is not None:
                stamps.add(link.stamp_ns)
            current = link.parent
        raise MirrorCheckError(f"{root} -> {frame}: no root within {self._max_depth} frames")


class PositionHistory:
    """Recent positions by stamp (the mirror's palm per applied joint state).

    Args:
        max_entries: Entries kept (oldest dropped first).

    Raises:
        ValueError: If ``max_entries`` is not positive.

    """

    def __init__(self, max_entries: int = 2000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries = {max_entries}: expected ≥ 1")
        self._entries: deque[tuple[int, FloatArray]] = deque(maxlen=max_entries)

    def add(self, stamp_ns: int, position_m: Point) -> None:
        """Record a position at ``stamp_ns`` (stamps are expected in increasing order)."""
        self._entries.append((stamp_ns, np.asarray(position_m, dtype=float).copy()))

    def at(self, stamp_ns: int, tolerance_ns: int) -> FloatArray | None:
        """Return the position nearest ``stamp_ns``, or None if none is within ``tolerance_ns``."""
        best: tuple[int, FloatArray] | None = None
        for stamp, position in reversed(self._entries):
            gap = abs(stamp - stamp_ns)
            if gap <= tolerance_ns and (best is None or gap < best[0]):
                best = (gap, position)
            if stamp < stamp_ns - tolerance_ns:
                break
        return None if best is None else best[1]


def palm_error_m(tf_palm_m: Point, mirror_palm_m: Point) -> float:
    """Distance (m) between the TF palm and the mirror's palm (same frame, same joint state)."""
    return float(np.linalg.norm(np.asarray(tf_palm_m, float) - np.asarray(mirror_palm_m, float)))


@dataclass(frozen=True)
class BeltGeometry:
    """The mirror world's belt as the object check uses it.

    Attributes:
        pose: 4x4 ``world <- belt_link`` (top surface centre, x = travel).
        length_m: Belt length along x.
        width_m: Belt width along y.
        rest_height_m: Object type -> height of its centre above the belt surface at rest.

    """

    pose: FloatArray
    length_m: float
    width_m: float
    rest_height_m: Mapping[str, float]


@dataclass(frozen=True)
class ObjectResidual:
    """One tracked object against the mirror's belt-carried object.

    Attributes:
        track_id: The real cell's track id.
        object_type: Its type.
        predicted_m: (3,) the mirror's object centre in ``world``.
        error_m: Distance between the track and ``predicted_m`` now.
        mean_error_m: Mean of ``error_m`` over the last samples (the reported figure).
        samples: Track samples of this object on the belt so far.

    """

    track_id: int
    object_type: str
    predicted_m: FloatArray
    error_m: float
    mean_error_m: float
    samples: int


@dataclass
class _RidingObject:
    object_type: str
    offset_sum: FloatArray = field(default_factory=lambda: np.zeros(2))
    samples: int = 0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=10))


class BeltObjectCheck:
    """Tracked objects against objects riding the mirror's belt (see the module docstring).

    Args:
        belt: The mirror world's belt.
        lifted_m: A track this far above its rest height (or below) is off the belt (in the
            hand, falling): not compared, and its fit starts afresh when it is back.
        window: Samples averaged into ``mean_error_m``.

    Raises:
        ValueError: A non-positive ``lifted_m`` or ``window``.

    """

    def __init__(self, belt: BeltGeometry, lifted_m: float = 0.03, window: int = 10) -> None:
        if not lifted_m > 0.0 or window < 1:
            raise ValueError(f"lifted_m = {lifted_m}, window = {window}: expected both > 0")
        self.belt = belt
        self._belt_from_world = invert_transform(belt.pose)
        self._lifted_m = lifted_m
        self._window = window
        self._travel_m = 0.0
        self._last_stamp_s: float | None = None
        self._speed_mps: float | None = None
        self._objects: dict[int, _RidingObject] = {}

    def set_belt_speed(self, speed_mps: float) -> None:
        """Set the belt's measured surface speed from now on (m/s along belt x).

        Raises:
            MirrorCheckError: A speed that is not finite.

        """
        if not math.isfinite(speed_mps):
            raise MirrorCheckError(f"belt speed {speed_mps}: not finite")
        self._speed_mps = float(speed_mps)

    @property
    def has_belt_speed(self) -> bool:
        """Whether a belt speed has been given (objects are compared only then)."""
        return self._speed_mps is not None

    def _advance(self, stamp_s: float) -> None:
        if self._last_stamp_s is not None and self._speed_mps is not None:
            self._travel_m += self._speed_mps * max(0.0, stamp_s - self._last_stamp_s)
        self._last_stamp_s = (
            stamp_s if self._last_stamp_s is None else max(stamp_s, self._last_stamp_s)
        )

    def update(
        self, stamp_s: float, tracks: Sequence[tuple[int, str, Point]]
    ) -> list[ObjectResidual]:
        """Compare one track message (positions in ``world``) with the belt-carried objects.

        Args:
            stamp_s: The message's stamp (the cell's clock).
            tracks: ``(track id, object type, (3,) centre in world)`` per track.

        Returns:
            One residual per track on the belt (types the belt geometry does not know, tracks
            off the belt, and every track before the first belt speed are left out).

        """
        self._advance(stamp_s)
        seen: set[int] = set()
        residuals = []
        for track_id, object_type, position in tracks:
            rest = self.belt.rest_height_m.get(object_type)
            point = np.asarray(position, dtype=float)
            if rest is None or point.shape != (3,) or not np.all(np.isfinite(point)):
                continue
            local = (self._belt_from_world @ np.append(point, 1.0))[:3]
            on_belt = (
                abs(local[0]) <= self.belt.length_m / 2
                and abs(local[1]) <= self.belt.width_m / 2
                and abs(local[2] - rest) <= self._lifted_m
            )
            if not on_belt or self._speed_mps is None:
                continue
            seen.add(track_id)
            riding = self._objects.get(track_id)
            if riding is None or riding.object_type != object_type:
                riding = self._objects[track_id] = _RidingObject(object_type)
            # The object's start on the belt: where it would be with no travel so far.
            riding.offset_sum += local[:2] - (self._travel_m, 0.0)
            riding.samples += 1
            start = riding.offset_sum / riding.samples
            predicted_local = np.array([start[0] + self._travel_m, start[1], rest])
            error_m = float(np.linalg.norm(local - predicted_local))
            riding.recent.append(error_m)
            predicted = (self.belt.pose @ np.append(predicted_local, 1.0))[:3]
            residuals.append(
                ObjectResidual(
                    track_id,
                    object_type,
                    predicted,
                    error_m,
                    float(np.mean(riding.recent)),
                    riding.samples,
                )
            )
        for track_id in set(self._objects) - seen:
            del self._objects[track_id]
        return residuals


def rest_heights_m(objects: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Object type -> centre height above a surface it stands on (half its z extent).

    Args:
        objects: Object type -> full extents (x, y, z) in metres (``ObjectType.size_m``).

    """
    return {name: float(size[2]) / 2.0 for name, size in objects.items()}


def input_ages(
    last_received_s: Mapping[str, float | None], now_s: float
) -> dict[str, float | None]:
    """Seconds since each input last arrived (None for one never received)."""
    return {
        name: None if received is None else max(0.0, now_s - received)
        for name, received in last_received_s.items()
    }


def static_scene_match(
    cell_depth_m: npt.ArrayLike, mirror_depth_m: npt.ArrayLike, limits: StaticSceneLimits
) -> StaticSceneMatch:
    """Compare the cell's head depth image with the mirror's render of the same camera.

    Raises:
        MirrorCheckError: Images that cannot be compared (not 2-D, smaller than the grid).

    """
    try:
        return compare_static_depth(
            static_depth_grid(mirror_depth_m), static_depth_grid(cell_depth_m), limits
        )
    except ValueError as error:
        raise MirrorCheckError(f"static scene: {error}") from None


@dataclass(frozen=True)
class MirrorLimits:
    """What makes the mirror's status a warning.

    Attributes:
        palm_error_m: Palm distance (TF vs mirror) above which it warns.
        object_error_m: Object error (track vs belt-carried object) above which it warns.
        input_timeout_s: Input name -> age above which it is stale (never received = stale).

    """

    palm_error_m: float
    object_error_m: float
    input_timeout_s: Mapping[str, float]


@dataclass(frozen=True)
class MirrorMeasurement:
    """The measurements of one diagnostics period.

    Attributes:
        palm_error_m: TF palm vs mirror palm (None: no matched sample yet).
        object_error_m: Largest ``mean_error_m`` over the objects on the belt (None: none).
        input_ages_s: Input name -> age (None: never received).
        static_scene: The last static-scene comparison (None: none made yet).

    """

    palm_error_m: float | None
    object_error_m: float | None
    input_ages_s: Mapping[str, float | None]
    static_scene: StaticSceneMatch | None = None


def mirror_status(measurement: MirrorMeasurement, limits: MirrorLimits) -> tuple[Level, str]:
    """Return the level and one-line message of the mirror's diagnostic status.

    Stale inputs come first (a mirror that does not follow cannot be judged), then the palm,
    object and static-scene errors; every reason is named in the message. When all agree, the
    message says what was compared and what had nothing to compare.
    """
    stale = [
        name
        for name, timeout_s in limits.input_timeout_s.items()
        if (age := measurement.input_ages_s.get(name)) is None or age > timeout_s
    ]
    scene = measurement.static_scene
    scene_reason = (
        f"static scene {scene.median_mm:.0f} mm median off the mirror's view, "
        f"{100.0 * scene.far_fraction:.0f} % of it far (another cell's grounding, or a "
        "moved camera)"
        if scene is not None and scene.verdict == "different"
        else None
    )
    if stale:
        # The static scene needs no motion to judge: its error is named even then.
        extra = f"; mirror error: {scene_reason}" if scene_reason else ""
        return Level.WARN, f"stale: no recent {', '.join(stale)}{extra}"
    reasons = []
    palm, objects = measurement.palm_error_m, measurement.object_error_m
    if palm is not None and palm > limits.palm_error_m:
        reasons.append(
            f"palm {palm * 1000:.1f} mm off the cell's TF (limit {limits.palm_error_m * 1000:.1f})"
        )
    if objects is not None and objects > limits.object_error_m:
        reasons.append(
            f"tracked object {objects * 1000:.1f} mm off the mirror's belt "
            f"(limit {limits.object_error_m * 1000:.1f})"
        )
    if scene_reason:
        reasons.append(scene_reason)
    if reasons:
        return Level.WARN, "mirror error: " + "; ".join(reasons)
    compared = [
        "palm: no matched sample yet" if palm is None else f"palm {palm * 1000:.1f} mm",
        "objects: none on the belt to compare"
        if objects is None
        else f"objects {objects * 1000:.1f} mm",
        "static scene: no head depth compared yet"
        if scene is None
        else f"static scene {scene.summary()}",
    ]
    return Level.OK, f"following the real cell ({'; '.join(compared)})"
