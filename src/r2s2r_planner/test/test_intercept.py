import numpy as np
import pytest
from r2s2r_planner.config import InterceptConfig
from r2s2r_planner.intercept import (
    BeltObjectState,
    InterceptError,
    InterceptReason,
    InterceptSolver,
)
from r2s2r_sim.backend import ObjectInstance
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import WorldParams


def make_state(
    world: WorldParams, belt_x: float, speed: float, time_s: float = 0.0
) -> BeltObjectState:
    belt = world.belt.pose.to_pose().matrix()
    return BeltObjectState((belt @ np.array([belt_x, 0.02, 0.025, 1.0]))[:3], time_s, belt, speed)


def test_intercept_on_known_geometry(nominal_world: WorldParams) -> None:
    solver = InterceptSolver(InterceptConfig(preferred_belt_x_m=-0.1))
    state = make_state(nominal_world, -0.5, 0.1)
    calls = []

    def duration(time_s, position):
        calls.append(time_s)
        return 1.5

    # plenty of time: meet it at the preferred place, 4 s after it was at -0.5
    result = solver.solve(state, 0.0, duration)
    assert result.arrival_time_s == pytest.approx(4.0, abs=1e-9)
    assert result.belt_x_m == pytest.approx(-0.1, abs=1e-9)
    # world: belt x is world +y here
    assert np.allclose(result.position_m, state.position_m + np.array([0.0, 0.4, 0.0]), atol=1e-9)
    assert result.start_time_s == pytest.approx(2.5)
    # late start: the approach decides, the object has moved on
    result = solver.solve(state, 3.5, duration)
    assert result.arrival_time_s == pytest.approx(5.0, abs=0.011)
    assert result.belt_x_m == pytest.approx(-0.5 + 0.1 * result.arrival_time_s, abs=1e-9)


def test_iterates_when_duration_depends_on_position(nominal_world: WorldParams) -> None:
    solver = InterceptSolver(InterceptConfig(preferred_belt_x_m=-0.3, tolerance_s=1e-3))
    state = make_state(nominal_world, -0.4, 0.1)
    # the further the object has travelled (belt x = world y here), the longer the approach:
    # D = 1 s + 5 s/m of travel, so t = 1 + D(t) = 2 + 0.5 t, i.e. t = 4 s
    result = solver.solve(state, 1.0, lambda t, p: 1.0 + 5.0 * (p[1] - state.position_m[1]))
    assert result.arrival_time_s == pytest.approx(4.0, abs=3e-3)
    assert result.belt_x_m == pytest.approx(-0.4 + 0.1 * result.arrival_time_s, abs=1e-9)
    assert result.iterations > 2


@pytest.mark.parametrize(
    ("belt_x", "speed", "reason"),
    [
        (0.5, 0.1, InterceptReason.PAST_ZONE),
        (-0.6, 0.0, InterceptReason.NEVER_REACHES_ZONE),
        (0.3, 0.1, InterceptReason.LEAVES_ZONE),
    ],
)
def test_refusals_name_the_reason(nominal_world: WorldParams, belt_x, speed, reason) -> None:
    solver = InterceptSolver(InterceptConfig(reach_zone_belt_x_m=(-0.35, 0.35)))
    with pytest.raises(InterceptError) as caught:
        solver.solve(
            make_state(nominal_world, belt_x, speed), 0.0, lambda t, p: 1.0, pick_duration_s=1.0
        )
    assert caught.value.reason == reason


def test_unreachable_when_the_approach_fails(nominal_world: WorldParams) -> None:
    def fail(time_s, position):
        raise RuntimeError("no IK")

    with pytest.raises(InterceptError, match=r"unreachable: .*no IK"):
        InterceptSolver().solve(make_state(nominal_world, -0.4, 0.1), 0.0, fail)


def test_prediction_matches_the_simulated_object(nominal_world: WorldParams) -> None:
    backend = MujocoBackend(enable_rendering=False)
    backend.reset(nominal_world, 0, [ObjectInstance("object_0", "cube")])
    belt = nominal_world.belt.pose.to_pose().matrix()
    backend.spawn_object("object_0", (belt @ np.array([-0.5, 0.03, 0.026, 1.0]))[:3])
    backend.step(50)  # settle onto the moving belt
    pose = backend.object_poses()["object_0"]
    state = BeltObjectState(pose.position_m, backend.time_s, belt, nominal_world.belt.speed_mps)
    result = InterceptSolver().solve(state, backend.time_s, lambda t, p: 2.0)
    backend.step(round((result.arrival_time_s - backend.time_s) / nominal_world.physics.timestep_s))
    actual = backend.object_poses()["object_0"].position_m
    assert np.linalg.norm(actual - result.position_m) < 0.01
    assert np.linalg.norm(actual - pose.position_m) > 0.2  # it did travel
