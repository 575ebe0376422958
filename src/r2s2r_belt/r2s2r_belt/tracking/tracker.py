"""Multi-object tracking on the belt: constant-velocity Kalman filters fed by the belt speed.

Each track is a 6-state (position, velocity) Kalman filter in the base frame. Between
detections it predicts with its velocity; while its object rests on the belt the belt velocity
(``/belt/speed`` along ``belt_link`` x) enters as a measurement of that velocity, so a track keeps
moving with the belt through missed detections (occlusion by the hand). Detections are assigned
to tracks by the Hungarian method on gated distances (scipy ``linear_sum_assignment``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from r2s2r_description.transforms import invert_transform
from scipy.optimize import linear_sum_assignment

from r2s2r_belt.tracking.config import TrackingConfig
from r2s2r_belt.tracking.detection import Detection
from r2s2r_belt.tracking.geometry import FloatArray

_UNASSIGNED_COST = 1e6


@dataclass
class Track:
    """One tracked object.

    Attributes:
        track_id: Unique id (never reused within a tracker).
        state: (6,) position (m) and velocity (m/s) in the base frame.
        covariance: 6x6 state covariance.
        rotation: 3x3 orientation from the latest detection.
        yaw_rad: Yaw from the latest detection.
        type_votes: Detections per type name.
        hits: Detections assigned so far.
        last_update_s: Stamp of the latest assigned detection.
        last_predict_s: Stamp the state refers to.
        on_belt: Whether the latest detection rested on the belt.

    """

    track_id: int
    state: FloatArray
    covariance: FloatArray
    rotation: FloatArray
    yaw_rad: float
    type_votes: Counter[str] = field(default_factory=Counter)
    hits: int = 0
    last_update_s: float = 0.0
    last_predict_s: float = 0.0
    on_belt: bool = True

    @property
    def type_name(self) -> str:
        """Majority type over the assigned detections."""
        return self.type_votes.most_common(1)[0][0]

    @property
    def position_m(self) -> FloatArray:
        """(3,) position in the base frame."""
        return self.state[:3].copy()

    @property
    def velocity_mps(self) -> FloatArray:
        """(3,) velocity in the base frame."""
        return self.state[3:].copy()


@dataclass(frozen=True)
class TrackSnapshot:
    """A track as published.

    Attributes:
        track_id: Unique id.
        type_name: Majority type.
        position_m: (3,) position in the base frame at the frame's stamp.
        rotation: 3x3 orientation in the base frame.
        velocity_mps: (3,) velocity in the base frame.
        detected: Whether this frame updated it (False: predicted, e.g. occluded).
        hits: Detections so far.

    """

    track_id: int
    type_name: str
    position_m: FloatArray
    rotation: FloatArray
    velocity_mps: FloatArray
    detected: bool
    hits: int


class BeltTracker:
    """Track objects over frames (see the module docstring).

    Args:
        config: Tracking parameters.
        belt_length_m: Belt length (tracks predicted beyond its ends are deleted).

    """

    def __init__(self, config: TrackingConfig, belt_length_m: float = 1.6) -> None:
        self.config = config
        self.belt_length_m = belt_length_m
        self.tracks: list[Track] = []
        self._ids = itertools.count(1)
        self.created = 0
        self.deleted = 0

    def reset(self) -> None:
        """Forget every track (ids keep increasing)."""
        self.tracks = []

    def _predict(self, track: Track, stamp_s: float) -> None:
        dt = stamp_s - track.last_predict_s
        if dt <= 0.0:
            return
        transition = np.eye(6)
        transition[:3, 3:] = dt * np.eye(3)
        q = self.config.acceleration_noise_mps2**2
        noise = np.zeros((6, 6))
        noise[:3, :3] = q * dt**4 / 4.0 * np.eye(3)
        noise[:3, 3:] = noise[3:, :3] = q * dt**3 / 2.0 * np.eye(3)
        noise[3:, 3:] = q * dt**2 * np.eye(3)
        track.state = transition @ track.state
        track.covariance = transition @ track.covariance @ transition.T + noise
        track.last_predict_s = stamp_s

    @staticmethod
    def _kalman_update(
        track: Track, observation: FloatArray, measurement: FloatArray, noise: FloatArray
    ) -> None:
        innovation = measurement - observation @ track.state
        innovation_cov = observation @ track.covariance @ observation.T + noise
        gain = track.covariance @ observation.T @ np.linalg.inv(innovation_cov)
        track.state = track.state + gain @ innovation
        track.covariance = (np.eye(6) - gain @ observation) @ track.covariance

    def _belt_velocity_update(self, track: Track, belt_velocity_mps: FloatArray | None) -> None:
        if belt_velocity_mps is None or not track.on_belt:
            return
        observation = np.zeros((3, 6))
        observation[:, 3:] = np.eye(3)
        noise = self.config.belt_velocity_noise_mps**2 * np.eye(3)
        self._kalman_update(track, observation, belt_velocity_mps, noise)

    def _new_track(
        self, detection: Detection, stamp_s: float, belt_velocity_mps: FloatArray | None
    ) -> Track:
        velocity = belt_velocity_mps if belt_velocity_mps is not None else np.zeros(3)
        covariance = np.zeros((6, 6))
        covariance[:3, :3] = self.config.position_noise_m**2 * np.eye(3)
        velocity_sigma = (
            self.config.belt_velocity_noise_mps if belt_velocity_mps is not None else 0.3
        )
        covariance[3:, 3:] = velocity_sigma**2 * np.eye(3)
        track = Track(
            track_id=next(self._ids),
            state=np.concatenate([detection.position_m, velocity]),
            covariance=covariance,
            rotation=detection.rotation.copy(),
            yaw_rad=detection.yaw_rad,
            hits=1,
            last_update_s=stamp_s,
            last_predict_s=stamp_s,
            on_belt=detection.on_belt,
        )
        track.type_votes[detection.type_name] += 1
        self.created += 1
        return track

    def _associate(self, detections: list[Detection]) -> list[tuple[int, int]]:
        if not self.tracks or not detections:
            return []
        config = self.config
        cost = np.full((len(self.tracks), len(detections)), _UNASSIGNED_COST)
        for i, track in enumerate(self.tracks):
            for j, detection in enumerate(detections):
                distance = float(np.linalg.norm(detection.position_m - track.state[:3]))
                if distance > config.gate_m:
                    continue
                penalty = (
                    config.type_mismatch_cost_m if detection.type_name != track.type_name else 0.0
                )
                cost[i, j] = distance + penalty
        rows, cols = linear_sum_assignment(cost)
        return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if cost[r, c] < 1e5]

    def _outside_belt(self, track: Track, base_from_belt: FloatArray | None) -> bool:
        if base_from_belt is None:
            return False
        belt_from_base = invert_transform(base_from_belt)
        along = float((belt_from_base[:3, :3] @ track.state[:3] + belt_from_base[:3, 3])[0])
        return abs(along) > self.belt_length_m / 2.0 + self.config.region_margin_m

    def update(
        self,
        detections: list[Detection],
        stamp_s: float,
        belt_velocity_mps: FloatArray | None = None,
        base_from_belt: FloatArray | None = None,
    ) -> list[TrackSnapshot]:
        """Advance every track to ``stamp_s``, assign ``detections`` and manage tracks.

        Args:
            detections: This frame's detections (base frame).
            stamp_s: Capture time of the frame, s.
            belt_velocity_mps: (3,) belt surface velocity in the base frame (belt speed along
                ``belt_link`` x), or None when no recent belt speed is known.
            base_from_belt: ``T_base_belt``; tracks predicted off the belt ends are deleted.

        Returns:
            The confirmed tracks (``hits >= min_hits``) at ``stamp_s``.

        """
        config = self.config
        velocity = None if belt_velocity_mps is None else np.asarray(belt_velocity_mps, float)
        for track in self.tracks:
            self._predict(track, stamp_s)
            self._belt_velocity_update(track, velocity)
        pairs = self._associate(detections)
        updated: set[int] = set()
        observation = np.zeros((3, 6))
        observation[:, :3] = np.eye(3)
        position_noise = config.position_noise_m**2 * np.eye(3)
        for track_index, detection_index in pairs:
            track = self.tracks[track_index]
            detection = detections[detection_index]
            self._kalman_update(track, observation, detection.position_m, position_noise)
            track.rotation = detection.rotation.copy()
            track.yaw_rad = detection.yaw_rad
            track.type_votes[detection.type_name] += 1
            track.hits += 1
            track.last_update_s = stamp_s
            track.on_belt = detection.on_belt
            updated.add(track.track_id)
        assigned = {j for _, j in pairs}
        for index, detection in enumerate(detections):
            if index not in assigned:
                track = self._new_track(detection, stamp_s, velocity)
                self.tracks.append(track)
                updated.add(track.track_id)
        kept = []
        for track in self.tracks:
            if stamp_s - track.last_update_s > config.max_coast_s or self._outside_belt(
                track, base_from_belt
            ):
                self.deleted += 1
                continue
            kept.append(track)
        self.tracks = kept
        return [
            TrackSnapshot(
                track_id=track.track_id,
                type_name=track.type_name,
                position_m=track.position_m,
                rotation=track.rotation.copy(),
                velocity_mps=track.velocity_mps,
                detected=track.track_id in updated,
                hits=track.hits,
            )
            for track in self.tracks
            if track.hits >= config.min_hits
        ]
