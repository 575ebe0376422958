"""``builtin_interfaces`` Time and Duration messages of times in seconds (cell time).

The conversion itself (rounding, negative times) is :mod:`r2s2r_common.stamps`; this module only
builds the messages, for the node modules.
"""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time

from r2s2r_common.stamps import split_s, stamp_to_s

__all__ = ["duration_msg", "stamp_to_s", "time_msg"]


def time_msg(seconds: float) -> Time:
    """``builtin_interfaces/Time`` of a time in seconds."""
    sec, nanosec = split_s(seconds)
    return Time(sec=sec, nanosec=nanosec)


def duration_msg(seconds: float) -> Duration:
    """``builtin_interfaces/Duration`` of a duration in seconds."""
    sec, nanosec = split_s(seconds)
    return Duration(sec=sec, nanosec=nanosec)
