import numpy as np
import pytest
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES, HOME_POSITIONS
from r2s2r_sim.controllers import (
    JointTrajectoryController,
    TrajectoryError,
    make_trajectory,
    sample_trajectory,
)
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import WorldParams

JOINTS = ("a", "b")


def controller(latency_s: float = 0.0) -> JointTrajectoryController:
    c = JointTrajectoryController(JOINTS, [-3.0, -3.0], [3.0, 3.0], latency_s)
    c.reset([0.0, 0.0])
    return c


def test_linear_interpolation_from_current_desired_and_hold() -> None:
    c = controller()
    c.command(0.0, ["b", "a"], [1.0, 2.0], [[2.0, 1.0], [0.0, 3.0]])  # reordered names
    np.testing.assert_allclose(c.update(0.5), [0.5, 1.0])
    np.testing.assert_allclose(c.update(1.5), [2.0, 1.0])
    np.testing.assert_allclose(c.update(5.0), [3.0, 0.0])
    assert not c.busy


def test_cubic_interpolation_matches_endpoint_velocities() -> None:
    traj = make_trajectory(JOINTS, JOINTS, [1.0], [[1.0, 1.0]], velocities=[[0.0, 0.0]])
    start = np.zeros(2)
    mid = sample_trajectory(traj, start, 0.5)
    np.testing.assert_allclose(mid, [0.5, 0.5])
    early = sample_trajectory(traj, start, 0.1)
    assert early[0] == pytest.approx(3 * 0.01 - 2 * 0.001)  # smoothstep, zero start velocity


def test_latency_delays_execution() -> None:
    c = controller(latency_s=0.03)
    c.command(1.0, JOINTS, [0.0], [[1.0, -1.0]])
    np.testing.assert_allclose(c.update(1.029), [0.0, 0.0])
    np.testing.assert_allclose(c.update(1.030), [1.0, -1.0])


@pytest.mark.parametrize(
    ("names", "times", "positions", "message"),
    [
        (["a"], [1.0], [[1.0]], "missing \\['b'\\]"),
        (["a", "c"], [1.0], [[1.0, 2.0]], "unknown \\['c'\\]"),
        (["a", "a"], [1.0], [[1.0, 2.0]], "each joint must appear once"),
        (["a", "b"], [1.0], [[1.0, 2.0, 3.0]], "positions shape"),
        (["a", "b"], [1.0, 0.5], [[1.0, 2.0], [1.0, 2.0]], "strictly increasing"),
        (["a", "b"], [1.0], [[np.nan, 2.0]], "finite"),
    ],
)
def test_bad_commands_are_rejected_and_nothing_changes(names, times, positions, message) -> None:
    c = controller()
    with pytest.raises(TrajectoryError, match=message):
        c.command(0.0, names, times, positions)
    assert not c.busy
    np.testing.assert_allclose(c.update(1.0), [0.0, 0.0])


def step_response(world: WorldParams, joint: str, delta_rad: float, duration_s: float):
    backend = MujocoBackend(enable_rendering=False)
    backend.reset(world, seed=0)
    index = list(ARM_JOINT_NAMES).index(joint)
    target = [HOME_POSITIONS[n] for n in ARM_JOINT_NAMES]
    target[index] += delta_rad
    t0 = backend.time_s
    backend.set_joint_targets(ARM_JOINT_NAMES, target)
    times, values = [], []
    for _ in range(int(duration_s / world.physics.timestep_s)):
        backend.step(1)
        times.append(backend.time_s - t0)
        values.append(backend.joint_positions()[index] - HOME_POSITIONS[joint])
    return np.array(times), np.array(values)


def test_latency_and_gains_shape_the_step_response(nominal_world: WorldParams) -> None:
    dt = nominal_world.physics.timestep_s
    delta = 0.1
    responses = {}
    for latency, kp_scale in [(0.0, 1.0), (0.025, 1.0), (0.0, 2.0)]:
        world = nominal_world.model_copy(deep=True)
        world.controller.latency_s = latency
        gains = world.controller.gains["elbow_joint"]
        world.controller.gains["elbow_joint"] = gains.model_copy(
            update={"kp": gains.kp * kp_scale, "kd": gains.kd * np.sqrt(kp_scale)}
        )
        responses[(latency, kp_scale)] = step_response(world, "elbow_joint", delta, 0.6)

    def onset(times, values):
        return times[np.argmax(np.abs(values) > 1e-4)]

    def rise_time(times, values):
        return times[np.argmax(values > 0.9 * delta)] - times[np.argmax(values > 0.1 * delta)]

    base_t, base_v = responses[(0.0, 1.0)]
    late_t, late_v = responses[(0.025, 1.0)]
    stiff_t, stiff_v = responses[(0.0, 2.0)]
    measured_latency = onset(late_t, late_v) - onset(base_t, base_v)
    assert abs(measured_latency - 0.025) <= dt + 1e-9
    assert abs(base_v[-1] - delta) < 0.01 * delta  # it converges to the target
    # Twice the stiffness (same damping ratio): rise time shrinks by about 1/sqrt(2).
    ratio = rise_time(stiff_t, stiff_v) / rise_time(base_t, base_v)
    assert 0.6 < ratio < 0.82


def test_backend_rejects_mixed_or_unknown_joint_names(nominal_world: WorldParams) -> None:
    backend = MujocoBackend(enable_rendering=False)
    backend.reset(nominal_world, seed=0)
    with pytest.raises(TrajectoryError, match="expected the arm joints"):
        backend.command_trajectory(["elbow_joint", "index_mcp_joint"], [1.0], [[0.0, 0.0]])
    with pytest.raises(TrajectoryError, match="missing"):
        backend.command_trajectory(list(HAND_JOINT_NAMES[:3]), [1.0], [[0.0, 0.0, 0.0]])
    q0 = backend.joint_positions()
    backend.step(50)
    np.testing.assert_allclose(backend.joint_positions(), q0, atol=1e-4)  # holds position
