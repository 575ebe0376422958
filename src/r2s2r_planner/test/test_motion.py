import numpy as np
import pytest
from r2s2r_description.robot import ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_planner.collision import AttachedObject, CollisionChecker, Obstacle
from r2s2r_planner.config import MotionConfig, TimingConfig
from r2s2r_planner.hand import PinchHand
from r2s2r_planner.motion import (
    MotionPlanner,
    MoveItPyPlanner,
    MoveItUnavailableError,
    OmplPlanner,
    PlanningError,
    PlanRequest,
    make_planner,
)
from r2s2r_planner.timing import arm_limits, time_parameterize
from r2s2r_world.kinematics import PalmIk, top_down_palm_pose
from r2s2r_world.world import WorldParams

HOME = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
HAND = PinchHand().configure(0.05)


def wall_between(ik: PalmIk, a: np.ndarray, b: np.ndarray) -> Obstacle:
    """A wall through the palm's straight-line path midway between a and b."""
    middle = ik.forward(0.5 * (a + b))[:3, 3]
    pose = np.eye(4)
    pose[:3, 3] = middle + np.array([0.0, 0.0, -0.05])
    return Obstacle("wall", (0.5, 0.02, 0.3), pose)


def test_planned_paths_are_collision_free_under_dense_recheck(nominal_world: WorldParams) -> None:
    ik = PalmIk(nominal_world.layout())
    a = ik.solve(top_down_palm_pose([0.5, -0.25, 1.0], 0.0), HOME)
    b = ik.solve(top_down_palm_pose([0.5, 0.25, 1.0], 0.0), a)
    wall = wall_between(ik, a, b)
    planner = OmplPlanner(nominal_world.layout(), MotionConfig(timeout_s=5.0), obstacles=[wall])
    assert isinstance(planner, MotionPlanner)
    request = PlanRequest(a, b, HAND.pre_grasp)
    fresh = CollisionChecker(nominal_world.layout(), 0.01, HAND.pre_grasp, obstacles=[wall])
    assert not fresh.check_path(np.stack([a, b]), 0.002).valid  # the wall blocks the straight line
    result = planner.plan(request)
    assert result.attempts >= 1 and len(result.waypoints) > 2
    assert np.allclose(result.waypoints[0], a) and np.allclose(result.waypoints[-1], b)
    # an independent, denser re-check of the path and of every timed trajectory sample
    assert fresh.check_path(result.waypoints, 0.002).valid
    assert fresh.check_path(result.trajectory.positions, 0.002).valid
    assert min(fresh.clearance(q) for q in result.trajectory.positions) >= 0.01 - 1e-6


def test_transport_with_attached_object_keeps_clearance(nominal_world: WorldParams) -> None:
    ik = PalmIk(nominal_world.layout())
    start = ik.solve(top_down_palm_pose([0.55, 0.0, 1.0], 0.0), HOME)
    seed = HOME.copy()
    seed[0] += 2.2
    goal = ik.solve(top_down_palm_pose([-0.4, -0.32, 1.10], 0.0), seed)
    held = np.eye(4)
    held[:3, 3] = HAND.center_palm_m
    attached = AttachedObject(nominal_world.objects["cube"], held)
    planner = OmplPlanner(nominal_world.layout())
    result = planner.plan(PlanRequest(start, goal, HAND.closed, attached))
    checker = CollisionChecker(nominal_world.layout(), 0.01, HAND.closed, attached)
    assert checker.check_path(result.trajectory.positions, 0.002).valid


def test_dense_recheck_catches_a_grazing_contact_that_sparse_checking_misses(
    nominal_world: WorldParams,
) -> None:
    layout = nominal_world.layout()
    ik = PalmIk(layout)
    a = ik.solve(top_down_palm_pose([0.5, -0.15, 1.05], 0.0), HOME)
    b = a.copy()
    b[0] += 0.3  # a pan sweep: 0.3 rad
    # a small post grazed by the index fingertip between two sparse samples (0.1 rad apart)
    probe = CollisionChecker(layout, 0.0, HAND.pre_grasp)
    probe.is_valid(a + 0.15 * (b - a) / 0.3)
    tip = probe.data.xpos[probe.model.body("index_distal_link").id]
    pose = np.eye(4)
    pose[:3, 3] = tip
    post = Obstacle("post", (0.012, 0.012, 0.012), pose)
    checker = CollisionChecker(layout, 0.0, HAND.pre_grasp, obstacles=[post])
    sparse = checker.check_path(np.stack([a, b]), 0.1)
    dense = checker.check_path(np.stack([a, b]), 0.004)
    assert sparse.valid and sparse.checked_states == 4
    assert not dense.valid and "post" in dense.contact
    assert 0.3 < dense.fraction < 0.7


def test_start_in_collision_is_named(nominal_world: WorldParams) -> None:
    planner = OmplPlanner(nominal_world.layout())
    low = HOME.copy()
    low[1] = 0.3  # upper arm down through the table
    with pytest.raises(PlanningError, match="start in collision"):
        planner.plan(PlanRequest(low, HOME, HAND.open))


def test_time_parameterization_respects_limits_and_stays_straight() -> None:
    config = TimingConfig(velocity_scale=0.5, max_acceleration_radps2=3.0, sample_period_s=0.01)
    path = np.array(
        [
            HOME,
            HOME + np.array([1.0, -0.4, 0.3, 0.0, 0.5, -1.0]),
            HOME + np.array([0.2, 0.1, 0, 0.3, 0, 0]),
        ]
    )
    trajectory = time_parameterize(path, config)
    velocity, acceleration, _ = arm_limits(config)
    assert np.all(np.diff(trajectory.times_s) > 0)
    assert np.all(np.abs(trajectory.velocities) <= velocity + 1e-6)
    assert np.all(np.abs(trajectory.accelerations) <= acceleration + 1e-6)
    # finite differences agree with the reported velocities, and stay within the limits
    fd_velocity = np.diff(trajectory.positions, axis=0) / np.diff(trajectory.times_s)[:, None]
    assert np.all(np.abs(fd_velocity) <= velocity + 1e-3)
    # time-optimal: the limiting joint reaches its velocity limit on the long first segment
    assert np.max(np.abs(trajectory.velocities[:, 5]) / velocity[5]) > 0.99
    # every sample lies on the straight segment between vertices
    first = (
        trajectory.times_s
        <= trajectory.times_s[np.where((trajectory.positions == path[1]).all(axis=1))[0][0]]
    )
    direction = (path[1] - path[0]) / np.linalg.norm(path[1] - path[0])
    offsets = trajectory.positions[first] - path[0]
    residual = offsets - np.outer(offsets @ direction, direction)
    assert np.max(np.abs(residual)) < 1e-6
    assert np.allclose(trajectory.positions[-1], path[-1]) and np.allclose(
        trajectory.velocities[-1], 0
    )


def test_moveit_backend_raises_a_clear_error_here(nominal_world: WorldParams) -> None:
    with pytest.raises(MoveItUnavailableError, match="moveit_py is not importable"):
        MoveItPyPlanner()
    with pytest.raises(MoveItUnavailableError):
        make_planner("moveit", nominal_world.layout())
    with pytest.raises(ValueError, match="expected 'ompl' or 'moveit'"):
        make_planner("chomp", nominal_world.layout())
