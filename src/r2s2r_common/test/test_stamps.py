"""Seconds <-> sec/nanosec: one convention (rounding, negative times, round trip)."""

from types import SimpleNamespace

import pytest
from r2s2r_common.stamps import set_stamp, split_s, stamp_to_s


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.0, (0, 0)),
        (1.5, (1, 500_000_000)),
        (2.9999999996, (3, 0)),  # rounds to the nearest nanosecond, carries into sec
        (-0.25, (-1, 750_000_000)),
        (1796141660.124174086, (1796141660, 124174118)),  # float64 resolution at this size
    ],
)
def test_split_s(seconds: float, expected: tuple[int, int]) -> None:
    assert split_s(seconds) == expected


def test_set_stamp_and_back() -> None:
    for seconds in (0.0, 0.002, 12.3456789, 1e4 + 1e-9, -3.0000000001):
        stamp = set_stamp(SimpleNamespace(sec=0, nanosec=0), seconds)
        assert 0 <= stamp.nanosec < 1_000_000_000
        assert stamp_to_s(stamp) == pytest.approx(seconds, abs=1e-9)


def test_ros_messages() -> None:
    time_module = pytest.importorskip("r2s2r_common.ros.time")
    msg = time_module.time_msg(3.25)
    assert (msg.sec, msg.nanosec) == (3, 250_000_000)
    duration = time_module.duration_msg(0.002)
    assert (duration.sec, duration.nanosec) == (0, 2_000_000)
    assert time_module.stamp_to_s(duration) == pytest.approx(0.002)
