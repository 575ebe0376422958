"""Human-like motion primitives: minimum-jerk time scaling, quintics, smooth target tracking.

Human reaching follows the minimum-jerk model (Flash & Hogan 1985): a straight-ish hand path
with a bell-shaped speed profile. On-line corrections superimpose further minimum-jerk
submovements on the ongoing one (Flash & Henis 1991), which is what :class:`SmoothTrack`
does to an object estimate when a newer (lagged) observation arrives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def minimum_jerk(tau: float) -> float:
    """Minimum-jerk scaling ``10τ³ − 15τ⁴ + 6τ⁵`` of normalised time, clipped to [0, 1]."""
    t = min(max(tau, 0.0), 1.0)
    return t * t * t * (10.0 - 15.0 * t + 6.0 * t * t)


def smooth_bump(tau: float) -> float:
    """Return the bump ``64 τ³(1−τ)³``: 1 mid-way, 0 outside [0, 1].

    Its velocity and acceleration are zero at both ends.
    """
    if tau <= 0.0 or tau >= 1.0:
        return 0.0
    return 64.0 * tau**3 * (1.0 - tau) ** 3


@dataclass(frozen=True)
class Quintic:
    """A quintic polynomial segment per axis, given boundary position, velocity, acceleration.

    Attributes:
        coefficients: (6, D) coefficients, lowest order first, in time since the start.
        duration_s: Segment duration; evaluation clamps time to [0, duration_s].

    """

    coefficients: FloatArray
    duration_s: float

    @classmethod
    def fit(
        cls,
        start: FloatArray,
        end: FloatArray,
        duration_s: float,
        start_velocity: FloatArray | None = None,
        end_velocity: FloatArray | None = None,
    ) -> Quintic:
        """Fit boundary conditions (zero accelerations; zero velocities unless given).

        Raises:
            ValueError: If ``duration_s`` is not positive.

        """
        if duration_s <= 0.0:
            raise ValueError(f"duration_s = {duration_s}: expected > 0")
        p0, p1 = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        v0 = np.zeros_like(p0) if start_velocity is None else np.asarray(start_velocity, float)
        v1 = np.zeros_like(p0) if end_velocity is None else np.asarray(end_velocity, float)
        t = duration_s
        a = np.array(
            [
                [t**3, t**4, t**5],
                [3 * t**2, 4 * t**3, 5 * t**4],
                [6 * t, 12 * t**2, 20 * t**3],
            ]
        )
        rhs = np.stack([p1 - p0 - v0 * t, v1 - v0, np.zeros_like(p0)])
        high = np.linalg.solve(a, rhs)
        return cls(np.vstack([p0, v0, np.zeros_like(p0), high]), float(duration_s))

    def __call__(self, t_s: float) -> FloatArray:
        """Value at ``t_s`` seconds after the start."""
        t = min(max(t_s, 0.0), self.duration_s)
        powers = np.array([t**k for k in range(6)])
        return powers @ self.coefficients  # type: ignore[no-any-return]


@dataclass(frozen=True)
class LinearMotion:
    """Constant-velocity prediction ``position + velocity · (t − time)`` (an object on a belt).

    Attributes:
        position_m: (3,) position at ``time_s``.
        velocity_mps: (3,) velocity.
        time_s: Reference time.

    """

    position_m: FloatArray
    velocity_mps: FloatArray
    time_s: float

    def __call__(self, t_s: float) -> FloatArray:
        """Predicted position at ``t_s``."""
        return self.position_m + self.velocity_mps * (t_s - self.time_s)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Correction:
    start_s: float
    duration_s: float
    previous: LinearMotion
    new: LinearMotion


class SmoothTrack:
    """An object estimate that moves to each newer estimate by a minimum-jerk correction.

    ``position(t)`` telescopes: the first estimate plus, for every correction ``k`` started at
    ``c_k``, ``s((t − c_k)/D) · (e_k(t) − e_{k−1}(t))`` — a smooth (C²) blend into the newest
    estimate, so a path expressed relative to the track never jumps.

    Args:
        initial: The first estimate.

    """

    def __init__(self, initial: LinearMotion):
        self._base = initial
        self._corrections: list[_Correction] = []

    @property
    def latest(self) -> LinearMotion:
        """The newest estimate (what the track converges to)."""
        return self._corrections[-1].new if self._corrections else self._base

    def correct(self, now_s: float, estimate: LinearMotion, duration_s: float) -> None:
        """Start blending into ``estimate`` at ``now_s`` over ``duration_s``."""
        # A completed prefix of corrections telescopes into its last estimate (for t ≥ now).
        while self._corrections and now_s >= self._corrections[0].start_s + (
            self._corrections[0].duration_s
        ):
            self._base = self._corrections.pop(0).new
        self._corrections.append(_Correction(now_s, duration_s, self.latest, estimate))

    def position(self, t_s: float) -> FloatArray:
        """Tracked position at ``t_s`` (valid for ``t_s`` ≥ the last correction's start)."""
        value = self._base(t_s)
        for c in self._corrections:
            weight = minimum_jerk((t_s - c.start_s) / c.duration_s)
            value = value + weight * (c.new(t_s) - c.previous(t_s))
        return value  # type: ignore[no-any-return]

    def velocity(self, t_s: float, step_s: float = 1e-3) -> FloatArray:
        """Tracked velocity at ``t_s`` (central difference)."""
        return (self.position(t_s + step_s) - self.position(t_s - step_s)) / (2.0 * step_s)  # type: ignore[no-any-return]
