"""The latest value of every policy input, with the time it was received, and its freshness.

Sensor callbacks write into an :class:`ObservationBuffer`; the engine reads one consistent
snapshot per step and stops commanding when an input is older than its limit
(:func:`observation_ages`, :func:`stale_inputs`). Images are resized as the training data's
(:func:`r2s2r_policy.data.chunks.resize_image`).

Two clocks: every value keeps the engine-clock time it was *received* (freshness, safety) and
its *source stamp*, the cell time it was taken (a message's ``header.stamp``; the receive time
when none is given). Source stamps say which camera frame an input belongs to: a datasets'
observation at tick ``t`` holds, per stream, the latest sample stamped at or before ``t``
(``r2s2r_recorder.bag_converter``), so the engine waits until the tracker's output for the
newest frame has arrived before it infers (:meth:`ObservationBuffer.tracks_caught_up`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import numpy as np
from r2s2r_dataset.object_track import ObjectTrackLatch, TrackView, type_names_of

from r2s2r_dataset import BELT_SPEED_KEY, JOINT_POS_KEY, OBJECT_TRACK_KEY

from ..data.chunks import resize_image
from ..spec import PolicySpec


def observation_ages(received_s: Mapping[str, float], now_s: float) -> dict[str, float]:
    """Age (s) of every input: ``now_s`` minus the time it was received."""
    return {key: now_s - stamp for key, stamp in received_s.items()}


def stale_inputs(ages_s: Mapping[str, float], max_age_s: float) -> list[str]:
    """Return the inputs older than ``max_age_s``, sorted."""
    return sorted(key for key, age in ages_s.items() if age > max_age_s)


class ObservationBuffer:
    """The latest value of every policy input with the engine-clock time it was received.

    Thread-safe: sensor callbacks write, the worker reads a consistent snapshot.

    Args:
        spec: The policy spec (image keys and sizes, joint names, belt speed use).

    """

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        self._values: dict[str, np.ndarray] = {}
        self._received_s: dict[str, float] = {}
        self._stamps_s: dict[str, float] = {}
        self._image_count: dict[str, int] = {key: 0 for key in spec.image_keys}
        self._joint_index: dict[str, int] = {n: i for i, n in enumerate(spec.joint_names)}
        self.latch: ObjectTrackLatch | None = None
        if spec.uses_object_track:
            self.latch = ObjectTrackLatch(type_names_of(spec.object_track_fields))
        self.required_keys = [
            *spec.image_keys,
            JOINT_POS_KEY,
            *([BELT_SPEED_KEY] if spec.use_belt_speed else []),
            *([OBJECT_TRACK_KEY] if spec.uses_object_track else []),
        ]

    def clear(self) -> None:
        """Forget every observation (e.g. on activation: wait for fresh data)."""
        with self._lock:
            self._values.clear()
            self._received_s.clear()
            self._stamps_s.clear()
            if self.latch is not None:
                self.latch.reset()

    def set_object_tracks(
        self, tracks: Sequence[TrackView], received_s: float, stamp_s: float | None = None
    ) -> None:
        """Take one ``/objects/tracks`` message (every track in it), received at ``received_s``.

        The latch's time base is the receive time (the engine clock), so ``age_s`` is the time
        since the target was last published.

        Raises:
            ValueError: If the policy has no tracked-object input.

        """
        if self.latch is None:
            raise ValueError("object tracks: the policy has no tracked-object input")
        with self._lock:
            self.latch.update(received_s, tracks)
            self._received_s[OBJECT_TRACK_KEY] = received_s
            self._stamps_s[OBJECT_TRACK_KEY] = received_s if stamp_s is None else stamp_s
            self._values[OBJECT_TRACK_KEY] = np.zeros(0, dtype=np.float32)  # made at snapshot

    def set_image(
        self, key: str, rgb: np.ndarray, received_s: float, stamp_s: float | None = None
    ) -> None:
        """Store a uint8 ``(H, W, 3)`` RGB image of camera ``key``, resized to the spec's size.

        Raises:
            KeyError: If the spec has no such camera.
            ValueError: If the image is not uint8 ``(H, W, 3)``.

        """
        height_px, width_px, _ = self.spec.image_shape(key)
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(
                f"image {key!r}: expected uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}"
            )
        resized = np.ascontiguousarray(resize_image(rgb, height_px, width_px))
        with self._lock:
            self._values[key] = resized
            self._received_s[key] = received_s
            self._stamps_s[key] = received_s if stamp_s is None else stamp_s
            self._image_count[key] += 1

    def image_counts(self) -> dict[str, int]:
        """Images received so far per camera key."""
        with self._lock:
            return dict(self._image_count)

    def set_joint_positions(
        self,
        names: Sequence[str],
        positions_rad: Sequence[float] | np.ndarray,
        received_s: float,
        stamp_s: float | None = None,
    ) -> None:
        """Store joint positions given by name (any order, extra joints ignored).

        Raises:
            ValueError: If lengths differ, a policy joint is missing or a value is not finite.

        """
        values = np.asarray(positions_rad, dtype=np.float64)
        if len(names) != values.shape[0]:
            raise ValueError(f"joint state: {len(names)} names but {values.shape[0]} positions")
        lookup = {name: i for i, name in enumerate(names)}
        missing = [name for name in self.spec.joint_names if name not in lookup]
        if missing:
            raise ValueError(f"joint state lacks {missing}")
        ordered = values[[lookup[name] for name in self.spec.joint_names]]
        if not np.all(np.isfinite(ordered)):
            raise ValueError("joint state: non-finite position")
        with self._lock:
            self._values[JOINT_POS_KEY] = ordered
            self._received_s[JOINT_POS_KEY] = received_s
            self._stamps_s[JOINT_POS_KEY] = received_s if stamp_s is None else stamp_s

    def set_belt_speed(
        self, speed_mps: float, received_s: float, stamp_s: float | None = None
    ) -> None:
        """Store the belt speed (m/s along belt x).

        Raises:
            ValueError: If the speed is not finite.

        """
        if not np.isfinite(speed_mps):
            raise ValueError(f"belt speed = {speed_mps}: expected a finite value")
        with self._lock:
            self._values[BELT_SPEED_KEY] = np.array([speed_mps], dtype=np.float32)
            self._received_s[BELT_SPEED_KEY] = received_s
            self._stamps_s[BELT_SPEED_KEY] = received_s if stamp_s is None else stamp_s

    def snapshot(self, now_s: float) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """Return current values at ``now_s`` and receive times (copies; arrays never mutated).

        The tracked-object vector is made here, at ``now_s`` (its ``age_s`` grows with time).
        """
        with self._lock:
            values, received = dict(self._values), dict(self._received_s)
            if self.latch is not None and OBJECT_TRACK_KEY in values:
                values[OBJECT_TRACK_KEY] = self.latch.features(now_s)
            return values, received

    def source_stamps(self) -> dict[str, float]:
        """Source stamp (cell time) of every input's latest value."""
        with self._lock:
            return dict(self._stamps_s)

    def tracks_caught_up(self) -> bool:
        """Whether the tracked object is as new as the newest image (by source stamp).

        True when the policy reads no tracks. The object tracker stamps each message with the
        frame it came from, so this holds once its output for the newest frame has arrived.
        """
        if self.latch is None:
            return True
        with self._lock:
            images = [self._stamps_s[key] for key in self.spec.image_keys if key in self._stamps_s]
            track = self._stamps_s.get(OBJECT_TRACK_KEY)
        if not images or track is None:
            return False
        return track + 1e-6 >= max(images)

    def joint_positions(self) -> np.ndarray | None:
        """Latest joint positions (spec order), or None."""
        with self._lock:
            return self._values.get(JOINT_POS_KEY)
