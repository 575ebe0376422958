import numpy as np
import pytest
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_sim.backend import ObjectInstance, SimBackend, belt_encoder_angle_rad
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import WorldParams

OBJECTS = [
    ObjectInstance("object_0", "cube"),
    ObjectInstance("object_1", "cylinder"),
    ObjectInstance("object_2", "block"),
]


def on_belt(world: WorldParams, belt_x: float, lateral: float, height: float) -> np.ndarray:
    pose = world.belt.pose.to_pose().matrix()
    return (pose @ np.array([belt_x, lateral, height / 2 + 0.001, 1.0]))[:3]


@pytest.mark.parametrize("speed_mps", [0.05, 0.12])
def test_objects_ride_the_belt_at_the_set_speed(
    nominal_world: WorldParams, speed_mps: float
) -> None:
    world = nominal_world.model_copy(deep=True)
    world.belt.speed_mps = speed_mps
    backend = MujocoBackend(enable_rendering=False)
    backend.reset(world, seed=0, objects=OBJECTS)
    assert isinstance(backend, SimBackend)
    for index, obj in enumerate(OBJECTS):
        size = world.objects[obj.type_name].size_m[2]
        backend.spawn_object(
            obj.name, on_belt(world, -0.6 + 0.15 * index, 0.05 * (index - 1), size)
        )
    backend.step(250)  # settle onto the belt, reach belt speed
    start = {n: p.position_m.copy() for n, p in backend.object_poses().items()}
    t0 = backend.time_s
    backend.step(1500)
    elapsed = backend.time_s - t0
    belt_x = world.belt.pose.to_pose().matrix()[:3, 0]
    for name, pose in backend.object_poses().items():
        displacement = pose.position_m - start[name]
        speed = float(displacement @ belt_x) / elapsed
        assert speed == pytest.approx(speed_mps, rel=0.01), name
        lateral = np.linalg.norm(displacement - (displacement @ belt_x) * belt_x)
        assert lateral < 0.002
    # The encoder integrates the same travel: angle = travel / roller radius.
    travel = backend.belt_travel_m
    assert travel == pytest.approx(speed_mps * backend.time_s, rel=1e-9)
    assert belt_encoder_angle_rad(travel, world.belt.roller_radius_m) == pytest.approx(
        travel / world.belt.roller_radius_m
    )


def test_get_state_set_state_replays_exactly(nominal_world: WorldParams) -> None:
    backend = MujocoBackend(enable_rendering=False)
    backend.reset(nominal_world, seed=1, objects=OBJECTS[:1])
    backend.spawn_object("object_0", on_belt(nominal_world, -0.5, 0.0, 0.05))
    backend.command_trajectory(ARM_JOINT_NAMES, [0.5], [[0.2, -1.8, 1.8, -1.5, -1.6, 0.1]])
    backend.step(100)
    state = backend.get_state()
    backend.step(200)
    q_a, obj_a = backend.joint_positions(), backend.object_poses()["object_0"].position_m
    backend.set_state(state)
    backend.step(200)
    np.testing.assert_array_equal(backend.joint_positions(), q_a)
    np.testing.assert_array_equal(backend.object_poses()["object_0"].position_m, obj_a)
