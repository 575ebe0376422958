"""Excitation: per-joint step and chirp segments, and one trajectory command per controller.

Each segment is a JointTrajectory for the joint's controller with a *future* start time
(``header.stamp``), so the start of each segment is known on the cell clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HAND_JOINT_NAMES

from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.config import SysIdConfig

SegmentKind = Literal["step", "chirp"]


@dataclass(frozen=True)
class ExcitationSegment:
    """One excitation command: a trajectory for one controller that moves one joint.

    Attributes:
        joint: The excited joint.
        kind: ``step`` (used for fitting) or ``chirp`` (held out for validation).
        controller: ``arm`` or ``hand``.
        joint_names: The controller's joints, in the order of ``positions`` columns.
        times_s: (M,) ``time_from_start`` of the points (s).
        positions: (M, N) positions (rad).
        start_time_s: Cell time the trajectory starts at (the command's ``header.stamp``).
        rest_positions: (N,) positions the controller holds before the segment (rad).
        amplitude_rad: Excitation amplitude (rad).

    """

    joint: str
    kind: SegmentKind
    controller: str
    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    start_time_s: float
    rest_positions: FloatArray
    amplitude_rad: float

    @property
    def duration_s(self) -> float:
        """Time from start to the last point (s)."""
        return float(self.times_s[-1])

    @property
    def end_time_s(self) -> float:
        """Cell time of the last point (s)."""
        return self.start_time_s + self.duration_s


def controller_of(joint: str) -> str:
    """``arm`` or ``hand``: the controller that owns ``joint``.

    Raises:
        ValueError: For an unknown joint.

    """
    if joint in ARM_JOINT_NAMES:
        return "arm"
    if joint in HAND_JOINT_NAMES:
        return "hand"
    raise ValueError(f"joint {joint!r}: expected one of {list(ALL_JOINT_NAMES)}")


def _controller_joints(controller: str) -> tuple[str, ...]:
    return ARM_JOINT_NAMES if controller == "arm" else HAND_JOINT_NAMES


def plan_excitation(
    joints: Sequence[str],
    rest_positions: Sequence[float] | FloatArray,
    start_time_s: float,
    config: SysIdConfig | None = None,
    lower_rad: Sequence[float] | None = None,
    upper_rad: Sequence[float] | None = None,
) -> list[ExcitationSegment]:
    """Design the excitation: per joint a step segment then a chirp segment, back to back.

    Args:
        joints: Joints to excite (any of :data:`ALL_JOINT_NAMES`).
        rest_positions: (18,) current positions (:data:`ALL_JOINT_NAMES` order): every segment
            starts and ends there.
        start_time_s: Cell time of the first segment's start (leave time to send it).
        config: Excitation design; defaults to :class:`SysIdConfig`.
        lower_rad: Optional (18,) lower limits; a step goes the other way when it would cross.
        upper_rad: Optional (18,) upper limits.

    Returns:
        The segments in time order.

    Raises:
        ValueError: Unknown joint or a rest vector of the wrong length.

    """
    cfg = config or SysIdConfig()
    rest = np.asarray(rest_positions, dtype=float).reshape(-1)
    if rest.size != len(ALL_JOINT_NAMES):
        raise ValueError(f"rest_positions has {rest.size} values; expected {len(ALL_JOINT_NAMES)}")
    segments: list[ExcitationSegment] = []
    t = float(start_time_s)
    for joint in joints:
        controller = controller_of(joint)
        names = _controller_joints(controller)
        index = [ALL_JOINT_NAMES.index(n) for n in names]
        base = rest[index]
        column = names.index(joint)
        amplitude = cfg.arm_step_rad if controller == "arm" else cfg.hand_step_rad
        full = ALL_JOINT_NAMES.index(joint)
        sign = 1.0
        if upper_rad is not None and rest[full] + amplitude > upper_rad[full]:
            sign = -1.0
        if lower_rad is not None and sign < 0 and rest[full] - amplitude < lower_rad[full]:
            raise ValueError(f"joint {joint!r} has no room for a {amplitude} rad step")
        # Step out and back: one control-period-short ramp is a step for the servo.
        hold = cfg.step_hold_s
        edge = 0.002
        step_times = np.array([edge, hold, hold + edge, 2.0 * hold])
        offsets = np.array([1.0, 1.0, 0.0, 0.0]) * sign * amplitude
        step_positions = np.tile(base, (4, 1))
        step_positions[:, column] += offsets
        segments.append(
            ExcitationSegment(
                joint, "step", controller, names, step_times, step_positions, t, base, amplitude
            )
        )
        t += 2.0 * hold + cfg.settle_s
        # Chirp (held out): a linear frequency sweep under a sine window (starts and ends at rest).
        n_points = max(4, round(cfg.chirp_duration_s / cfg.chirp_point_period_s))
        chirp_times = np.linspace(cfg.chirp_duration_s / n_points, cfg.chirp_duration_s, n_points)
        phase = (
            2.0
            * math.pi
            * (
                cfg.chirp_start_hz * chirp_times
                + 0.5
                * (cfg.chirp_end_hz - cfg.chirp_start_hz)
                / cfg.chirp_duration_s
                * chirp_times**2
            )
        )
        window = np.sin(math.pi * chirp_times / cfg.chirp_duration_s)
        chirp_positions = np.tile(base, (n_points, 1))
        chirp_positions[:, column] += sign * amplitude * window * np.sin(phase)
        segments.append(
            ExcitationSegment(
                joint, "chirp", controller, names, chirp_times, chirp_positions, t, base, amplitude
            )
        )
        t += cfg.chirp_duration_s + cfg.settle_s
    return segments


@dataclass(frozen=True)
class ControllerExcitation:
    """All excitation segments of one controller as one trajectory command.

    Attributes:
        controller: ``arm`` or ``hand``.
        joint_names: The controller's joints (columns of ``positions``).
        times_s: (M,) ``time_from_start`` of the points (s).
        positions: (M, N) positions (rad).
        start_time_s: Cell time of ``time_from_start = 0`` (the command's ``header.stamp``).

    """

    controller: str
    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    start_time_s: float


def merge_segments(segments: Sequence[ExcitationSegment]) -> list[ControllerExcitation]:
    """Join each controller's segments into one trajectory that holds rest between them.

    Sending one command per controller, stamped well ahead of its start, makes the excitation
    independent of message delivery time: the controller executes it at ``header.stamp`` (as
    ros2_control's joint_trajectory_controller does with a future stamp), whereas one command
    per segment arriving late would shift or cut short the segments.

    Raises:
        ValueError: Segments of one controller overlap in time.

    """
    merged: list[ControllerExcitation] = []
    for controller in dict.fromkeys(s.controller for s in segments):
        own = sorted(
            (s for s in segments if s.controller == controller), key=lambda s: s.start_time_s
        )
        start = own[0].start_time_s
        times: list[FloatArray] = []
        rows: list[FloatArray] = []
        last = -np.inf
        for segment in own:
            offset = segment.start_time_s - start
            if offset < last - 1e-9:
                raise ValueError(
                    f"{segment.kind} segment of {segment.joint} starts at "
                    f"{segment.start_time_s:.3f} s, before the previous {controller} segment ends"
                )
            if offset > last + 1e-9 and segment is not own[0]:
                # Hold rest until the segment starts (no interpolation across the pause).
                times.append(np.array([offset]))
                rows.append(np.asarray(segment.rest_positions, dtype=float)[None, :])
            times.append(offset + np.asarray(segment.times_s, dtype=float))
            rows.append(np.asarray(segment.positions, dtype=float))
            last = offset + segment.duration_s
        merged.append(
            ControllerExcitation(
                controller, own[0].joint_names, np.concatenate(times), np.vstack(rows), start
            )
        )
    return merged
