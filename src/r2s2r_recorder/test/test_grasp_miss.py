"""The miss distance of a failed take: palm (FK) against the object when the hand closed (no ROS).

A synthetic take: the object moves along the belt at 0.1 m/s; the hand's MCP joints close from
-0.5 to 0.3 rad between 2.0 and 2.4 s (closed at 80 % of the rise: 2.32 s); the "forward
kinematics" is the first three arm joints read as a position, so the palm is known exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2s2r_common.topics import OBJECT_TRACKS
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_recorder.bag_format import EpisodeInfo
from r2s2r_recorder.bag_writer import EpisodeBagWriter
from r2s2r_recorder.demos_takes import TakeRecord, with_grasp_misses
from r2s2r_recorder.grasp_miss import (
    CLOSURE_JOINTS,
    GraspMiss,
    closure_index,
    grasp_miss,
    miss_lines,
    object_at,
    read_grasp_miss,
)
from r2s2r_recorder.msg_types import make_typestore

pytestmark = pytest.mark.unit

JOINT_DT_S = 0.01
TRACK_DT_S = 0.1
VELOCITY_MPS = np.array([0.0, -0.1, 0.0])
CLOSED_AT_S = 2.32
PALM_M = np.array([-0.5, 0.2, 0.15])  # where the palm stops for the grasp
BELOW_PALM_M = np.array([0.0, 0.0, -0.07])  # the object's centre under the palm
TRACKER_BIAS_M = np.array([0.03, 0.0, 0.0])


def closure_at(time_s: float) -> float:
    """Mean MCP flexion: open -0.5 rad, closing linearly over 2.0-2.4 s to 0.3 rad."""
    return float(np.interp(time_s, [0.0, 2.0, 2.4, 5.0], [-0.5, -0.5, 0.3, 0.3]))


def object_position(time_s: float, miss_m: np.ndarray) -> np.ndarray:
    """The object passes ``PALM_M + miss`` (and 7 cm lower) when the hand has closed."""
    at_closure = PALM_M + miss_m + BELOW_PALM_M
    return at_closure + VELOCITY_MPS * (time_s - CLOSED_AT_S)


def palm_fk(arm_q: np.ndarray) -> np.ndarray:
    return np.asarray(arm_q[:3], dtype=float)


def test_closure_index_reads_the_rise() -> None:
    times = np.arange(0.0, 5.0, JOINT_DT_S)
    signal = np.array([closure_at(t) for t in times])
    assert times[closure_index(signal)] == pytest.approx(CLOSED_AT_S, abs=1.5 * JOINT_DT_S)
    assert closure_index(np.full(50, -0.3)) is None  # never closed
    assert closure_index(np.linspace(-0.5, -0.3, 50)) is None  # a rise under 0.3 rad


def test_object_at_extrapolates_the_latest_sample_and_picks_the_nearest() -> None:
    times = np.array([0.0, 1.0, 1.0])
    positions = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.1, 0.0, 0.0]])
    velocities = np.tile(VELOCITY_MPS, (3, 1))
    found = object_at(1.5, times, positions, velocities, near_m=np.array([0.0, 0.0, 0.0]))
    assert found is not None
    position, age = found
    assert age == pytest.approx(0.5)
    np.testing.assert_allclose(position, [0.1, -0.05, 0.0])
    assert object_at(-0.1, times, positions, velocities) is None


def arrays(miss_m: np.ndarray) -> tuple[np.ndarray, ...]:
    joint_times = np.arange(0.0, 5.0, JOINT_DT_S)
    arm_q = np.zeros((joint_times.size, 6))
    arm_q[:, :3] = PALM_M
    closure = np.array([closure_at(t) for t in joint_times])
    track_times = np.arange(0.0, 2.05, TRACK_DT_S)  # the track ends under the hand at 2.0 s
    positions = np.stack([object_position(t, miss_m) for t in track_times])
    velocities = np.tile(VELOCITY_MPS, (track_times.size, 1))
    return joint_times, arm_q, closure, track_times, positions, velocities


def test_grasp_miss_is_the_object_minus_the_palm_at_closure() -> None:
    miss = np.array([0.02, -0.015, 0.0])
    result = grasp_miss(*arrays(miss)[:3], palm_fk, *arrays(miss)[3:], "truth")
    assert result.closure_time_s == pytest.approx(CLOSED_AT_S, abs=1.5 * JOINT_DT_S)
    assert result.offset_m is not None
    # The track ended at 2.0 s: extrapolated by its velocity to the closure.
    drift = VELOCITY_MPS * (result.closure_time_s - CLOSED_AT_S)
    np.testing.assert_allclose(result.offset_m, miss + BELOW_PALM_M + drift, atol=1e-9)
    assert result.horizontal_m == pytest.approx(0.025, abs=0.002)
    assert result.sample_age_s == pytest.approx(result.closure_time_s - 2.0)
    text = result.describe()
    assert f"palm was {100.0 * result.horizontal_m:.1f} cm from the true object" in text
    assert "7.0 cm above" in text and "tracked pose" not in text


def test_a_hand_that_never_closed_or_an_object_never_seen_gives_the_reason() -> None:
    joint_times, arm_q, _, track_times, positions, velocities = arrays(np.zeros(3))
    never = grasp_miss(
        joint_times, arm_q, np.full(joint_times.size, -0.5), palm_fk,
        track_times, positions, velocities, "tracked",
    )  # fmt: skip
    assert never.offset_m is None and never.describe() == "the hand never closed"
    unseen = grasp_miss(
        joint_times, arm_q, np.array([closure_at(t) for t in joint_times]), palm_fk,
        track_times + 3.0, positions, velocities, "tracked",
    )  # fmt: skip
    assert unseen.offset_m is None and "no tracked object pose" in unseen.detail


def test_miss_lines_print_each_failed_take_and_the_median() -> None:
    def take(bag: str, miss_m: float | None, reference: str = "truth") -> dict:
        offset = None if miss_m is None else [miss_m, 0.0, -0.07]
        figures = GraspMiss(2.3, None if offset is None else np.array(offset), reference)  # type: ignore[arg-type]
        data = figures.as_dict()
        if miss_m is None:
            data["detail"] = "the hand never closed"
        return {"bag": bag, "seed": 1, "reason": "missed_grasp", "object_type": "cube",
                "grasp_miss": data}  # fmt: skip

    takes = [
        take("episode_000000", 0.02),
        {"bag": "episode_000001", "seed": 2, "reason": "success", "object_type": "cube"},
        take("episode_000002", 0.04),
        take("episode_000003", None),
        take("episode_000004", 0.03),
    ]
    lines = miss_lines(takes)
    assert len(lines) == 5  # four failed takes, then the median
    assert lines[0].startswith("  failed take episode_000000 (seed 1, cube): missed_grasp: ")
    assert "palm was 2.0 cm from the true object" in lines[0]
    assert lines[2].endswith("missed_grasp: the hand never closed")
    assert lines[-1] == (
        "record-demos: failed takes: median miss 3.0 cm over 3 (horizontal, palm vs the true "
        "object at hand closure)"
    )
    tracked = miss_lines([take("episode_000000", 0.011, "tracked")])
    assert "tracked pose, not the truth" in tracked[0]
    assert "the hand went where the tracker put the object" in tracked[-1]
    assert miss_lines([takes[1]]) == []


TRUTH_TOPIC = "/twin/operator/object_poses"
"""A simulator's truth, recorded by a benchmark bag (not by the cell's recorder)."""


def write_take(bag_dir: Path, miss_m: np.ndarray, with_truth: bool) -> Path:
    """An episode bag with /joint_states, /objects/tracks (biased 3 cm) and maybe the truth."""
    store = make_typestore()
    T = store.types
    writer = EpisodeBagWriter(
        bag_dir,
        EpisodeInfo(
            episode_id=bag_dir.name, object_type="cube", belt_speed_mps=0.1, outcome="failure"
        ),
    )

    def header(time_s: float):  # type: ignore[no-untyped-def]
        sec = int(time_s)
        stamp = T["builtin_interfaces/msg/Time"](sec=sec, nanosec=round((time_s - sec) * 1e9))
        return T["std_msgs/msg/Header"](stamp=stamp, frame_id="base_link")

    def tracks(time_s: float, position: np.ndarray) -> bytes:
        vec = T["geometry_msgs/msg/Vector3"]
        track = T["r2s2r_interfaces/msg/ObjectTrack"](
            id=3,
            object_type="cube",
            pose=T["geometry_msgs/msg/Pose"](
                position=T["geometry_msgs/msg/Point"](*(float(v) for v in position)),
                orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
            ),
            twist=T["geometry_msgs/msg/Twist"](
                linear=vec(*(float(v) for v in VELOCITY_MPS)), angular=vec(x=0.0, y=0.0, z=0.0)
            ),
        )
        msg = T["r2s2r_interfaces/msg/ObjectTrackArray"](header=header(time_s), tracks=[track])
        return bytes(store.serialize_cdr(msg, "r2s2r_interfaces/msg/ObjectTrackArray"))

    messages: list[tuple[float, str, str, bytes]] = []
    names = [*ARM_JOINT_NAMES, *HAND_JOINT_NAMES]
    for time_s in np.arange(0.0, 3.0, JOINT_DT_S):
        position = np.zeros(len(names))
        position[:3] = PALM_M
        for joint in CLOSURE_JOINTS:
            position[names.index(joint)] = closure_at(time_s)
        msg = T["sensor_msgs/msg/JointState"](
            header=header(time_s), name=names, position=position,
            velocity=np.zeros(0), effort=np.zeros(0),
        )  # fmt: skip
        data = bytes(store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
        messages.append((time_s, "/joint_states", "sensor_msgs/msg/JointState", data))
    for time_s in np.arange(0.0, 2.05, TRACK_DT_S):
        truth = object_position(time_s, miss_m)
        kind = "r2s2r_interfaces/msg/ObjectTrackArray"
        messages.append((time_s, OBJECT_TRACKS, kind, tracks(time_s, truth + TRACKER_BIAS_M)))
        if with_truth:
            messages.append((time_s, TRUTH_TOPIC, kind, tracks(time_s, truth)))
    for time_s, topic, kind, data in sorted(messages, key=lambda m: m[0]):
        writer.add_topic(topic, kind, "default")
        writer.write(topic, data, int(1e9 * (time_s + 0.001)))
    writer.close()
    return bag_dir


def test_a_bag_gives_the_miss_against_the_topic_it_is_told(tmp_path: Path) -> None:
    miss = np.array([0.0, 0.02, 0.0])
    with_truth = read_grasp_miss(
        write_take(tmp_path / "a", miss, True), "cube", palm_fk, None, TRUTH_TOPIC, "truth"
    )
    assert with_truth.reference == "truth" and with_truth.offset_m is not None
    assert with_truth.horizontal_m == pytest.approx(0.02, abs=0.002)
    tracked = read_grasp_miss(write_take(tmp_path / "b", miss, False), "cube", palm_fk)
    assert tracked.reference == "tracked" and tracked.offset_m is not None
    np.testing.assert_allclose(tracked.offset_m[:2] - with_truth.offset_m[:2], [0.03, 0.0])


def test_record_demos_reads_the_miss_of_failed_takes_only(tmp_path: Path) -> None:
    bag = write_take(tmp_path / "episode_000000", np.array([0.02, 0.0, 0.0]), True)
    takes = [
        TakeRecord("episode_000000", 0, "failure", "missed_grasp", "cube"),
        TakeRecord("episode_000001", 1, "success", "success", "cube"),
    ]
    done = with_grasp_misses(takes, {"episode_000000": bag, "episode_000001": bag})
    assert done[1] == takes[1] and "grasp_miss" not in done[1].as_dict()
    figures = done[0].as_dict()["grasp_miss"]
    assert figures["reference"] == "tracked" and figures["miss_m"] is not None
    # The default forward kinematics is the description's: a real palm, far from this object.
    assert figures["miss_m"] > 0.05
