"""Demonstrations on the twin: demonstrator ↔ recorder coordination.

In-process: the real demonstrator and recorder nodes with a scripted stand-in for the twin's
trial interface: one bag per trial holding that trial's messages and its outcome. End to end
through the ``record_demos`` graph (``r2s2r record-demos``) is
``tests/test_record_demos_graph.py``, where the bring-up's supervisor runs the graph.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

from r2s2r_common.ros.qos import OUTCOME_QOS  # noqa: E402
from r2s2r_description.robot import ALL_JOINT_NAMES  # noqa: E402
from r2s2r_recorder.bag_reading import open_reader, read_episode_info  # noqa: E402
from r2s2r_recorder.bag_to_dataset import find_episode_bags  # noqa: E402
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
    ros_context: Any, tmp_path: Path, trials: int, successes: int, expected_trials: int
) -> None:
    recorder = RecorderNode(
        context=ros_context,
        parameter_overrides=[
            Parameter("output_dir", value=str(tmp_path)),
            Parameter("topics", value=TOPICS),
            Parameter("discovery_period_s", value=0.1),
        ],
    )
    cell = ScriptedCell(ros_context, recorder)
    demonstrator = DemonstratorNode(
        context=ros_context,
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
    executor = SingleThreadedExecutor(context=ros_context)
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


def test_demonstrator_fails_when_the_recorder_never_appears(ros_context: Any) -> None:
    demonstrator = DemonstratorNode(
        context=ros_context,
        parameter_overrides=[
            Parameter("trials", value=1),
            Parameter("recorder_node", value="no_such_recorder"),
            Parameter("recorder_timeout_s", value=0.5),
        ],
    )
    cell_node = rclpy.create_node("start_only", context=ros_context)
    cell_node.create_service(StartTrial, "/trial/start", lambda _req, res: res)
    executor = SingleThreadedExecutor(context=ros_context)
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
