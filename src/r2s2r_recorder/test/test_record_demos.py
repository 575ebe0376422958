"""Demonstrations on the twin: demonstrator ↔ recorder coordination and ``record-demos``.

1. In-process: the real demonstrator and recorder nodes with a scripted stand-in for the
   twin's trial interface: one bag per trial holding that trial's messages and its outcome.
2. End to end (separate processes, the real twin, tracker and recorder): one demonstration
   recorded and converted by :func:`record_demos`, then reused from the manifest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

from r2s2r_common.ros.qos import OUTCOME_QOS  # noqa: E402
from r2s2r_description.robot import ALL_JOINT_NAMES  # noqa: E402
from r2s2r_recorder.bag_to_dataset import find_episode_bags  # noqa: E402
from r2s2r_recorder.bag_writer import open_reader, read_episode_info  # noqa: E402
from r2s2r_recorder.dataset import EpisodeDataset  # noqa: E402
from r2s2r_recorder.demos import (  # noqa: E402
    MANIFEST_NAME,
    RecordDemosConfig,
    record_demos,
)
from r2s2r_recorder.msg_types import deserialize, make_typestore  # noqa: E402
from r2s2r_recorder.nodes.recorder_node import RecorderNode  # noqa: E402
from r2s2r_sim.demonstrator.node import DemonstratorNode, Stage  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from r2s2r_interfaces.msg import TrialOutcome  # noqa: E402
from r2s2r_interfaces.srv import StartTrial  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
TOPICS = ["/joint_states", "/trial/outcome"]


class ScriptedCell:
    """The twin's trial interface, scripted: each trial publishes 5 joint states whose
    positions all equal its trial id, then its outcome (odd ids succeed)."""

    def __init__(self, context: Any, recorder: RecorderNode) -> None:
        self.node = rclpy.create_node("scripted_cell", context=context)
        self.recorder = recorder
        self.joints = self.node.create_publisher(JointState, "/joint_states", 10)
        self.outcomes = self.node.create_publisher(TrialOutcome, "/trial/outcome", OUTCOME_QOS)
        self.node.create_service(StartTrial, "/trial/start", self._on_start)
        self.recording_at_start: list[bool] = []
        self.seeds: list[int] = []
        self.trial_id = 0
        self.sent = 0
        self.time_s = 1.0
        self.node.create_timer(0.05, self._tick)

    def _on_start(self, request: Any, response: Any) -> Any:
        self.recording_at_start.append(self.recorder.engine.recording)
        self.seeds.append(int(request.seed))
        self.trial_id += 1
        self.sent = 0
        response.success, response.trial_id = True, self.trial_id
        return response

    def _tick(self) -> None:
        if self.trial_id == 0 or self.sent > 5:
            return
        self.time_s += 0.05
        stamp = rclpy.time.Time(nanoseconds=int(self.time_s * 1e9)).to_msg()
        if self.sent < 5:
            msg = JointState(name=list(ALL_JOINT_NAMES), position=[float(self.trial_id)] * 18)
            msg.header.stamp = stamp
            self.joints.publish(msg)
        else:
            outcome = TrialOutcome(
                trial_id=self.trial_id,
                seed=self.seeds[-1],
                condition="nominal",
                object_type="cube",
                success=self.trial_id % 2 == 1,
                reason="success" if self.trial_id % 2 == 1 else "dropped",
                duration_s=0.25,
            )
            outcome.header.stamp = stamp
            self.outcomes.publish(outcome)
        self.sent += 1


@pytest.fixture
def context() -> Iterator[Any]:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


def _bag_messages(bag: Path) -> dict[str, list[Any]]:
    typestore = make_typestore()
    reader = open_reader(bag)
    messages: dict[str, list[Any]] = {}
    try:
        for connection, _t, raw in reader.messages():
            msg = deserialize(typestore, raw, connection.msgtype)
            messages.setdefault(connection.topic, []).append(msg)
    finally:
        reader.close()
    return messages


@pytest.mark.parametrize(
    ("trials", "successes", "expected_trials"),
    [(3, 0, 3), (6, 3, 5)],  # a fixed count; until 3 succeed (odd trial ids do): 5 trials
)
def test_demonstrator_records_one_bag_per_trial_and_exits(
    context: Any, tmp_path: Path, trials: int, successes: int, expected_trials: int
) -> None:
    recorder = RecorderNode(
        context=context,
        parameter_overrides=[
            Parameter("output_dir", value=str(tmp_path)),
            Parameter("topics", value=TOPICS),
            Parameter("discovery_period_s", value=0.1),
        ],
    )
    cell = ScriptedCell(context, recorder)
    demonstrator = DemonstratorNode(
        context=context,
        parameter_overrides=[
            Parameter("trials", value=trials),
            Parameter("successes", value=successes),
            Parameter("seed", value=40),
            Parameter("recorder_node", value="recorder"),
            Parameter("recorder_topics", value=TOPICS),
            Parameter("recorder_settle_s", value=0.2),
            Parameter("recorder_timeout_s", value=20.0),
        ],
    )
    executor = SingleThreadedExecutor(context=context)
    for node in (recorder, cell.node, demonstrator):
        executor.add_node(node)
    try:
        executor.spin_until_future_complete(demonstrator.finished, timeout_sec=40.0)
    finally:
        executor.shutdown()
        recorder.finish()
        for node in (recorder, cell.node, demonstrator):
            node.destroy_node()

    assert demonstrator.finished.done() and demonstrator.finished.result() == 0
    assert demonstrator.stage == Stage.DONE
    assert cell.seeds == list(range(40, 40 + expected_trials))
    assert cell.recording_at_start == [True] * expected_trials  # episode before the trial
    assert demonstrator.session.attempts == expected_trials
    if successes:
        assert demonstrator.session.successes == successes and not demonstrator.session.short
    bags = find_episode_bags(tmp_path)
    assert [b.name for b in bags] == [f"episode_{i:06d}" for i in range(expected_trials)]
    for trial_id, bag in enumerate(bags, start=1):
        messages = _bag_messages(bag)
        positions = {p for m in messages["/joint_states"] for p in m.position}
        assert positions == {float(trial_id)}  # only this trial's messages
        assert len(messages["/joint_states"]) == 5  # ... and all of them
        assert [m.trial_id for m in messages["/trial/outcome"]] == [trial_id]
        info = read_episode_info(bag)
        assert info is not None
        assert info.outcome == ("success" if trial_id % 2 == 1 else "failure")
        assert f"trial_id={trial_id} seed={39 + trial_id}" in info.operator_notes


def test_demonstrator_fails_when_the_recorder_never_appears(context: Any) -> None:
    demonstrator = DemonstratorNode(
        context=context,
        parameter_overrides=[
            Parameter("trials", value=1),
            Parameter("recorder_node", value="no_such_recorder"),
            Parameter("recorder_timeout_s", value=0.5),
        ],
    )
    cell_node = rclpy.create_node("start_only", context=context)
    cell_node.create_service(StartTrial, "/trial/start", lambda _req, res: res)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(demonstrator)
    executor.add_node(cell_node)
    try:
        executor.spin_until_future_complete(demonstrator.finished, timeout_sec=10.0)
    finally:
        executor.shutdown()
        demonstrator.destroy_node()
        cell_node.destroy_node()
    assert demonstrator.finished.result() == 1
    assert demonstrator.stage == Stage.FAILED


def _track_speed_mps(times_s: np.ndarray, poses: np.ndarray, valid: np.ndarray) -> float:
    frames = np.flatnonzero(valid)
    slope = np.polyfit(times_s[frames], poses[frames, :2], 1)[0]
    return float(np.linalg.norm(slope))


@pytest.mark.graph
def test_record_demos_end_to_end_and_reuse(tmp_path: Path) -> None:
    config = RecordDemosConfig(
        episodes=1, out_dir=str(tmp_path / "demos"), seed=2, real_time_factor=1.0, timeout_s=240
    )
    with (tmp_path / "console.log").open("w") as console:
        result = record_demos(config, console=console)
    log = (tmp_path / "console.log").read_text()
    assert result.graph is not None and result.graph.ok, log[-3000:]
    assert result.exit_code == 0, result.format()
    bags = find_episode_bags(config.bags_path)
    assert len(bags) == 1

    # The bag: the trial's outcome, and metadata completed from it.
    messages = _bag_messages(bags[0])
    (outcome,) = messages["/trial/outcome"]
    assert outcome.seed == 2
    info = read_episode_info(bags[0])
    assert info is not None and info.object_type == outcome.object_type
    assert info.outcome == ("success" if outcome.success else "failure")
    belt = np.median([m.twist.linear.x for m in messages["/belt/speed"]])
    assert info.belt_speed_mps == pytest.approx(belt, abs=1e-5)
    assert 0.06 < belt < 0.14  # the twin's belt (0.105 m/s seen through the nominal roller)

    # The dataset: one episode, 10 Hz frames from the first command to the end of the bag.
    dataset = EpisodeDataset(result.dataset)
    assert len(dataset) == 1
    episode = dataset.episode(0)
    assert episode.metadata.source == "real" and episode.metadata.object_type == info.object_type
    np.testing.assert_allclose(np.diff(episode.timestamps_s), 0.1, atol=1e-6)
    joint_stamps = [_stamp_s(m) for m in messages["/joint_states"]]
    first_command = min(
        _stamp_s(m)
        for topic in ("/arm_controller/joint_trajectory", "/hand_controller/joint_trajectory")
        for m in messages[topic]
    )
    # The episode starts with the sensors (the wait before the first command is kept) ...
    first_sensor = max(
        joint_stamps[0],
        *(_stamp_s(messages[t][0]) for t in ("/head_camera/image_raw", "/hand_camera/image_raw")),
    )
    span_s = min(joint_stamps[-1], _last_image_s(messages)) - first_sensor
    assert episode.num_frames == pytest.approx(span_s * 10.0, abs=3.0)
    # ... and before the first command the action is the measured position (holding).
    before = episode.timestamps_s + episode.metadata.provenance["start_time_ns"] * 1e-9 < (
        first_command - 0.05
    )
    np.testing.assert_allclose(episode.actions[before], episode.joint_pos_rad[before], atol=1e-6)
    outcome_s = _stamp_s(outcome)
    start_s = episode.metadata.provenance["start_time_ns"] * 1e-9
    assert start_s <= outcome_s <= start_s + episode.timestamps_s[-1]  # the trial's end is in

    # Object poses from the tracker: on the belt, moving at the belt's speed.
    assert episode.object_pose is not None and episode.object_pose_valid is not None
    assert episode.object_pose_valid.sum() >= 10
    speed = _track_speed_mps(episode.timestamps_s, episode.object_pose, episode.object_pose_valid)
    assert speed == pytest.approx(belt, abs=0.03)

    # Actions line up with the measured joints: the arm follows the command in force within
    # 1 s (servo tracking of the demonstrator's short minimum-jerk segments: 0.3-0.7 s seen, the
    # error curve is flat near its minimum; a time-base mismatch between commands and sensors
    # shows up as seconds, so lags up to 4 s are searched).
    arm_q, arm_target = episode.joint_pos_rad[:, :6], episode.actions[:, :6]
    lags = range(min(40, len(arm_target) // 2))
    errors = [np.abs(arm_q[lag:] - arm_target[: len(arm_target) - lag]).mean() for lag in lags]
    assert int(np.argmin(errors)) <= 9, errors

    # Idempotent: the same request reuses the dataset without recording.
    manifest = yaml.safe_load((config.out_path / MANIFEST_NAME).read_text())
    assert manifest["complete"] and manifest["converted"] == 1
    mtime = result.dataset.stat().st_mtime_ns
    started = time.monotonic()
    again = record_demos(config, console=open(os.devnull, "w"))  # noqa: SIM115
    assert again.reused and time.monotonic() - started < 5.0
    assert result.dataset.stat().st_mtime_ns == mtime
    assert "reusing" in again.format()


def _stamp_s(msg: Any) -> float:
    return float(msg.header.stamp.sec) + 1e-9 * float(msg.header.stamp.nanosec)


def _last_image_s(messages: dict[str, list[Any]]) -> float:
    return min(
        _stamp_s(m)
        for topic in ("/head_camera/image_raw", "/hand_camera/image_raw")
        for m in messages[topic][-1:]
    )
