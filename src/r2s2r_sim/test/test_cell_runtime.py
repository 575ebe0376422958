import math
from pathlib import Path

import numpy as np
import pytest
from r2s2r_common.config import ConfigError, resolve_config_path
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_description.transforms import matrix_to_quat, quat_to_matrix
from r2s2r_sim.cell_runtime import (
    CellConfig,
    CommandRejected,
    SimCell,
    TrialRequestError,
    TrialState,
)
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.pacing import RateSchedule, RealTimePacer
from r2s2r_sim.task import world_to_frame
from r2s2r_world.world import WorldParams, load_world

REPO = Path(__file__).resolve().parents[3]
TWIN = REPO / "config" / "twin" / "default.yaml"


@pytest.fixture(scope="module")
def twin_world() -> WorldParams:
    return load_world(TWIN)


def headless_cell(world: WorldParams, nominal: WorldParams) -> SimCell:
    return SimCell(
        MujocoBackend(enable_rendering=False),
        world,
        nominal,
        CellConfig(render_cameras=False),
    )


def run(cell: SimCell, seconds: float) -> list:
    return [cell.step_control() for _ in range(round(seconds / cell.control_period_s))]


def arm_indices() -> list[int]:
    return [ALL_JOINT_NAMES.index(n) for n in ARM_JOINT_NAMES]


def test_bad_commands_are_rejected_counted_and_the_robot_holds(
    twin_world: WorldParams, nominal_world: WorldParams
) -> None:
    cell = headless_cell(twin_world, nominal_world)
    run(cell, 0.3)
    before = cell.backend.joint_positions()
    home = before[arm_indices()]
    bad = [
        ("arm", ["shoulder_pan_joint", "bogus"], [1.0], [[0.1, 0.2]], "unknown ['bogus']"),
        ("arm", list(HAND_JOINT_NAMES), [1.0], [[0.1] * 12], "expected ['shoulder_pan"),
        ("arm", list(ARM_JOINT_NAMES), [1.0], [[0.1] * 5], "has 5 values: expected 6"),
        ("arm", list(ARM_JOINT_NAMES), [1.0], [[math.nan] * 6], "finite"),
        ("arm", list(ARM_JOINT_NAMES), [1.0, 0.5], [list(home)] * 2, "strictly increasing"),
        ("arm", list(ARM_JOINT_NAMES), [], [], "≥ 1 point"),
        ("gripper", list(ARM_JOINT_NAMES), [1.0], [list(home)], "controller = 'gripper'"),
    ]
    for count, (controller, names, times, positions, reason) in enumerate(bad, start=1):
        with pytest.raises(CommandRejected, match=None) as error:
            cell.command(controller, names, times, positions)
        assert reason in str(error.value), str(error.value)
        assert cell.counters.rejected == count
        assert reason in cell.counters.last_rejection
    with pytest.raises(CommandRejected, match="velocities has 3 values"):
        cell.command("arm", ARM_JOINT_NAMES, [1.0], [list(home)], [[0.0] * 3])
    assert cell.counters.rejected == len(bad) + 1 and cell.counters.accepted == 0
    run(cell, 0.5)
    after = cell.backend.joint_positions()
    assert np.max(np.abs(after - before)) < 2e-3  # held at home


def test_valid_command_moves_the_arm_and_a_future_start_waits(
    twin_world: WorldParams, nominal_world: WorldParams
) -> None:
    cell = headless_cell(twin_world, nominal_world)
    home = cell.backend.joint_positions()[arm_indices()]
    target = home + np.array([0.3, -0.2, 0.2, 0.0, 0.0, 0.1])
    # Reversed joint order is fine (reordered by name), as in ros2_control.
    cell.command("arm", list(reversed(ARM_JOINT_NAMES)), [0.5], [list(reversed(target))])
    assert cell.counters.accepted == 1
    run(cell, 1.5)
    reached = cell.backend.joint_positions()[arm_indices()]
    assert np.max(np.abs(reached - target)) < 0.02
    # header.stamp in the future: the arm holds until then, then moves.
    start_s = cell.time_s + 0.4
    cell.command("arm", ARM_JOINT_NAMES, [0.3], [list(home)], start_time_s=start_s)
    run(cell, 0.35)
    assert np.max(np.abs(cell.backend.joint_positions()[arm_indices()] - target)) < 0.02
    run(cell, 1.2)
    assert np.max(np.abs(cell.backend.joint_positions()[arm_indices()] - home)) < 0.02


def test_camera_schedule_depth_and_encoder(
    twin_world: WorldParams, nominal_world: WorldParams
) -> None:
    world = twin_world.model_copy(deep=True)
    world.cameras.hand.rate_hz = 5.0
    cell = SimCell(MujocoBackend(), world, nominal_world, CellConfig(encoder_rate_hz=50.0))
    steps = run(cell, 1.0)
    head = [f for s in steps for f in s.frames if f.camera_name == "head_camera"]
    hand = [f for s in steps for f in s.frames if f.camera_name == "hand_camera"]
    # A capture every 1 / rate: 10 head and 5 hand frames in 1 s.
    assert len(head) == 10 and len(hand) == 5
    assert head[0].time_s == pytest.approx(0.1) and hand[-1].time_s == pytest.approx(1.0)
    assert np.allclose(np.diff([f.time_s for f in head]), 0.1, atol=1e-6)
    assert np.allclose(np.diff([f.time_s for f in hand]), 0.2, atol=1e-6)
    assert head[-1].rgb.shape == (128, 128, 3) and head[-1].rgb.dtype == np.uint8
    assert head[-1].depth_m is not None and head[-1].depth_m.dtype == np.float32
    assert all(f.depth_m is None for f in hand)
    valid = head[-1].depth_m[head[-1].depth_m > 0]
    assert 0.8 < float(np.median(valid)) < 3.0  # looking down at the cell from ~1.75 m
    assert float(head[-1].rgb.std()) > 5.0  # a real picture, not a blank frame
    encoder = [s.encoder_angle_rad for s in steps if s.encoder_angle_rad is not None]
    assert len(encoder) == 50  # 50 Hz for 1 s
    assert np.all(np.diff(encoder) > 0.0)
    expected = cell.backend.belt_travel_m / world.belt.roller_radius_m
    assert encoder[-1] == pytest.approx(expected, rel=1e-9)
    assert encoder[-1] == pytest.approx(world.belt.speed_mps * 1.0 / world.belt.roller_radius_m)
    assert cell.costs.render_s > 0.0 and cell.costs.sim_s == pytest.approx(1.0)
    # Nobody watches the hand camera or the depth: they are not rendered (schedule unchanged).
    cell.camera_demand["hand_camera"] = False
    cell.depth_demand = False
    frames = [f for s in run(cell, 0.4) for f in s.frames]
    assert [f.camera_name for f in frames] == ["head_camera"] * 4
    assert all(f.depth_m is None for f in frames)
    cell.camera_demand["hand_camera"] = True
    frames = [f for s in run(cell, 0.2) for f in s.frames]
    assert [f.time_s for f in frames if f.camera_name == "hand_camera"] == [pytest.approx(1.6)]


def test_trial_flow_with_scripted_teleport_success(
    twin_world: WorldParams, nominal_world: WorldParams
) -> None:
    world = twin_world.model_copy(deep=True)
    world.randomization.arrival_time_s = (0.0, 0.0)
    cell = headless_cell(world, nominal_world)
    run(cell, 0.2)
    encoder_before, time_before = cell.encoder_angle_rad, cell.time_s
    assert cell.trial_state == TrialState.IDLE and cell.trial_id == 0
    trial_id = cell.start_trial(seed=7)
    assert trial_id == 1 and cell.trial_state == TrialState.RUNNING
    # Cell time and encoder continue across the backend reset.
    assert cell.time_s == pytest.approx(time_before) and cell.encoder_angle_rad >= encoder_before
    step = cell.step_control()
    assert step.outcome is None
    tracks = cell.object_tracks()
    assert len(tracks) == 1 and tracks[0].track_id == 0
    world_pose = cell.backend.object_poses()["object_0"]
    base = world.robot.base_pose.to_pose().matrix()
    assert np.allclose(tracks[0].position_m, world_to_frame(base, world_pose.position_m))
    assert np.allclose(
        tracks[0].linear_velocity_mps, base[:3, :3].T @ world_pose.linear_velocity_mps
    )
    expected_quat = matrix_to_quat(base[:3, :3].T @ quat_to_matrix(world_pose.quat_wxyz))
    assert abs(np.dot(tracks[0].quat_wxyz, expected_quat)) == pytest.approx(1.0)
    # The "operator" puts the object into its bin.
    type_name = tracks[0].object_type
    target = world.objects[type_name].target_bin
    in_bin = np.array(world.bins[target].pose.xyz_m) + np.array([0.0, 0.0, 0.05])
    cell.backend.spawn_object("object_0", in_bin)
    outcomes = [s.outcome for s in run(cell, 2.0) if s.outcome is not None]
    assert len(outcomes) == 1
    result = outcomes[0]
    assert result.success and result.reason == "success" and result.trial_id == 1
    assert result.seed == 7 and result.object_type == type_name and result.condition == ""
    assert 0.3 <= result.duration_s <= 2.0
    assert cell.trial_state == TrialState.FINISHED and cell.counters.trials_finished == 1
    # Next trial under a shift; then one aborted by a reset.
    assert cell.start_trial(seed=8, condition="belt_speed") == 2
    assert cell.world.belt.speed_mps == pytest.approx(0.15)
    assert cell.backend.belt_speed_mps == pytest.approx(0.15)  # type: ignore[attr-defined]
    run(cell, 0.1)
    cell.reset()
    assert cell.trial_state == TrialState.IDLE and cell.counters.trials_aborted == 1
    assert cell.world.belt.speed_mps == pytest.approx(world.belt.speed_mps)
    assert cell.object_tracks() == []
    with pytest.raises(TrialRequestError, match="condition = 'snow'"):
        cell.start_trial(seed=1, condition="snow")
    with pytest.raises(TrialRequestError, match="seed = -1"):
        cell.start_trial(seed=-1)
    assert cell.trial_state == TrialState.IDLE


def test_timeout_outcome_when_nobody_picks(
    twin_world: WorldParams, nominal_world: WorldParams
) -> None:
    world = twin_world.model_copy(deep=True)
    world.task.trial_timeout_s = 0.4
    cell = headless_cell(world, nominal_world)
    cell.start_trial(seed=1)
    outcomes = [s.outcome for s in run(cell, 0.6) if s.outcome is not None]
    assert len(outcomes) == 1 and outcomes[0].reason == "timeout" and not outcomes[0].success
    assert outcomes[0].duration_s == pytest.approx(0.4, abs=0.005)


def test_published_calibration_and_mounts_are_nominal(
    twin_world: WorldParams, nominal_world: WorldParams
) -> None:
    cell = headless_cell(twin_world, nominal_world)
    calibration = cell.camera_calibration("head_camera")
    head = nominal_world.cameras.head
    assert twin_world.cameras.head.fx_px != head.fx_px  # the hidden truth differs...
    assert calibration.k[0, 0] == head.fx_px and calibration.k[1, 2] == head.cy_px  # ...not shown
    assert calibration.distortion_model == "plumb_bob" and np.all(calibration.d == 0.0)
    assert np.allclose(calibration.p[:, :3], calibration.k)
    mounts = {(m.parent, m.child): m for m in cell.static_transforms()}
    assert set(mounts) >= {
        ("world", "base_link"),
        ("world", "belt_link"),
        ("world", "bin_0_link"),
        ("world", "head_camera_link"),
        ("head_camera_link", "head_camera_optical_frame"),
        ("palm_link", "hand_camera_link"),
        ("hand_camera_link", "hand_camera_optical_frame"),
    }
    base = mounts[("world", "base_link")]
    assert base.translation_m == pytest.approx(nominal_world.robot.base_pose.xyz_m)
    # Quaternions up to sign: yaw π, and the REP 103 optical rotation (z forward, y down).
    assert abs(np.dot(base.quat_wxyz, (0.0, 0.0, 0.0, 1.0))) == pytest.approx(1.0)
    optical = mounts[("head_camera_link", "head_camera_optical_frame")]
    assert abs(np.dot(optical.quat_wxyz, (0.5, -0.5, 0.5, -0.5))) == pytest.approx(1.0)


def test_rate_schedule_and_pacer() -> None:
    schedule = RateSchedule(10.0)
    due = [t for t in np.arange(1, 501) * 0.002 if schedule.due(float(t))]
    assert len(due) == 10 and due[0] == pytest.approx(0.1) and due[-1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="rate_hz = 0"):
        RateSchedule(0.0)
    pacer = RealTimePacer(0.002, real_time_factor=2.0, max_lag_s=0.25, max_periods_per_call=50)
    pacer.start(100.0)
    assert pacer.due(100.0) == 0
    assert pacer.due(100.01) == 10  # 0.01 s wall x 2 = 0.02 s sim = 10 periods
    pacer.done(10)
    assert pacer.due(100.01) == 0
    assert pacer.due(100.05) == 40
    pacer.done(40)
    assert pacer.achieved_rtf(100.05) == pytest.approx(2.0)
    # Fall 1 s (sim) behind: the backlog is dropped, one call's worth stays due.
    assert pacer.due(100.55) == 50 and pacer.lag_resets == 1
    pacer.done(50)
    assert pacer.due(100.55) == 0
    # A reset held the cell for 45 ms: it resumes from there, no 2x burst to catch up.
    pacer.resume(100.595)
    assert pacer.due(100.595) == 0
    assert pacer.due(100.6) == 5 and pacer.lag_resets == 1
    with pytest.raises(ValueError, match="real_time_factor = 0"):
        RealTimePacer(0.002, real_time_factor=0.0)


def test_resolve_config_path(tmp_path: Path) -> None:
    assert resolve_config_path("twin/default.yaml").read_text() == TWIN.read_text()
    assert resolve_config_path(TWIN) == TWIN
    with pytest.raises(ConfigError, match=r"nope\.yaml: file not found"):
        resolve_config_path("twin/nope.yaml")
    with pytest.raises(ConfigError, match="file not found"):
        resolve_config_path(tmp_path / "missing.yaml")
