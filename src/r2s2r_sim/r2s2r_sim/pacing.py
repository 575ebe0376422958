"""Cell time against the wall clock: capture schedules, real-time pacing and cost accounting.

:class:`RateSchedule` says when a stream (a camera, the encoder) is due on the cell clock;
:class:`RealTimePacer` says how many control periods a server must run now so that cell time
follows the wall clock at a real-time factor; :class:`CostAccount` adds up where the wall time
went (physics, rendering, publishing), which gives the fastest sustainable real-time factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class CostAccount:
    """Wall-clock seconds spent per activity (for real-time-factor capacity and benchmarks).

    Attributes:
        physics_s: Stepping, controllers and the trial judge.
        render_s: Camera rendering (RGB, depth, distortion, blur).
        publish_s: Message building and publishing (filled in by the node).
        sim_s: Simulated seconds advanced.

    """

    physics_s: float = 0.0
    render_s: float = 0.0
    publish_s: float = 0.0
    sim_s: float = 0.0

    @property
    def busy_s(self) -> float:
        """Total wall time spent."""
        return self.physics_s + self.render_s + self.publish_s

    @property
    def rtf_capacity(self) -> float:
        """Simulated seconds per busy wall second: the fastest real-time factor sustainable."""
        return self.sim_s / self.busy_s if self.busy_s > 0.0 else 0.0

    def minus(self, earlier: CostAccount) -> CostAccount:
        """Return the costs accrued since ``earlier`` (a copy taken before)."""
        return CostAccount(
            self.physics_s - earlier.physics_s,
            self.render_s - earlier.render_s,
            self.publish_s - earlier.publish_s,
            self.sim_s - earlier.sim_s,
        )

    def copy(self) -> CostAccount:
        """Return a snapshot."""
        return CostAccount(self.physics_s, self.render_s, self.publish_s, self.sim_s)


class RateSchedule:
    """Capture instants ``origin + k / rate_hz`` (k = 1, 2, ...) on the cell clock; each due once.

    The origin is 0 until :meth:`restart` moves it (a trial start: a trial's frames then fall
    at the same instants after its start whenever it was started).

    Args:
        rate_hz: Rate; must be positive.

    Raises:
        ValueError: If ``rate_hz`` is not positive.

    """

    def __init__(self, rate_hz: float):
        if not rate_hz > 0.0:
            raise ValueError(f"rate_hz = {rate_hz}: expected > 0")
        self.rate_hz = float(rate_hz)
        self._origin_s = 0.0
        self._next_index = 1

    def _index(self, time_s: float) -> float:
        return (time_s - self._origin_s) * self.rate_hz + 1e-6

    def restart(self, origin_s: float) -> None:
        """Put the instants at ``origin_s + k / rate_hz`` from now on (the first one after it)."""
        self._origin_s = float(origin_s)
        self._next_index = 1

    def next_due(self, time_s: float) -> bool:
        """Whether :meth:`due` would answer True at ``time_s`` (without consuming the instant)."""
        return self._index(time_s) >= self._next_index

    def due(self, time_s: float) -> bool:
        """Whether an instant was reached at ``time_s`` (missed instants collapse into one)."""
        index = self._index(time_s)
        if index < self._next_index:
            return False
        self._next_index = math.floor(index) + 1
        return True


class RealTimePacer:
    """Decides how many control periods are due so that cell time follows a wall clock.

    Args:
        control_period_s: Simulated seconds per control period.
        real_time_factor: Simulated seconds per wall second (> 0).
        max_lag_s: When the cell falls further behind than this (simulated seconds), the
            schedule is re-anchored instead of catching up in a burst; counted in
            :attr:`lag_resets`.
        max_periods_per_call: Upper bound of one :meth:`due` answer (keeps a timer callback
            short so that commands and services get served in between).

    Raises:
        ValueError: If a period, factor or bound is not positive.

    """

    def __init__(
        self,
        control_period_s: float,
        real_time_factor: float = 1.0,
        max_lag_s: float = 0.25,
        max_periods_per_call: int = 200,
    ):
        for name, value in (
            ("control_period_s", control_period_s),
            ("real_time_factor", real_time_factor),
            ("max_lag_s", max_lag_s),
            ("max_periods_per_call", max_periods_per_call),
        ):
            if not value > 0:
                raise ValueError(f"{name} = {value}: expected > 0")
        self.control_period_s = float(control_period_s)
        self.real_time_factor = float(real_time_factor)
        self.max_lag_s = float(max_lag_s)
        self.max_periods_per_call = int(max_periods_per_call)
        self.lag_resets = 0
        self._anchor_wall_s: float | None = None
        self._periods_done = 0
        self._window_wall_s = 0.0
        self._window_sim_s = 0.0

    def start(self, wall_s: float) -> None:
        """Anchor the schedule at ``wall_s`` (call on activation)."""
        self._anchor_wall_s = wall_s
        self._periods_done = 0
        self._window_wall_s = wall_s
        self._window_sim_s = 0.0

    def due(self, wall_s: float) -> int:
        """Control periods to run now (0 if none); call :meth:`done` after running them."""
        if self._anchor_wall_s is None:
            self.start(wall_s)
        assert self._anchor_wall_s is not None
        target = (wall_s - self._anchor_wall_s) * self.real_time_factor / self.control_period_s
        behind = math.floor(target + 1e-9) - self._periods_done
        lag_periods = max(self.max_lag_s / self.control_period_s, self.max_periods_per_call)
        if behind > lag_periods:
            # Too far behind to catch up without starving everything else: give up the
            # backlog and stay one call's worth behind the wall clock.
            self.lag_resets += 1
            self._periods_done = math.floor(target + 1e-9) - self.max_periods_per_call
            behind = self.max_periods_per_call
        return max(0, min(behind, self.max_periods_per_call))

    def resume(self, wall_s: float) -> None:
        """Continue from ``wall_s`` without catching up on the wall time before it.

        For a pause the cell took on purpose (a reset or a trial start held it while its world
        was rebuilt): running the missed periods in a burst afterwards would make the cell's
        first tenths of a second run faster than the wall clock, so a node that times itself
        on the wall clock (the policy) would see its commands land later in cell time than on
        a real cell. Not counted in :attr:`lag_resets`.
        """
        if self._anchor_wall_s is None:
            self.start(wall_s)
            return
        self._anchor_wall_s = (
            wall_s - self._periods_done * self.control_period_s / self.real_time_factor
        )

    def done(self, periods: int) -> None:
        """Record that ``periods`` control periods were run."""
        self._periods_done += periods
        self._window_sim_s += periods * self.control_period_s

    def achieved_rtf(self, wall_s: float) -> float:
        """Return simulated / wall seconds since the previous call (or :meth:`start`)."""
        since_s = wall_s - self._window_wall_s
        rtf = self._window_sim_s / since_s if since_s > 0.0 else 0.0
        self._window_wall_s = wall_s
        self._window_sim_s = 0.0
        return rtf


def periods_per_tick(real_time_factor: float, tick_rate_hz: float, control_period_s: float) -> int:
    """Most control periods one timer tick may run: two ticks' worth of simulated time."""
    return max(1, math.ceil(2.0 * real_time_factor / (tick_rate_hz * control_period_s)))
