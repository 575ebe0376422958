"""Seconds <-> ``builtin_interfaces`` Time/Duration fields: one convention for every module.

A stamp is the cell's clock as ``sec`` + ``nanosec`` (``0 <= nanosec < 1e9``); seconds are a
float. The conversion rounds to the nearest nanosecond (``stamp_to_s(set_stamp(t, s))`` gives
back ``s`` to within 0.5 ns plus the float's own resolution). ROS-free: it works on rclpy
messages, rosbags messages and anything else with ``sec`` and ``nanosec`` attributes (the
message constructors for nodes are in :mod:`r2s2r_common.ros.time`).
"""

from __future__ import annotations

import math
import struct
from typing import Any, TypeVar

NANOSECONDS_PER_S = 1_000_000_000

StampT = TypeVar("StampT")


def stamp_to_s(stamp: Any) -> float:
    """Seconds of a ``builtin_interfaces/Time`` or ``Duration`` (or anything with their fields)."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def stamp_to_ns(stamp: Any) -> int:
    """Integer nanoseconds of a ``builtin_interfaces/Time`` (or anything with its fields)."""
    return int(stamp.sec) * NANOSECONDS_PER_S + int(stamp.nanosec)


def serialized_stamp_ns(data: bytes) -> int | None:
    """Return the header stamp (ns) of a CDR-serialized message that starts with a Header.

    CDR: a 4-byte encapsulation header (byte 1: 0 big-endian, 1 little-endian), then the
    stamp's int32 seconds and uint32 nanoseconds. None when ``data`` is too short or not CDR.
    Lets a node read a raw subscription's stamp without decoding the whole message.
    """
    if len(data) < 12 or data[0] != 0 or data[1] not in (0, 1):
        return None
    sec, nanosec = struct.unpack_from("<iI" if data[1] == 1 else ">iI", data, 4)
    return int(sec) * NANOSECONDS_PER_S + int(nanosec)


def split_s(seconds: float) -> tuple[int, int]:
    """``(sec, nanosec)`` of a time in seconds, rounded to the nearest nanosecond.

    Negative times give a negative ``sec`` and ``0 <= nanosec < 1e9`` (``-0.25 s`` is
    ``(-1, 750000000)``), as ``builtin_interfaces/Time`` represents them. The whole seconds are
    split off first, so wall-clock stamps (1.7e9 s) keep their sub-microsecond part.
    """
    sec = math.floor(seconds)
    nanosec = round((seconds - sec) * NANOSECONDS_PER_S)
    if nanosec >= NANOSECONDS_PER_S:  # rounded up into the next second
        sec, nanosec = sec + 1, nanosec - NANOSECONDS_PER_S
    return int(sec), int(nanosec)


def set_stamp(target: StampT, seconds: float) -> StampT:
    """Fill ``target.sec`` and ``target.nanosec`` with ``seconds`` and return ``target``."""
    sec, nanosec = split_s(seconds)
    target.sec, target.nanosec = sec, nanosec  # type: ignore[attr-defined]
    return target
