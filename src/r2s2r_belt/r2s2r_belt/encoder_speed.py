"""Belt surface speed from a roller-angle encoder.

Angles are unwrapped sample to sample (any wrap convention: [-pi, pi) or [0, 2 pi)), then the
speed is the least-squares slope of angle over time in a sliding window, times the calibrated
roller radius. The regression averages quantisation and reading noise; its variance follows from
the angle noise and the spread of sample times.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
from r2s2r_description.transforms import wrap_angle

from r2s2r_belt.config import EncoderConfig
from r2s2r_belt.estimates import SpeedMeasurement


class EncoderSpeedEstimator:
    """Sliding-window regression of unwrapped roller angle.

    Args:
        config: Encoder settings (radius, window, noise, limits).

    """

    def __init__(self, config: EncoderConfig) -> None:
        self.config = config
        self._samples: deque[tuple[float, float]] = deque()
        self._last_raw_rad: float | None = None
        self._unwrapped_rad = 0.0
        self.rejected_samples = 0

    def reset(self) -> None:
        """Forget all samples."""
        self._samples.clear()
        self._last_raw_rad = None
        self._unwrapped_rad = 0.0

    def add_sample(self, stamp_s: float, angle_rad: float) -> None:
        """Add one roller angle reading.

        Out-of-order, duplicate and non-finite readings are counted in ``rejected_samples`` and
        ignored; a gap longer than the window restarts the regression.
        """
        if not math.isfinite(angle_rad) or not math.isfinite(stamp_s):
            self.rejected_samples += 1
            return
        if self._samples and stamp_s <= self._samples[-1][0]:
            self.rejected_samples += 1
            return
        if self._samples and stamp_s - self._samples[-1][0] > self.config.window_s:
            self.reset()
        if self._last_raw_rad is not None:
            self._unwrapped_rad += wrap_angle(angle_rad - self._last_raw_rad)
        self._last_raw_rad = angle_rad
        self._samples.append((stamp_s, self._unwrapped_rad))
        while self._samples and self._samples[0][0] < stamp_s - self.config.window_s:
            self._samples.popleft()

    def estimate(self, now_s: float | None = None) -> SpeedMeasurement:
        """Return the current speed estimate.

        Args:
            now_s: Current time; readings older than ``timeout_s`` make the estimate invalid.

        Returns:
            A measurement stamped at the centre of the window (where a regression slope is
            unbiased for a ramp); invalid with a reason if too few samples, stale or too fast.

        """
        samples = self._samples
        if len(samples) < 3:
            return SpeedMeasurement(
                "encoder", now_s or 0.0, 0.0, math.inf, False, "too few samples"
            )
        last_stamp_s = samples[-1][0]
        if now_s is not None and now_s - last_stamp_s > self.config.timeout_s:
            return SpeedMeasurement(
                "encoder",
                now_s,
                0.0,
                math.inf,
                False,
                f"no reading for {now_s - last_stamp_s:.2f} s",
            )
        data = np.asarray(samples, dtype=float)
        mean_stamp_s = data[:, 0].mean()
        times_s = data[:, 0] - mean_stamp_s
        spread_s2 = float(np.dot(times_s, times_s))
        if spread_s2 <= 0.0:
            return SpeedMeasurement("encoder", last_stamp_s, 0.0, math.inf, False, "no time spread")
        angles_rad = data[:, 1] - data[:, 1].mean()  # deviations from the mean angle
        rate_rad_s = float(np.dot(times_s, angles_rad) / spread_s2)
        residuals = angles_rad - rate_rad_s * times_s
        dof = max(len(samples) - 2, 1)
        noise_var_rad2 = max(
            float(np.dot(residuals, residuals)) / dof, self.config.angle_noise_rad**2
        )
        radius_m = self.config.roller_radius_m
        sign = -1.0 if self.config.invert else 1.0
        speed_mps = sign * rate_rad_s * radius_m
        variance_mps2 = noise_var_rad2 / spread_s2 * radius_m**2
        stamp_s = float(mean_stamp_s)
        if abs(speed_mps) > self.config.max_speed_mps:
            return SpeedMeasurement(
                "encoder",
                stamp_s,
                0.0,
                math.inf,
                False,
                f"speed {speed_mps:.3f} m/s beyond max_speed_mps {self.config.max_speed_mps}",
            )
        return SpeedMeasurement("encoder", stamp_s, speed_mps, variance_mps2)
