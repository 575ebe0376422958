"""Which take comes next in a recording session (no ROS): a fixed count, or until N succeed.

An operator recording demonstrations either records a fixed number of takes, or keeps
re-recording until enough of them are good (a failed take is done again with the next trial),
within a cap on attempts. :class:`TakeSession` is that bookkeeping; the demonstrator node asks
it whether to start another take and tells it each outcome.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Take:
    """One finished take.

    Attributes:
        seed: The trial's seed.
        success: The operator's (the cell's) verdict.
        reason: The outcome's reason ('success', 'missed_grasp', 'timeout', ...).

    """

    seed: int
    success: bool
    reason: str


@dataclass
class TakeSession:
    """Bookkeeping of a recording session.

    Args:
        max_takes: Takes to record; with ``successes_wanted`` the cap on attempts.
        successes_wanted: Stop once this many takes succeeded (0: record ``max_takes``).

    Raises:
        ValueError: If a count is negative or more successes are wanted than takes allowed.

    """

    max_takes: int
    successes_wanted: int = 0
    takes: list[Take] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.max_takes < 0 or self.successes_wanted < 0:
            raise ValueError(
                f"max_takes = {self.max_takes}, successes_wanted = {self.successes_wanted}: "
                "expected ≥ 0"
            )
        if self.successes_wanted > self.max_takes:
            raise ValueError(
                f"successes_wanted = {self.successes_wanted} > max_takes = {self.max_takes}: "
                "the cap on attempts must allow at least that many takes"
            )

    @property
    def attempts(self) -> int:
        """Takes finished so far."""
        return len(self.takes)

    @property
    def successes(self) -> int:
        """Successful takes so far."""
        return sum(1 for take in self.takes if take.success)

    @property
    def until_successes(self) -> bool:
        """The session records until ``successes_wanted`` succeed (not a fixed count)."""
        return self.successes_wanted > 0

    def record(self, take: Take) -> None:
        """Add a finished take.

        Raises:
            RuntimeError: If the session was already done (no take should have started).

        """
        if self.done:
            raise RuntimeError(f"take {take} recorded after the session was done ({self})")
        self.takes.append(take)

    @property
    def done(self) -> bool:
        """No further take: the wanted successes are in, or the takes (attempts) are used up."""
        if self.until_successes and self.successes >= self.successes_wanted:
            return True
        return self.attempts >= self.max_takes

    @property
    def short(self) -> bool:
        """Done without the wanted successes (the cap on attempts was reached)."""
        return self.until_successes and self.done and self.successes < self.successes_wanted

    def failure_reasons(self) -> dict[str, int]:
        """Failed takes per outcome reason."""
        return dict(Counter(take.reason for take in self.takes if not take.success))

    def summary(self) -> str:
        """One line: successes, attempts, failure reasons, and whether the goal was met."""
        text = f"{self.successes}/{self.attempts} successes"
        if self.until_successes:
            text += f" (wanted {self.successes_wanted}, at most {self.max_takes} attempts)"
        reasons = self.failure_reasons()
        if reasons:
            text += f", failures {reasons}"
        if self.short:
            text += "; SHORT of the wanted successes"
        return text
