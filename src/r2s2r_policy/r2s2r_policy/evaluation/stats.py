"""Success rates with confidence intervals (Wilson score interval)."""

from __future__ import annotations

import math
from statistics import NormalDist


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion.

    Unlike the normal ("Wald") interval it stays inside [0, 1] and is sensible at 0 or n
    successes and for the small trial counts of robot evaluations.

    Args:
        successes: Number of successes, ``0 <= successes <= trials``.
        trials: Number of trials (0 gives the uninformative ``(0, 1)``).
        confidence: Two-sided confidence level in (0, 1).

    Returns:
        ``(low, high)`` bounds of the success rate.

    Raises:
        ValueError: If counts or confidence are out of range.

    """
    if trials < 0 or not 0 <= successes <= max(trials, 0):
        raise ValueError(f"successes = {successes}, trials = {trials}: expected 0 <= s <= n")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence = {confidence}: expected in (0, 1)")
    if trials == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / trials
    denominator = 1.0 + z * z / trials
    centre = (p + z * z / (2.0 * trials)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / trials + z * z / (4.0 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
