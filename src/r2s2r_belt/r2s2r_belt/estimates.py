"""Plain result types shared by the belt-speed estimators and the filter."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpeedMeasurement:
    """One speed reading from a source.

    Attributes:
        source: ``encoder`` or ``vision``.
        stamp_s: Time the reading refers to, s.
        speed_mps: Belt surface speed along belt x, m/s.
        variance_mps2: Variance of ``speed_mps``, (m/s)^2.
        valid: False when the source could not estimate (see ``reason``); speed is then 0.
        reason: Why it is not valid (empty when valid).
        feature_count: Agreeing tracks (vision only).

    """

    source: str
    stamp_s: float
    speed_mps: float
    variance_mps2: float
    valid: bool = True
    reason: str = ""
    feature_count: int = 0


@dataclass(frozen=True)
class FusedSpeed:
    """Filtered belt speed.

    Attributes:
        stamp_s: Time of the estimate, s.
        speed_mps: Speed along belt x, m/s.
        variance_mps2: Filter variance, (m/s)^2.
        sources: Sources that updated the filter within the source timeout.
        valid: False before any reading or when the variance exceeds the configured limit.

    """

    stamp_s: float
    speed_mps: float
    variance_mps2: float
    sources: tuple[str, ...]
    valid: bool
