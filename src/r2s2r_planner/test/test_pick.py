import numpy as np
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_planner.collision import CollisionChecker
from r2s2r_planner.pick import PickPlanner, plan_and_execute_pick
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.task import sample_trial
from r2s2r_world.world import WorldParams


def test_planner_pick_succeeds_on_the_nominal_world(
    nominal_world: WorldParams, pick_planner: PickPlanner
) -> None:
    plan = sample_trial(nominal_world, 1)
    seen = []
    result = plan_and_execute_pick(
        MujocoBackend(enable_rendering=False),
        nominal_world,
        plan,
        np.random.default_rng(1),
        planner=pick_planner,
        step_callback=lambda runner: seen.append(runner.backend.time_s),
    )
    assert result.outcome.success, result.failure_reason
    assert result.failure_reason == ""
    arm, hand = result.commands
    assert arm.controller == "arm" and arm.joint_names == ARM_JOINT_NAMES
    assert hand.controller == "hand" and hand.joint_names == HAND_JOINT_NAMES
    assert np.all(np.diff(arm.times_s) > 0) and arm.positions.shape == (arm.times_s.size, 6)
    pick = result.plan
    assert (
        pick is not None
        and pick.target_bin == nominal_world.objects[plan.arrivals[0].instance.type_name].target_bin
    )
    phases = pick.phase_times_s
    assert (
        phases["approach_start"]
        < phases["arrival"]
        < phases["grasp"]
        < phases["lifted"]
        < phases["released"]
    )
    # pinch style: the hand closes only thumb and index
    moved = np.abs(hand.positions.max(axis=0) - hand.positions.min(axis=0)) > 1e-6
    assert {HAND_JOINT_NAMES[i] for i in np.where(moved)[0]} <= {
        "thumb_mcp_joint",
        "thumb_ip_joint",
        "index_mcp_joint",
        "index_pip_joint",
        "index_dip_joint",
    }
    # the planned transport is collision-free under a dense re-check
    assert pick.plans["transport"].dense_check.valid
    checker = CollisionChecker(nominal_world.layout(), 0.0, pick.grasp.pinch.pre_grasp)
    approach = pick.plans["approach"].trajectory.positions
    assert checker.check_path(approach, 0.002).valid
    assert len(seen) > 10 and result.timings["sim_s"] > phases["released"]


def test_unreachable_trial_fails_with_a_reason(
    nominal_world: WorldParams, pick_planner: PickPlanner
) -> None:
    world = nominal_world.model_copy(deep=True)
    world.belt.speed_mps = 0.0
    plan = sample_trial(world, 2)  # the object stays at the spawn point, outside the reach zone
    result = plan_and_execute_pick(
        MujocoBackend(enable_rendering=False),
        world,
        plan,
        np.random.default_rng(0),
        planner=pick_planner,
    )
    assert not result.outcome.success
    assert result.failure_reason.startswith("intercept_never_reaches_zone")
    assert result.commands == []


def test_shipped_planner_config_loads() -> None:
    from pathlib import Path

    from r2s2r_planner.config import PlannerConfig, load_planner_config

    path = Path(__file__).resolve().parents[3] / "config" / "planner" / "planner.yaml"
    assert load_planner_config(path) == PlannerConfig()
