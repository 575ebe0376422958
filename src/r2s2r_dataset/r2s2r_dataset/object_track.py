"""The tracked-object observation: what a consumer of ``/objects/tracks`` knows at time t.

The object tracker publishes the objects it sees on the belt (id, type, pose and velocity in
``base_link``, stamped with the camera frame they came from). A policy needs a fixed-size vector
every control step, also while the object is in the hand or the bin, where the tracker sees
nothing. :class:`ObjectTrackLatch` turns the stream of track lists into that vector the same
way everywhere it is made, so real data, simulated data and deployment agree:

- real datasets: from the ``/objects/tracks`` messages of a bag (``bag_to_dataset``);
- simulated datasets: from the same tracker core run on rendered images (``r2s2r_datagen``);
- deployment: the policy node and the in-process evaluator feed it every track message.

Rules (no simulator truth, no episode metadata): the latch follows one *target* track, the
oldest confirmed track (smallest id) when it has none. While the target is in the latest
message its state is copied (``visible`` = 1); when it is missing, the last state is held
(``visible`` = 0) and ``age_s`` grows. When the target is missing and another track is
present, that one becomes the target. The type is the tracker's type of the target.

Vector layout (:func:`object_track_fields`): position (m) and velocity (m/s) in ``base_link``,
yaw as (cos, sin) of 2·yaw and of 4·yaw (continuous for the yaw symmetries of the catalogue's
shapes: an oblong box repeats every 180°, a square one every 90°; which one applies follows
from the type columns, so the vector needs no catalogue), ``visible``, ``age_s`` (time since
the target was last in a message, capped at ``max_age_s``; ``max_age_s`` before any track),
``has_track`` (a target was ever seen), then one-hot type columns. All zeros but ``age_s``
before any track.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

TRACKER_SOURCE = "object_tracker"
"""``object_track_source`` of data made by the object tracker (bags, or rendered images)."""

BASE_FIELDS: tuple[str, ...] = (
    "x_m",
    "y_m",
    "z_m",
    "vx_mps",
    "vy_mps",
    "vz_mps",
    "yaw2_cos",
    "yaw2_sin",
    "yaw4_cos",
    "yaw4_sin",
    "visible",
    "age_s",
    "has_track",
)
"""Columns before the one-hot type columns."""

_VISIBLE, _AGE, _HAS_TRACK = (BASE_FIELDS.index(n) for n in ("visible", "age_s", "has_track"))

DEFAULT_MAX_AGE_S = 5.0
"""Cap of ``age_s``: older than this is 'long ago' for a pick that takes a few seconds."""


def object_track_fields(type_names: Sequence[str]) -> list[str]:
    """Column names of the vector for a catalogue of ``type_names`` (order kept)."""
    if not type_names:
        raise ValueError("object_track_fields: expected at least one object type")
    if len(set(type_names)) != len(type_names):
        raise ValueError(f"object_track_fields: duplicate type names in {list(type_names)}")
    return [*BASE_FIELDS, *(f"type_{name}" for name in type_names)]


def type_names_of(fields: Sequence[str]) -> list[str]:
    """Object type names encoded by a field list (inverse of :func:`object_track_fields`).

    Raises:
        ValueError: If ``fields`` is not a layout made by :func:`object_track_fields`.

    """
    head = list(fields[: len(BASE_FIELDS)])
    names = [f[len("type_") :] for f in fields[len(BASE_FIELDS) :]]
    if head != list(BASE_FIELDS) or not names or object_track_fields(names) != list(fields):
        raise ValueError(f"object_track fields {list(fields)} are not an object-track layout")
    return names


@dataclass(frozen=True)
class TrackView:
    """One track as published on ``/objects/tracks`` (poses in ``base_link``).

    Attributes:
        track_id: Tracker id.
        type_name: Tracker type name.
        position_m: (3,) position.
        velocity_mps: (3,) velocity.
        yaw_rad: Yaw about ``base_link`` z.

    """

    track_id: int
    type_name: str
    position_m: NDArray[np.float64]
    velocity_mps: NDArray[np.float64]
    yaw_rad: float


def yaw_from_quat(quat_wxyz: Sequence[float]) -> float:
    """Yaw (rad) about z of a unit quaternion ``(w, x, y, z)``."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def track_view_from_msg(track: Any) -> TrackView:
    """Convert an ``r2s2r_interfaces/ObjectTrack`` message to a :class:`TrackView`.

    The one conversion for the live node (``policy_inference``) and the bag converter: the
    message is read by its fields (``id``, ``object_type``, ``pose``, ``twist``), so an rclpy
    message and one deserialized from a bag convert alike. Its pose is in the frame of its
    ``ObjectTrackArray`` (``base_link``).
    """
    p, q, v = track.pose.position, track.pose.orientation, track.twist.linear
    return TrackView(
        track_id=int(track.id),
        type_name=str(track.object_type),
        position_m=np.array([p.x, p.y, p.z], dtype=np.float64),
        velocity_mps=np.array([v.x, v.y, v.z], dtype=np.float64),
        yaw_rad=yaw_from_quat((q.w, q.x, q.y, q.z)),
    )


class ObjectTrackLatch:
    """Turns track lists into the fixed-size tracked-object vector (see the module docstring).

    Args:
        type_names: Catalogue type names, in column order.
        max_age_s: Cap of ``age_s``.

    Raises:
        ValueError: On an empty or duplicate type list, or a non-positive ``max_age_s``.

    """

    def __init__(
        self,
        type_names: Sequence[str],
        max_age_s: float = DEFAULT_MAX_AGE_S,
    ) -> None:
        self.fields = object_track_fields(type_names)
        if not max_age_s > 0.0:
            raise ValueError(f"max_age_s = {max_age_s}: expected > 0")
        self.type_names = list(type_names)
        self.max_age_s = float(max_age_s)
        self._target: TrackView | None = None
        self._target_stamp_s = 0.0
        self._visible = False
        self.unknown_types = 0

    @property
    def width(self) -> int:
        """Length of the vector."""
        return len(self.fields)

    def reset(self) -> None:
        """Forget the target (a new trial)."""
        self._target = None
        self._target_stamp_s = 0.0
        self._visible = False

    def update(self, stamp_s: float, tracks: Sequence[TrackView]) -> None:
        """Take one track message (its stamp and every track in it)."""
        known = [t for t in tracks if t.type_name in self.type_names]
        self.unknown_types += len(tracks) - len(known)
        current = None
        if self._target is not None:
            current = next((t for t in known if t.track_id == self._target.track_id), None)
        if current is None and known:
            current = min(known, key=lambda t: t.track_id)
        if current is None:
            self._visible = False
            return
        self._target = current
        self._target_stamp_s = float(stamp_s)
        self._visible = True

    def features(self, now_s: float) -> NDArray[np.float32]:
        """Return the vector at ``now_s`` (``float32``, :attr:`fields` order)."""
        out = np.zeros(self.width, dtype=np.float32)
        target = self._target
        if target is None:
            out[_AGE] = self.max_age_s
            return out
        out[0:3] = target.position_m
        out[3:6] = target.velocity_mps
        out[6] = math.cos(2.0 * target.yaw_rad)
        out[7] = math.sin(2.0 * target.yaw_rad)
        out[8] = math.cos(4.0 * target.yaw_rad)
        out[9] = math.sin(4.0 * target.yaw_rad)
        out[_VISIBLE] = 1.0 if self._visible else 0.0
        out[_AGE] = min(max(now_s - self._target_stamp_s, 0.0), self.max_age_s)
        out[_HAS_TRACK] = 1.0
        out[len(BASE_FIELDS) + self.type_names.index(target.type_name)] = 1.0
        return out
