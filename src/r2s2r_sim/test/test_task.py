import numpy as np
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.task import TrialRunner, bin_containing, sample_trial
from r2s2r_world.world import WorldParams
from sim_support import cylinder_grasp_waypoints, whole_hand


def make_runner(world: WorldParams, seed: int = 3) -> TrialRunner:
    world = world.model_copy(deep=True)
    world.randomization.arrival_time_s = (0.0, 0.0)
    runner = TrialRunner(MujocoBackend(enable_rendering=False), world, sample_trial(world, seed))
    runner.start()
    return runner


def bin_point(world: WorldParams, bin_name: str) -> np.ndarray:
    return np.array(world.bins[bin_name].pose.xyz_m) + np.array([0.0, 0.0, 0.05])


def run_until_done(runner: TrialRunner, max_steps: int = 5000):
    for _ in range(max_steps // 50):
        outcome = runner.step(50)
        if outcome is not None:
            return outcome
    return None


def test_sample_trial_is_deterministic_and_follows_the_mix(nominal_world: WorldParams) -> None:
    assert sample_trial(nominal_world, 5) == sample_trial(nominal_world, 5)
    types = {sample_trial(nominal_world, s).arrivals[0].instance.type_name for s in range(40)}
    assert types == {"cube", "cylinder", "block"}  # sphere has weight 0 nominally
    plans = [sample_trial(nominal_world, s, randomize_belt_speed=True) for s in range(20)]
    speeds = [p.belt_speed_mps for p in plans]
    assert min(speeds) >= 0.07 and max(speeds) <= 0.13 and np.std(speeds) > 0.01
    offsets = [p.arrivals[0].lateral_offset_m for p in plans]
    assert min(offsets) >= -0.08 and max(offsets) <= 0.08


def test_scripted_success_and_wrong_bin(nominal_world: WorldParams) -> None:
    runner = make_runner(nominal_world)
    arrival = runner.plan.arrivals[0]
    target = nominal_world.objects[arrival.instance.type_name].target_bin
    runner.backend.spawn_object(arrival.instance.name, bin_point(nominal_world, target))
    outcome = run_until_done(runner)
    assert outcome is not None and outcome.success and outcome.reason == "success"
    assert (
        bin_containing(nominal_world, runner.backend.object_poses()["object_0"].position_m)
        == target
    )

    runner = make_runner(nominal_world)
    wrong = next(b for b in nominal_world.bins if b != target)
    runner.backend.spawn_object(arrival.instance.name, bin_point(nominal_world, wrong))
    outcome = run_until_done(runner)
    assert outcome is not None and not outcome.success and outcome.reason == "wrong_bin"


def test_dropped_after_lift(nominal_world: WorldParams) -> None:
    runner = make_runner(nominal_world)
    start, _ = runner.spawn_pose(runner.plan.arrivals[0])
    runner.backend.spawn_object(
        "object_0", start + np.array([0.0, 0.0, 0.15])
    )  # "in the hand", lifted
    runner.step(1)
    runner.backend.spawn_object("object_0", [0.0, -0.5, 0.80])  # lands on the table, no bin
    outcome = run_until_done(runner)
    assert outcome is not None and outcome.reason == "dropped"


def test_missed_grasp_when_it_falls_off_the_belt(nominal_world: WorldParams) -> None:
    runner = make_runner(nominal_world)
    pose = runner.world.belt.pose.to_pose().matrix()
    near_end = (pose @ np.array([0.77, 0.0, 0.04, 1.0]))[:3]
    runner.backend.spawn_object("object_0", near_end)
    outcome = run_until_done(runner, 3000)
    assert outcome is not None and outcome.reason == "missed_grasp"


def test_timeout_while_still_on_the_belt(nominal_world: WorldParams) -> None:
    world = nominal_world.model_copy(deep=True)
    world.task.trial_timeout_s = 0.5
    runner = make_runner(world)
    outcome = run_until_done(runner, 1000)
    assert outcome is not None and outcome.reason == "timeout" and outcome.time_s >= 0.5


def test_scripted_whole_hand_grasp_lifts_the_object(nominal_world: WorldParams) -> None:
    world = nominal_world.model_copy(deep=True)
    world.belt.speed_mps = 0.0
    world.randomization.lateral_offset_m = (0.0, 0.0)
    world.randomization.object_mix = {"cube": 0.0, "cylinder": 1.0, "block": 0.0, "sphere": 0.0}
    world.task.spawn_x_m = 0.0
    runner = make_runner(world)
    backend = runner.backend
    obj = backend.object_poses()["object_0"].position_m
    height = world.objects["cylinder"].size_m[2]
    above, at, lifted = cylinder_grasp_waypoints(world, obj, height)
    backend.command_trajectory(ARM_JOINT_NAMES, [1.5, 3.0], [above, at])
    backend.command_trajectory(HAND_JOINT_NAMES, [1.0], [whole_hand(-0.35)])
    runner.step(1700)
    backend.command_trajectory(HAND_JOINT_NAMES, [0.6], [whole_hand(1.0)])
    runner.step(400)
    backend.command_trajectory(ARM_JOINT_NAMES, [1.5], [lifted])
    runner.step(1000)
    held = backend.object_poses()["object_0"]
    assert held.position_m[2] > obj[2] + 0.17  # lifted with the hand
    palm = backend.body_pose("palm_link")[:3, 3]
    assert np.linalg.norm(held.position_m - palm) < 0.1
    assert np.linalg.norm(held.linear_velocity_mps) < 0.02  # held still, not slipping
    touching = {c.body1 for c in backend.contacts() if c.body2 == "object_0"}
    assert any(b.startswith("thumb") for b in touching) and any(
        b.startswith(("index", "middle", "ring")) for b in touching
    )
    assert not runner.done  # still in the hand: no outcome yet
