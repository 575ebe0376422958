"""Kalman filter fusing encoder and vision belt-speed readings.

State: belt speed along x (m/s). Model: random walk, so the variance grows by
``speed_random_walk_mps_per_sqrt_s ** 2 * dt`` between readings; this lets the filter follow a
speed change while averaging noise in steady state. Readings are applied in arrival order; one
stamped before the filter's time is applied at the filter's time (no back-prediction), with its
variance grown by the random walk over its age (the speed may have changed since), so a late
reading (vision over a long frame baseline) cannot hold back a fresher source. The output names
the sources used within the timeout, so consumers see when it runs on one source only.
"""

from __future__ import annotations

import math

from r2s2r_belt.config import FilterConfig
from r2s2r_belt.estimates import FusedSpeed, SpeedMeasurement


class BeltSpeedFilter:
    """Scalar Kalman filter over belt speed.

    Args:
        config: Process noise, timeouts and validity limit.

    """

    def __init__(self, config: FilterConfig) -> None:
        self.config = config
        self._speed_mps = 0.0
        self._variance_mps2 = config.initial_variance_mps2
        self._time_s: float | None = None
        self._last_used_s: dict[str, float] = {}
        self.updates: dict[str, int] = {}

    def _predict(self, stamp_s: float) -> None:
        if self._time_s is None:
            self._time_s = stamp_s
            return
        dt_s = stamp_s - self._time_s
        if dt_s > 0.0:
            self._variance_mps2 += self.config.speed_random_walk_mps_per_sqrt_s**2 * dt_s
            self._time_s = stamp_s

    def update(self, measurement: SpeedMeasurement) -> bool:
        """Fuse one reading; invalid or non-finite readings are ignored.

        Returns:
            True if the reading was used.

        """
        if (
            not measurement.valid
            or not math.isfinite(measurement.speed_mps)
            or not math.isfinite(measurement.variance_mps2)
            or measurement.variance_mps2 <= 0.0
        ):
            return False
        self._predict(measurement.stamp_s)
        assert self._time_s is not None
        age_s = max(self._time_s - measurement.stamp_s, 0.0)
        variance_mps2 = (
            measurement.variance_mps2 + self.config.speed_random_walk_mps_per_sqrt_s**2 * age_s
        )
        gain = self._variance_mps2 / (self._variance_mps2 + variance_mps2)
        self._speed_mps += gain * (measurement.speed_mps - self._speed_mps)
        self._variance_mps2 *= 1.0 - gain
        self._last_used_s[measurement.source] = measurement.stamp_s
        self.updates[measurement.source] = self.updates.get(measurement.source, 0) + 1
        return True

    def estimate(self, now_s: float) -> FusedSpeed:
        """Predict to ``now_s`` and report speed, variance and the sources in use."""
        if self._time_s is not None:
            self._predict(now_s)
        sources = tuple(
            sorted(
                source
                for source, used_s in self._last_used_s.items()
                if now_s - used_s <= self.config.source_timeout_s
            )
        )
        valid = bool(sources) and self._variance_mps2 <= self.config.max_valid_variance_mps2
        return FusedSpeed(now_s, self._speed_mps, self._variance_mps2, sources, valid)
