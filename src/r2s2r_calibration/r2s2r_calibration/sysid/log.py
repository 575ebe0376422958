"""The logged ``/joint_states`` of an excitation, and the checks that refuse an unusable log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES

from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.config import SysIdConfig
from r2s2r_calibration.sysid.excitation import ExcitationSegment


class SysIdLogError(CalibrationError):
    """A system-identification log is unusable: gaps, missing joints, a joint that never moved."""


@dataclass
class JointStateLog:
    """Logged ``/joint_states``: stamps on the cell clock and joint vectors.

    Attributes:
        stamps_s: (K,) increasing stamps (s).
        positions: (K, J) positions (rad), columns in ``joint_names`` order.
        velocities: (K, J) velocities (rad/s).
        joint_names: The column names.

    """

    stamps_s: FloatArray
    positions: FloatArray
    velocities: FloatArray
    joint_names: tuple[str, ...] = ALL_JOINT_NAMES

    def column(self, joint: str) -> int:
        """Column of ``joint``.

        Raises:
            SysIdLogError: If the log has no such joint.

        """
        if joint not in self.joint_names:
            raise SysIdLogError(
                f"joint {joint!r} is not in the log (joints: {list(self.joint_names)}); "
                "record /joint_states with every joint of the robot"
            )
        return self.joint_names.index(joint)

    def window(self, start_s: float, end_s: float) -> FloatArray:
        """Boolean mask of the samples with ``start_s <= stamp <= end_s``."""
        mask = (self.stamps_s >= start_s - 1e-9) & (self.stamps_s <= end_s + 1e-9)
        return np.asarray(mask, dtype=bool)  # type: ignore[return-value]


def check_log(
    log: JointStateLog,
    segments: Sequence[ExcitationSegment],
    config: SysIdConfig | None = None,
) -> None:
    """Refuse a log that cannot identify the segments' joints.

    Raises:
        SysIdLogError: Empty or unordered log; a joint missing from it; a segment window
            (with its pre-roll) not covered or with a gap (naming the segment and the missing
            time span); a joint that never moved in its step segment.

    """
    cfg = config or SysIdConfig()
    stamps = np.asarray(log.stamps_s, dtype=float)
    if stamps.size < 3:
        raise SysIdLogError(
            f"the joint-state log has {stamps.size} samples; record /joint_states during the "
            "whole excitation"
        )
    if np.any(np.diff(stamps) <= 0.0):
        raise SysIdLogError("joint-state stamps are not strictly increasing; expected one clock")
    for name in {s.joint for s in segments}:
        log.column(name)
    median = float(np.median(np.diff(stamps)))
    for segment in segments:
        start = segment.start_time_s - cfg.preroll_s
        end = segment.end_time_s
        if stamps[0] > start + median or stamps[-1] < end - median:
            raise SysIdLogError(
                f"{segment.kind} segment of {segment.joint} spans {start:.3f}..{end:.3f} s but "
                f"the log covers {stamps[0]:.3f}..{stamps[-1]:.3f} s; record from before the "
                "first command to after the last segment"
            )
        inside = stamps[(stamps >= start - median) & (stamps <= end + median)]
        gaps = np.diff(inside)
        worst = int(np.argmax(gaps)) if gaps.size else 0
        if gaps.size and gaps[worst] > cfg.max_gap_factor * median:
            raise SysIdLogError(
                f"joint-state log has a gap of {gaps[worst] * 1000:.1f} ms "
                f"({inside[worst]:.3f}..{inside[worst + 1]:.3f} s, expected a sample every "
                f"{median * 1000:.1f} ms) in the {segment.kind} segment of {segment.joint}; "
                "samples were dropped: re-record with a reliable subscription or repeat that "
                "joint's excitation"
            )
        if segment.kind == "step":
            column = log.column(segment.joint)
            mask = log.window(segment.start_time_s, end)
            moved = float(np.ptp(log.positions[mask, column])) if np.any(mask) else 0.0
            if moved >= cfg.min_motion_fraction * segment.amplitude_rad:
                # The response must begin within the largest latency searched (plus the servo's
                # rise): later means the command arrived after its stamp and started late.
                values = log.positions[mask, column]
                departed = np.abs(values - values[0]) > 0.2 * segment.amplitude_rad
                onset = float(log.stamps_s[mask][int(np.argmax(departed))] - segment.start_time_s)
                limit_s = cfg.max_latency_s + cfg.max_rise_s
                if onset > limit_s:
                    raise SysIdLogError(
                        f"joint {segment.joint} started its step {onset * 1000:.0f} ms after the "
                        f"command time (expected within {limit_s * 1000:.0f} ms): the command "
                        "arrived late; send it further ahead"
                    )
            if moved < cfg.min_motion_fraction * segment.amplitude_rad:
                raise SysIdLogError(
                    f"joint {segment.joint} moved {moved:.5f} rad in its step segment (commanded "
                    f"{segment.amplitude_rad} rad, need at least "
                    f"{cfg.min_motion_fraction * segment.amplitude_rad:.5f}); the command was not "
                    "executed: check that the controller is active and accepts the trajectory"
                )
