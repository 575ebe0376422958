"""The safety layer between the policy and the controllers: the palm's box, a watchdog, the stop.

The per-chunk filter (:mod:`.safety`) keeps each command inside the joint limits; this layer
judges the policy over time, as an industrial arm's safety controller does:

- **workspace**: every point of a chunk is run through the robot's forward kinematics before it
  is sent; the chunk ends before its first point that puts ``palm_link`` outside the configured
  box (above the table, inside the cell) or into the belt's keep-out box (the palm above the
  belt's top), so no such target is ever sent (a
  chunk's far points are the policy's least certain and are replaced 0.1 s later); when the
  next target itself is outside, the policy is stopped;
- **watchdog**: a run of chunks clamped at the joint limits (a saturating, diverged policy), a
  run of dropped chunks (non-finite output, inference errors: a policy that never moves), or a
  tick long after the previous one (the process was frozen; a chunk whose inference spanned
  the freeze is not sent either) stops the policy;
- **stop**: once stopped, one hold at the measured position is sent and nothing else until
  :meth:`SafetyWatchdog.rearm` (the node's ``~/rearm`` service): a stopped policy never moves
  the arm again on its own.

Plain Python (no rclpy): the engine calls it, the node shows it on ``/diagnostics``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel
from r2s2r_description.cell import NOMINAL_LAYOUT, CellLayout
from r2s2r_description.frames import PALM_LINK
from r2s2r_description.robot import ARM_JOINT_NAMES


class SafetyLayerConfig(ConfigModel):
    """Limits of the safety layer (world frame: z up, the table top at 0.75 m)."""

    workspace_min_m: list[float] = Field(
        default_factory=lambda: [-0.65, -0.70, 0.77],
        min_length=3,
        max_length=3,
        description="Lower corner of the box palm_link must stay in (world, m): x at the "
        "table's back edge, y 0.1 m inside the belt's ends, z 5 mm above the palm's half "
        "thickness (15 mm) over the table top (0.75 m): the palm never touches the table.",
    )
    workspace_max_m: list[float] = Field(
        default_factory=lambda: [0.70, 0.70, 1.45],
        min_length=3,
        max_length=3,
        description="Upper corner (world, m): x at the belt's far edge, y as the lower corner, "
        "z 0.7 m above the table (0.3 m above the highest demonstrated palm).",
    )
    belt_keep_out_min_m: list[float] = Field(
        default_factory=lambda: [0.40, -0.80, 0.0],
        min_length=3,
        max_length=3,
        description="Lower corner of the belt's keep-out box (world, m): the belt's footprint "
        "(x 0.40-0.70 m, its whole length) ...",
    )
    belt_keep_out_max_m: list[float] = Field(
        default_factory=lambda: [0.70, 0.80, 0.84],
        min_length=3,
        max_length=3,
        description="... up to 5 mm above the palm's half thickness over the belt's top "
        "(0.82 m): palm_link never enters it (the palm never touches the belt).",
    )
    clamped_chunks_to_stop: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Consecutive chunks clamped at an arm joint's position limit that stop "
        "the policy (a diverged checkpoint drives the arm to its limits; the task never comes "
        "near them). The hand's joints are left out: an open or closed hand is at its limits "
        "(the demonstrations' finger targets are there 11-55 % of the time).",
    )
    dropped_chunks_to_stop: int = Field(
        default=10,
        ge=1,
        le=10000,
        description="Consecutive chunks dropped (non-finite output, inference errors) that "
        "stop the policy: it is not moving the arm.",
    )
    max_tick_gap_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="A control tick this long after the previous one, or a chunk ready this "
        "long after its tick began (the process was frozen or starved, SIGSTOP included, "
        "mid-inference too), stops the policy instead of moving the arm at once on resuming.",
    )

    @model_validator(mode="after")
    def _boxes_not_empty(self) -> SafetyLayerConfig:
        for low, high, name in (
            (self.workspace_min_m, self.workspace_max_m, "workspace"),
            (self.belt_keep_out_min_m, self.belt_keep_out_max_m, "belt_keep_out"),
        ):
            if not np.all(np.asarray(low) < np.asarray(high)):
                raise ValueError(
                    f"{name}_min_m {low} must be below {name}_max_m {high} on every axis"
                )
        return self


class StopCause(StrEnum):
    """Why the safety layer stopped the policy."""

    WORKSPACE = "workspace"
    SATURATION = "saturation"
    NO_ACTION = "no_action"
    FROZEN = "frozen"
    SECOND_COMMANDER = "second_commander"


@dataclass(frozen=True)
class SafetyStop:
    """A stop of the safety layer: its cause, a sentence for the operator, and when."""

    cause: StopCause
    detail: str
    time_s: float

    def __str__(self) -> str:
        return f"safety stop ({self.cause.value}): {self.detail}"


class PalmWorkspace:
    """Forward kinematics of ``palm_link`` over a chunk, against the configured box.

    Args:
        config: The box.
        action_names: Joint names of a chunk's columns; the arm joints among them are used
            (a chunk without every arm joint is not checked: :attr:`checks` is False).
        layout: Cell placements (the robot's base pose).

    """

    def __init__(
        self,
        config: SafetyLayerConfig,
        action_names: Sequence[str],
        layout: CellLayout = NOMINAL_LAYOUT,
    ) -> None:
        from r2s2r_world.kinematics import PalmIk  # MuJoCo: loaded with the layer only

        self.low = np.asarray(config.workspace_min_m, dtype=float)
        self.high = np.asarray(config.workspace_max_m, dtype=float)
        self.keep_out_low = np.asarray(config.belt_keep_out_min_m, dtype=float)
        self.keep_out_high = np.asarray(config.belt_keep_out_max_m, dtype=float)
        self.checks = all(name in action_names for name in ARM_JOINT_NAMES)
        self.arm_columns = (
            [list(action_names).index(name) for name in ARM_JOINT_NAMES] if self.checks else []
        )
        self._fk = PalmIk(layout, PALM_LINK) if self.checks else None

    def palm_positions(self, chunk: np.ndarray) -> np.ndarray:
        """``(H, 3)`` world positions of palm_link at each point of an ``(H, A)`` chunk."""
        if self._fk is None:
            return np.empty((0, 3))
        return np.array([self._fk.forward(point[self.arm_columns])[:3, 3] for point in chunk])

    def allows(self, position: np.ndarray) -> bool:
        """Whether a palm position is inside the workspace and outside the belt's keep-out."""
        inside = bool(np.all(position >= self.low) and np.all(position <= self.high))
        in_belt = bool(
            np.all(position > self.keep_out_low) and np.all(position < self.keep_out_high)
        )
        return inside and not in_belt

    def first_violation(self, chunk: np.ndarray) -> tuple[int, np.ndarray] | None:
        """Return the first point putting the palm where it may not be, and where; or None."""
        for index, position in enumerate(self.palm_positions(chunk)):
            if not self.allows(position):
                return index, position
        return None


class SafetyWatchdog:
    """Counts what the policy does over time and decides when it must stop.

    One per engine; not thread-safe on its own (the engine calls it from one step at a time).
    """

    def __init__(self, config: SafetyLayerConfig) -> None:
        self.config = config
        self.stop: SafetyStop | None = None
        self.hold_sent = False
        self._clamped_run = 0
        self._dropped_run = 0
        self._last_tick_s: float | None = None

    def trip(self, cause: StopCause, detail: str, now_s: float) -> SafetyStop:
        """Stop the policy (the first cause is kept until :meth:`rearm`)."""
        if self.stop is None:
            self.stop = SafetyStop(cause, detail, now_s)
            self.hold_sent = False
        return self.stop

    def rearm(self) -> SafetyStop | None:
        """Clear the stop and the counters; returns the stop that was cleared, if any."""
        cleared = self.stop
        self.stop = None
        self.hold_sent = False
        self.restart()
        return cleared

    def restart(self) -> None:
        """Start the tick clock and the runs again (a new episode); a stop stays."""
        self._last_tick_s = None
        self._clamped_run = 0
        self._dropped_run = 0

    def tick(self, now_s: float) -> None:
        """Note a control tick at ``now_s``; trip FROZEN when it comes too long after the last."""
        last, self._last_tick_s = self._last_tick_s, now_s
        if last is not None and now_s - last > self.config.max_tick_gap_s:
            self.trip(
                StopCause.FROZEN,
                f"no control tick for {now_s - last:.2f} s (max_tick_gap_s "
                f"{self.config.max_tick_gap_s:g}): the policy was frozen; re-arm to resume",
                now_s,
            )

    def chunk_sent(self, position_clamped: bool, now_s: float) -> None:
        """Count a chunk that passed (``position_clamped``: some value hit a position limit)."""
        self._dropped_run = 0
        self._clamped_run = self._clamped_run + 1 if position_clamped else 0
        if self._clamped_run >= self.config.clamped_chunks_to_stop:
            self.trip(
                StopCause.SATURATION,
                f"{self._clamped_run} chunks in a row clamped at the joint position limits "
                "(a saturating policy)",
                now_s,
            )

    def chunk_dropped(self, reason: str, now_s: float) -> None:
        """Count a chunk that was not sent (non-finite output, inference error)."""
        self._dropped_run += 1
        if self._dropped_run >= self.config.dropped_chunks_to_stop:
            self.trip(
                StopCause.NO_ACTION,
                f"{self._dropped_run} chunks in a row dropped, the last for {reason}: the "
                "policy is not commanding the arm",
                now_s,
            )
