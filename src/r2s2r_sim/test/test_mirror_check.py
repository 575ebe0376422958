"""The mirror's live grounding check (ROS-free): TF chains, palm matching, belt-carried objects."""

from __future__ import annotations

import numpy as np
import pytest
from r2s2r_description.transforms import make_transform, matrix_to_quat, rot_z
from r2s2r_sim.mirror_check import (
    BeltGeometry,
    BeltObjectCheck,
    Level,
    MirrorCheckError,
    MirrorLimits,
    MirrorMeasurement,
    PositionHistory,
    TransformBuffer,
    input_ages,
    mirror_status,
    palm_error_m,
    rest_heights_m,
    static_scene_match,
)
from r2s2r_world.cell_identity import StaticSceneLimits

IDENTITY_Q = (1.0, 0.0, 0.0, 0.0)


def test_transform_buffer_chains_to_the_root_and_reports_the_moving_stamp() -> None:
    buffer = TransformBuffer()
    base = make_transform((0.1, 0.2, 0.75), rot_z(np.pi))
    buffer.set_transform("world", "base_link", base[:3, 3], matrix_to_quat(base[:3, :3]), None)
    buffer.set_transform("base_link", "link_1", (0.0, 0.0, 0.3), IDENTITY_Q, 1_000)
    buffer.set_transform("link_1", "palm_link", (0.5, 0.0, 0.0), IDENTITY_Q, 1_000)
    pose, stamp = buffer.lookup("world", "palm_link")
    # base yawed by pi: +0.5 m along link x is -0.5 m along world x
    np.testing.assert_allclose(pose[:3, 3], (0.1 - 0.5, 0.2, 1.05), atol=1e-12)
    assert stamp == 1_000
    assert buffer.lookup("world", "base_link")[1] is None  # static only
    buffer.set_transform("link_1", "palm_link", (0.5, 0.0, 0.0), IDENTITY_Q, 2_000)
    with pytest.raises(MirrorCheckError, match="2 different stamps"):
        buffer.lookup("world", "palm_link")
    with pytest.raises(MirrorCheckError, match="no transform to 'camera'"):
        buffer.lookup("world", "camera")
    with pytest.raises(MirrorCheckError, match="zero quaternion"):
        buffer.set_transform("a", "b", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), None)
    with pytest.raises(MirrorCheckError, match="not finite"):
        buffer.set_transform("a", "b", (np.nan, 0.0, 0.0), IDENTITY_Q, None)
    loop = TransformBuffer(max_depth=8)
    loop.set_transform("b", "a", (0.0, 0.0, 0.0), IDENTITY_Q, None)
    loop.set_transform("a", "b", (0.0, 0.0, 0.0), IDENTITY_Q, None)
    with pytest.raises(MirrorCheckError, match="no root within 8"):
        loop.lookup("world", "a")


def test_position_history_matches_by_stamp() -> None:
    history = PositionHistory(max_entries=3)
    for k in range(5):
        history.add(k * 10, (float(k), 0.0, 0.0))
    exact, nearest = history.at(40, 0), history.at(32, 3)
    assert exact is not None and exact[0] == 4.0
    assert nearest is not None and nearest[0] == 3.0  # nearest within the tolerance
    assert history.at(10, 2) is None  # dropped (only the last 3 are kept)
    assert history.at(35, 2) is None
    assert palm_error_m((0.0, 0.0, 0.0), (0.003, 0.004, 0.0)) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="max_entries"):
        PositionHistory(0)


def _belt() -> BeltGeometry:
    pose = make_transform((0.0, -0.6, 0.8), rot_z(np.pi / 2))  # belt x along world y
    return BeltGeometry(pose, 1.6, 0.3, rest_heights_m({"cube": (0.05, 0.05, 0.05)}))


def _on_belt(belt: BeltGeometry, x: float, y: float, z: float) -> np.ndarray:
    return (belt.pose @ np.array([x, y, z, 1.0]))[:3]


def test_an_object_riding_the_belt_as_the_world_says_has_no_error() -> None:
    belt = _belt()
    check = BeltObjectCheck(belt)
    assert check.update(0.0, [(1, "cube", _on_belt(belt, -0.7, 0.05, 0.025))]) == []  # no speed
    check.set_belt_speed(0.1)
    for k in range(20):
        t = 0.1 * k
        residuals = check.update(t, [(1, "cube", _on_belt(belt, -0.7 + 0.1 * t, 0.05, 0.025))])
        (residual,) = residuals
        assert residual.error_m < 1e-9 and residual.mean_error_m < 1e-9
        np.testing.assert_allclose(
            residual.predicted_m, _on_belt(belt, -0.7 + 0.1 * t, 0.05, 0.025), atol=1e-9
        )
    assert residual.samples == 20


@pytest.mark.parametrize(
    ("what", "track", "expected_m"),
    [
        # the perception sees the object 1 cm above the mirror's belt (a tilted camera, a belt
        # that moved): the whole height offset is error
        ("height", lambda t: (-0.7 + 0.1 * t, 0.0, 0.035), 0.010),
        # the belt really runs 10 % faster than /belt/speed says (a wrong roller radius): the
        # track drifts from the fit; after 2 s its final error is a few mm and grows with time
        ("speed", lambda t: (-0.7 + 0.11 * t, 0.0, 0.025), 0.0098),
    ],
)
def test_objects_off_the_mirrors_belt_show_as_error(
    what: str, track: object, expected_m: float
) -> None:
    belt = _belt()
    check = BeltObjectCheck(belt, window=1)
    check.set_belt_speed(0.1)
    for k in range(21):
        t = 0.1 * k
        (residual,) = check.update(t, [(4, "cube", _on_belt(belt, *track(t)))])  # type: ignore[operator,list-item]
    assert residual.error_m == pytest.approx(expected_m, abs=1e-3), what


def test_a_constant_in_plane_offset_is_not_observable() -> None:
    belt = _belt()
    check = BeltObjectCheck(belt)
    check.set_belt_speed(0.1)
    for k in range(10):
        t = 0.1 * k
        (residual,) = check.update(t, [(2, "cube", _on_belt(belt, -0.67 + 0.1 * t, 0.03, 0.025))])
    assert residual.mean_error_m < 1e-9


def test_objects_off_the_belt_and_unknown_types_are_left_out() -> None:
    belt = _belt()
    check = BeltObjectCheck(belt, lifted_m=0.03)
    check.set_belt_speed(0.1)
    tracks = [
        (1, "cube", _on_belt(belt, 0.0, 0.0, 0.025 + 0.05)),  # lifted: in the hand
        (2, "cube", _on_belt(belt, 0.9, 0.0, 0.025)),  # past the belt's end
        (3, "cube", _on_belt(belt, 0.0, 0.2, 0.025)),  # beside the belt
        (4, "ball", _on_belt(belt, 0.0, 0.0, 0.025)),  # a type the world does not know
        (5, "cube", _on_belt(belt, 0.0, 0.0, 0.025)),
    ]
    assert [r.track_id for r in check.update(0.0, tracks)] == [5]
    with pytest.raises(MirrorCheckError, match="not finite"):
        check.set_belt_speed(float("nan"))
    with pytest.raises(ValueError, match="lifted_m"):
        BeltObjectCheck(belt, lifted_m=0.0)


def test_status_names_stale_inputs_first_then_each_error() -> None:
    limits = MirrorLimits(0.001, 0.02, {"/joint_states": 0.5, "/tf": 1.0})
    fresh = input_ages({"/joint_states": 9.9, "/tf": 9.5}, 10.0)
    assert fresh == pytest.approx({"/joint_states": 0.1, "/tf": 0.5})
    assert mirror_status(MirrorMeasurement(0.0005, 0.01, fresh), limits) == (
        Level.OK,
        "following the real cell (palm 0.5 mm; objects 10.0 mm; "
        "static scene: no head depth compared yet)",
    )
    # Nothing to compare is said, check by check: an empty belt is not a pass.
    assert mirror_status(MirrorMeasurement(None, None, fresh), limits) == (
        Level.OK,
        "following the real cell (palm: no matched sample yet; objects: none on the belt to "
        "compare; static scene: no head depth compared yet)",
    )
    level, message = mirror_status(MirrorMeasurement(0.004, 0.03, fresh), limits)
    assert level == Level.WARN
    assert "palm 4.0 mm off the cell's TF (limit 1.0)" in message
    assert "tracked object 30.0 mm off the mirror's belt (limit 20.0)" in message
    stale = {"/joint_states": 0.1, "/tf": None}
    assert mirror_status(MirrorMeasurement(0.004, None, stale), limits) == (
        Level.WARN,
        "stale: no recent /tf",
    )


def _table_view(offset_m: float = 0.0) -> np.ndarray:
    depth = np.full((64, 64), 1.3 + offset_m, np.float32)
    depth[10:30, 30:50] -= 0.2  # a bin
    return depth


def test_static_scene_checks_the_grounding_with_an_empty_belt() -> None:
    limits = MirrorLimits(0.001, 0.02, {"/tf": 1.0})
    fresh = {"/tf": 0.1}
    scene_limits = StaticSceneLimits()
    same = static_scene_match(_table_view(0.002), _table_view(), scene_limits)
    level, message = mirror_status(MirrorMeasurement(None, None, fresh, same), limits)
    assert level == Level.OK and "static scene same: median 2.0 mm off" in message
    assert "objects: none on the belt to compare" in message
    moved = static_scene_match(_table_view(0.05), _table_view(), scene_limits)
    level, message = mirror_status(MirrorMeasurement(None, None, fresh, moved), limits)
    assert level == Level.WARN
    assert "static scene 50 mm median off the mirror's view, 100 % of it far" in message
    blind = static_scene_match(np.zeros((64, 64), np.float32), _table_view(), scene_limits)
    assert (
        "static scene nothing to compare"
        in mirror_status(MirrorMeasurement(None, None, fresh, blind), limits)[1]
    )
    with pytest.raises(MirrorCheckError, match="static scene"):
        static_scene_match(np.zeros((4, 4)), _table_view(), scene_limits)
