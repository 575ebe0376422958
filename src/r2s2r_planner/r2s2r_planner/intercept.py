"""Intercept timing for objects riding the belt.

An object on the belt moves with the belt: ``p(t) = p0 + v (t - t0)`` with ``v`` the belt speed
along ``belt_link`` x. The robot can start moving at ``t_ready = now + planning budget``; an
approach planned to meet the object at ``t`` takes ``D(t)`` (which depends on where the object
is then), so the arrival time solves ``t >= t_ready + D(t)``. :class:`InterceptSolver` iterates
*duration estimate -> object position at arrival -> re-plan* until the plan fits, prefers a
configured belt position (the middle of the arm's reach), and refuses with a reason when the
object never enters, has left, or would leave the reachable belt zone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from r2s2r_description.transforms import FloatArray

from r2s2r_planner.config import InterceptConfig


class InterceptReason(StrEnum):
    """Why no intercept exists."""

    NEVER_REACHES_ZONE = "never_reaches_zone"
    PAST_ZONE = "past_zone"
    LEAVES_ZONE = "leaves_zone"
    UNREACHABLE = "unreachable"
    NOT_CONVERGED = "not_converged"


class InterceptError(RuntimeError):
    """No intercept: ``reason`` is an :class:`InterceptReason`, the message gives the numbers."""

    def __init__(self, reason: InterceptReason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class BeltObjectState:
    """An object on the belt at time ``time_s``.

    Attributes:
        position_m: (3,) centre in world.
        time_s: When it was there.
        belt_pose: 4x4 ``belt_link`` in world (x = travel direction).
        belt_speed_mps: Belt speed along belt x.

    """

    position_m: FloatArray
    time_s: float
    belt_pose: FloatArray
    belt_speed_mps: float

    @property
    def velocity_mps(self) -> FloatArray:
        """(3,) world velocity of the object (the belt's)."""
        return self.belt_pose[:3, 0] * self.belt_speed_mps  # type: ignore[no-any-return]

    def position_at(self, time_s: float) -> FloatArray:
        """World position at ``time_s`` (constant belt speed)."""
        return self.position_m + self.velocity_mps * (time_s - self.time_s)  # type: ignore[no-any-return]

    def belt_x_at(self, time_s: float) -> float:
        """Coordinate along belt x at ``time_s`` (``belt_link`` frame)."""
        local = self.belt_pose[:3, :3].T @ (self.position_at(time_s) - self.belt_pose[:3, 3])
        return float(local[0])

    def time_at_belt_x(self, belt_x_m: float) -> float:
        """When the object passes belt coordinate ``belt_x_m`` (inf if it never does)."""
        here = self.belt_x_at(self.time_s)
        if abs(self.belt_speed_mps) < 1e-9:
            return self.time_s if abs(here - belt_x_m) < 1e-9 else math.inf
        time_s = self.time_s + (belt_x_m - here) / self.belt_speed_mps
        return time_s


@dataclass(frozen=True)
class Intercept:
    """Where and when the robot meets the object.

    Attributes:
        arrival_time_s: When the approach ends (pre-grasp above the object).
        position_m: (3,) object centre at ``arrival_time_s``.
        belt_x_m: Its belt coordinate.
        approach_duration_s: Duration of the approach that was planned for it.
        start_time_s: When the approach starts (``arrival - duration``, >= ready time).
        iterations: Fixed-point iterations used.

    """

    arrival_time_s: float
    position_m: FloatArray
    belt_x_m: float
    approach_duration_s: float
    start_time_s: float
    iterations: int


class InterceptSolver:
    """Finds the arrival time for an approach that meets a moving object.

    Args:
        config: Reach zone, preferred position and iteration settings.

    """

    def __init__(self, config: InterceptConfig | None = None) -> None:
        self.config = config or InterceptConfig()

    def solve(
        self,
        state: BeltObjectState,
        ready_time_s: float,
        approach_duration: Callable[[float, FloatArray], float],
        pick_duration_s: float = 0.0,
        preferred_belt_x_m: float | None = None,
    ) -> Intercept:
        """Arrival time and place for an approach that fits.

        Args:
            state: The object on the belt.
            ready_time_s: Earliest time the robot can start moving.
            approach_duration: ``(arrival_time_s, object position then) -> duration_s`` of the
                approach to meet it (e.g. a real plan's duration); raises ``ValueError`` or
                ``RuntimeError`` when that place cannot be reached.
            pick_duration_s: Time after arrival the object must still be in the zone (descend,
                close, lift).
            preferred_belt_x_m: Preferred belt coordinate at arrival (the config's when None).

        Raises:
            InterceptError: With an :class:`InterceptReason`.

        """
        cfg = self.config
        zone_lo, zone_hi = cfg.reach_zone_belt_x_m
        preferred = cfg.preferred_belt_x_m if preferred_belt_x_m is None else preferred_belt_x_m
        preferred = float(np.clip(preferred, zone_lo, zone_hi))
        x_now = state.belt_x_at(ready_time_s)
        speed = state.belt_speed_mps
        if speed <= 1e-9 and not zone_lo <= x_now <= zone_hi:
            raise InterceptError(
                InterceptReason.NEVER_REACHES_ZONE,
                f"object at belt x {x_now:.3f} m with belt speed {speed} m/s is outside the "
                f"reach zone [{zone_lo}, {zone_hi}] m and will stay there",
            )
        if speed > 1e-9 and x_now > zone_hi:
            raise InterceptError(
                InterceptReason.PAST_ZONE,
                f"object at belt x {x_now:.3f} m is already past the reach zone end {zone_hi} m",
            )
        earliest = ready_time_s
        if speed > 1e-9:
            earliest = max(earliest, state.time_at_belt_x(zone_lo))
            latest = state.time_at_belt_x(zone_hi) - pick_duration_s
            target = max(state.time_at_belt_x(preferred), earliest)
        else:
            latest = math.inf
            target = earliest
        time_s = target
        for iteration in range(1, cfg.max_iterations + 1):
            if time_s > latest + 1e-9:
                raise InterceptError(
                    InterceptReason.LEAVES_ZONE,
                    f"arrival at {time_s:.3f} s leaves {pick_duration_s:.2f} s before the object "
                    f"exits the reach zone at belt x {zone_hi} m",
                )
            position = state.position_at(time_s)
            try:
                duration = float(approach_duration(time_s, position))
            except (ValueError, RuntimeError) as error:
                raise InterceptError(
                    InterceptReason.UNREACHABLE,
                    f"approach to {np.round(position, 3).tolist()} at {time_s:.3f} s: {error}",
                ) from None
            needed = ready_time_s + duration * cfg.duration_factor
            if needed <= time_s + cfg.tolerance_s:
                return Intercept(
                    arrival_time_s=time_s,
                    position_m=position,
                    belt_x_m=state.belt_x_at(time_s),
                    approach_duration_s=duration,
                    start_time_s=time_s - duration,
                    iterations=iteration,
                )
            time_s = max(needed, target)
        raise InterceptError(
            InterceptReason.NOT_CONVERGED,
            f"arrival time did not settle within {cfg.max_iterations} iterations "
            f"(last {time_s:.3f} s)",
        )
