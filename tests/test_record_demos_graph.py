"""``r2s2r record-demos`` end to end: the ``record_demos`` graph under the one supervisor.

The twin, the demonstrator, the recorder and the tracker as processes record one take; its bag
and the converted episode are checked, and the same request is then reused without recording.
The verb refuses bad counts before anything records.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

os.environ.setdefault("MUJOCO_GL", "egl")
pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

from r2s2r_recorder.bag_reading import open_reader, read_episode_info
from r2s2r_recorder.bag_to_dataset import find_episode_bags
from r2s2r_recorder.demos_config import MANIFEST_NAME, RecordDemosConfig
from r2s2r_recorder.msg_types import deserialize, make_typestore

from r2s2r.cli.record_demos import record_demos_command
from r2s2r.pipeline.demos import record_demos_on_twin
from r2s2r_dataset import EpisodeDataset


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
        result = record_demos_on_twin(config, console=console)
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
    # The episode starts with the sensors (the wait before the first command is kept) and
    # ends with them: all four (joints, both cameras, the belt speed) must be there, so a
    # belt_speed node that starts late on a loaded machine shortens the episode.
    belt_stamps = [_stamp_s(m) for m in messages["/belt/speed"]]
    first_sensor = max(
        joint_stamps[0],
        belt_stamps[0],
        *(_stamp_s(messages[t][0]) for t in ("/head_camera/image_raw", "/hand_camera/image_raw")),
    )
    span_s = min(joint_stamps[-1], belt_stamps[-1], _last_image_s(messages)) - first_sensor
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
    again = record_demos_on_twin(config, console=open(os.devnull, "w"))  # noqa: SIM115
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


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "exactly one of --episodes N and --successes N"),
        (["-n", "3", "--successes", "2"], "exactly one of --episodes N and --successes N"),
        (["-n", "3", "--max-attempts", "4"], "--max-attempts goes with --successes"),
        (["--successes", "5", "--max-attempts", "4"], "--max-attempts 4 < --successes 5"),
    ],
)
def test_the_cli_refuses_bad_counts_before_recording(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    result = CliRunner().invoke(record_demos_command, ["--out", str(tmp_path / "o"), *arguments])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "o").exists()


def test_artifact_records_on_the_grounded_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import r2s2r.cli.record_demos as verb

    seen: list[RecordDemosConfig] = []

    def record(config: RecordDemosConfig, console: Any = None) -> Any:
        seen.append(config)
        raise verb.RecordDemosError("stop here")

    monkeypatch.setattr(verb, "record_demos_on_twin", record)
    artifact = Path(__file__).resolve().parent / "data" / "grounding_default_twin.yaml"
    out = tmp_path / "o"
    arguments = ["--out", str(out), "-n", "1", "--artifact", str(artifact), "--launch-arg", "x:=1"]
    result = CliRunner().invoke(record_demos_command, arguments)
    assert result.exit_code == 2 and "stop here" in result.output, result.output
    (config,) = seen
    export = out / "grounded_cell"
    assert config.launch_args == [
        f"grounding_artifact:={artifact}",
        "tracker_anchor_to_belt:=false",
        f"head_camera_info:={export / 'head_camera.yaml'}",
        f"hand_camera_info:={export / 'hand_camera.yaml'}",
        "x:=1",
    ]
    bad = CliRunner().invoke(
        record_demos_command, ["--out", str(out), "-n", "1", "--artifact", str(tmp_path / "no")]
    )
    assert bad.exit_code == 2 and "--artifact" in bad.output and "not found" in bad.output
