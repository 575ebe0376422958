"""Approximate-time pairing of two streams by stamp (what message_filters would do), no ROS."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

FirstT = TypeVar("FirstT")
SecondT = TypeVar("SecondT")


@dataclass(frozen=True)
class Pair(Generic[FirstT, SecondT]):
    """Two messages taken at (nearly) the same time.

    Attributes:
        stamp_s: Stamp of the first stream's message.
        first: Message of the first stream (e.g. RGB).
        second: Message of the second stream (e.g. depth).

    """

    stamp_s: float
    first: FirstT
    second: SecondT


class StampSynchronizer(Generic[FirstT, SecondT]):
    """Pairs messages of two streams whose stamps differ by at most ``tolerance_s``.

    Each stream keeps its last ``queue_size`` unpaired messages; when a message arrives it is
    paired with the closest-in-time unpaired message of the other stream within tolerance, and
    everything older on both streams is discarded (counted in :attr:`dropped`).

    Args:
        tolerance_s: Largest stamp difference of a pair, s.
        queue_size: Unpaired messages kept per stream.

    Raises:
        ValueError: For a negative tolerance or a queue size below 1.

    """

    def __init__(self, tolerance_s: float, queue_size: int = 5) -> None:
        if tolerance_s < 0.0:
            raise ValueError(f"tolerance_s = {tolerance_s}: expected >= 0")
        if queue_size < 1:
            raise ValueError(f"queue_size = {queue_size}: expected >= 1")
        self.tolerance_s = tolerance_s
        self._first: deque[tuple[float, FirstT]] = deque(maxlen=queue_size)
        self._second: deque[tuple[float, SecondT]] = deque(maxlen=queue_size)
        self.dropped = 0
        self.paired = 0

    def _match(
        self, stamp_s: float, others: deque[tuple[float, SecondT]] | deque[tuple[float, FirstT]]
    ) -> int | None:
        best, best_gap = None, self.tolerance_s
        for index, (other_stamp, _) in enumerate(others):
            gap = abs(other_stamp - stamp_s)
            if gap <= best_gap:
                best, best_gap = index, gap
        return best

    def add_first(self, stamp_s: float, message: FirstT) -> Pair[FirstT, SecondT] | None:
        """Add a message of the first stream; return the pair it completes, if any."""
        index = self._match(stamp_s, self._second)
        if index is None:
            self._first.append((stamp_s, message))
            return None
        for _ in range(index):
            self._second.popleft()
            self.dropped += 1
        _, other = self._second.popleft()
        self._drop_older(self._first, stamp_s)
        self.paired += 1
        return Pair(stamp_s, message, other)

    def add_second(self, stamp_s: float, message: SecondT) -> Pair[FirstT, SecondT] | None:
        """Add a message of the second stream; return the pair it completes, if any."""
        index = self._match(stamp_s, self._first)
        if index is None:
            self._second.append((stamp_s, message))
            return None
        for _ in range(index):
            self._first.popleft()
            self.dropped += 1
        first_stamp, other = self._first.popleft()
        self._drop_older(self._second, stamp_s)
        self.paired += 1
        return Pair(first_stamp, other, message)

    def _drop_older(
        self, queue: deque[tuple[float, SecondT]] | deque[tuple[float, FirstT]], stamp_s: float
    ) -> None:
        while queue and queue[0][0] < stamp_s:
            queue.popleft()
            self.dropped += 1
