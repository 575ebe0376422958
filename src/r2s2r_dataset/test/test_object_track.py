"""The tracked-object observation: the latch over /objects/tracks messages (no ROS)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from r2s2r_dataset import (
    ObjectTrackLatch,
    TrackView,
    object_track_fields,
    type_names_of,
    yaw_from_quat,
)

TYPES = ["cube", "cylinder", "block", "sphere"]


def view(track_id: int, type_name: str, x: float, yaw: float = 0.0) -> TrackView:
    return TrackView(track_id, type_name, np.array([x, 0.5, 0.1]), np.array([0.0, -0.1, 0.0]), yaw)


def column(latch: ObjectTrackLatch, name: str) -> int:
    return latch.fields.index(name)


def test_fields_round_trip_and_refuse_bad_layouts() -> None:
    fields = object_track_fields(TYPES)
    assert fields[-4:] == ["type_cube", "type_cylinder", "type_block", "type_sphere"]
    assert type_names_of(fields) == TYPES
    with pytest.raises(ValueError, match="not an object-track layout"):
        type_names_of(["x_m", "type_cube"])
    with pytest.raises(ValueError, match="duplicate"):
        object_track_fields(["cube", "cube"])


def test_before_any_track_only_the_age_is_set() -> None:
    latch = ObjectTrackLatch(TYPES, max_age_s=5.0)
    latch.update(0.0, [])
    features = latch.features(1.0)
    assert features[column(latch, "age_s")] == 5.0
    assert features[column(latch, "has_track")] == 0.0
    assert np.count_nonzero(features) == 1


def test_target_is_held_while_missing_and_age_grows() -> None:
    latch = ObjectTrackLatch(TYPES)
    latch.update(1.0, [view(3, "block", -0.6, yaw=0.25)])
    seen = latch.features(1.05)
    assert seen[column(latch, "visible")] == 1.0
    assert seen[column(latch, "age_s")] == pytest.approx(0.05)
    assert seen[column(latch, "type_block")] == 1.0 and seen[column(latch, "type_cube")] == 0.0
    assert seen[column(latch, "yaw2_cos")] == pytest.approx(math.cos(0.5))
    assert seen[column(latch, "yaw4_sin")] == pytest.approx(math.sin(1.0))
    latch.update(1.1, [])  # the hand took it: the tracker sees nothing
    held = latch.features(2.1)
    np.testing.assert_allclose(held[:6], seen[:6])
    assert held[column(latch, "visible")] == 0.0
    assert held[column(latch, "age_s")] == pytest.approx(1.1)
    assert held[column(latch, "type_block")] == 1.0  # the bin is still known


def test_target_follows_its_id_then_the_oldest_confirmed_track() -> None:
    latch = ObjectTrackLatch(TYPES)
    latch.update(0.0, [view(5, "cube", -0.5), view(2, "sphere", -0.7)])
    assert latch.features(0.0)[column(latch, "type_sphere")] == 1.0  # smallest id first
    latch.update(0.1, [view(5, "cube", -0.5), view(2, "sphere", -0.68)])
    assert latch.features(0.1)[0] == pytest.approx(-0.68)
    latch.update(0.2, [view(5, "cube", -0.49)])  # its target gone, another present: switch
    features = latch.features(0.2)
    assert features[column(latch, "type_cube")] == 1.0 and features[0] == pytest.approx(-0.49)
    latch.reset()
    assert latch.features(0.3)[column(latch, "has_track")] == 0.0


def test_unknown_types_are_counted_not_taken() -> None:
    latch = ObjectTrackLatch(["cube"])
    latch.update(0.0, [view(1, "teapot", -0.5)])
    assert latch.unknown_types == 1
    assert latch.features(0.0)[column(latch, "has_track")] == 0.0


def test_yaw_of_a_quaternion() -> None:
    yaw = 0.7
    assert yaw_from_quat((math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))) == pytest.approx(yaw)
