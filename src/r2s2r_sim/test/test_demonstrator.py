"""Human-like demonstrator: success on the twin, variation, style vs a planner, valid commands."""

from pathlib import Path

import numpy as np
import pytest
from r2s2r_common.config import ConfigError, parse_config
from r2s2r_description.robot import (
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
    JOINT_LIMITS,
)
from r2s2r_sim.demonstrator import (
    DemonstratorStyle,
    HumanLikeDemonstrator,
    JointCommand,
    Observation,
    run_demo_on_backend,
)
from r2s2r_sim.demonstrator.driver import run_planner_reference_on_backend
from r2s2r_sim.demonstrator.hand import BELT_CLEARANCE_M, cage_preshape
from r2s2r_sim.demonstrator.motion import LinearMotion, Quintic, SmoothTrack, minimum_jerk
from r2s2r_sim.demonstrator.style import StyleError, style_metrics, trapezoid_profile
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import WorldParams, load_world

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def twin() -> WorldParams:
    return load_world(REPO / "config" / "twin" / "default.yaml")


@pytest.fixture(scope="module")
def nominal() -> WorldParams:
    return load_world(REPO / "config" / "world" / "nominal.yaml")


@pytest.fixture(scope="module")
def backend() -> MujocoBackend:
    return MujocoBackend(enable_rendering=False)


@pytest.fixture(scope="module")
def demo_seed0(backend: MujocoBackend, twin: WorldParams, nominal: WorldParams):  # type: ignore[no-untyped-def]
    return run_demo_on_backend(backend, twin, 0, reach_world=nominal)


def test_minimum_jerk_and_quintic_boundaries() -> None:
    assert minimum_jerk(0.0) == 0.0 and minimum_jerk(1.0) == 1.0
    assert minimum_jerk(0.5) == pytest.approx(0.5)
    assert minimum_jerk(-1.0) == 0.0 and minimum_jerk(2.0) == 1.0
    q = Quintic.fit(np.zeros(3), np.ones(3), 2.0, start_velocity=np.array([0.3, 0.0, 0.0]))
    assert np.allclose(q(0.0), 0.0) and np.allclose(q(2.0), 1.0)
    assert np.allclose((q(1e-4) - q(0.0)) / 1e-4, [0.3, 0.0, 0.0], atol=1e-3)
    assert np.allclose((q(2.0) - q(2.0 - 1e-4)) / 1e-4, 0.0, atol=1e-3)
    with pytest.raises(ValueError, match="duration_s"):
        Quintic.fit(np.zeros(3), np.ones(3), 0.0)


def test_smooth_track_corrections_do_not_jump() -> None:
    track = SmoothTrack(LinearMotion(np.zeros(3), np.array([0.1, 0.0, 0.0]), 0.0))
    before = track.position(1.0)
    track.correct(
        1.0, LinearMotion(np.array([0.12, 0.02, 0.0]), np.array([0.1, 0.0, 0.0]), 1.0), 0.3
    )
    assert np.allclose(track.position(1.0), before)  # continuous at the correction
    assert np.allclose(track.velocity(1.0), [0.1, 0.0, 0.0], atol=1e-3)  # and smooth
    assert np.allclose(track.position(1.5), [0.17, 0.02, 0.0])  # converged to the new estimate
    track.correct(
        2.0, LinearMotion(np.array([0.22, 0.02, 0.0]), np.array([0.1, 0.0, 0.0]), 2.0), 0.3
    )
    assert np.allclose(track.position(3.0), [0.32, 0.02, 0.0])


def test_cage_preshape_keeps_fingers_outside_and_above_the_belt() -> None:
    shape = cage_preshape(0.05, 0.025)
    assert np.all(shape.closed[1:] > shape.open[1:] - 1e-9)  # closing only curls
    assert np.sum(shape.closed[1:] - shape.open[1:] > 0.1) >= 8  # every digit closes
    lower = cage_preshape(0.045, 0.02)
    taller = cage_preshape(0.07, 0.025)
    assert taller.palm_above_top_m < shape.palm_above_top_m  # tall objects: palm closer
    assert lower.palm_above_top_m > 0.0 and BELT_CLEARANCE_M > 0.0


def test_style_config_rejects_bad_ranges() -> None:
    with pytest.raises(ConfigError, match="reach_duration_s"):
        parse_config(DemonstratorStyle, {"reach_duration_s": [2.0, 1.0]})
    with pytest.raises(ConfigError, match="perception_lag_s"):
        parse_config(DemonstratorStyle, {"perception_lag_s": -0.1})


def test_one_demonstration_on_the_twin_succeeds(demo_seed0) -> None:  # type: ignore[no-untyped-def]
    result = demo_seed0
    assert result.outcome.success, result.outcome
    assert result.picks_started == 1
    assert 5.0 < result.episode_time_s < 20.0
    hand = result.joint_positions[:, len(ARM_JOINT_NAMES) :]
    assert np.ptp(hand, axis=0)[1:].min() > 0.3  # every flexion joint moved: whole hand


def test_commands_are_valid_joint_trajectories(demo_seed0) -> None:  # type: ignore[no-untyped-def]
    assert demo_seed0.commands
    controllers = set()
    for _, command in demo_seed0.commands:
        assert isinstance(command, JointCommand)
        names = ARM_JOINT_NAMES if command.controller == "arm" else HAND_JOINT_NAMES
        assert command.controller in ("arm", "hand") and command.joint_names == names
        assert command.positions.shape == (command.times_s.size, len(names))
        assert command.times_s[0] > 0.0 and np.all(np.diff(command.times_s) > 0.0)
        lower = np.array([JOINT_LIMITS[n].lower_rad for n in names])
        upper = np.array([JOINT_LIMITS[n].upper_rad for n in names])
        assert np.all(command.positions >= lower - 1e-9)
        assert np.all(command.positions <= upper + 1e-9)
        controllers.add(command.controller)
    assert controllers == {"arm", "hand"}


def test_demonstrations_vary_with_the_seed(
    backend: MujocoBackend, twin: WorldParams, nominal: WorldParams, demo_seed0
) -> None:  # type: ignore[no-untyped-def]
    other = run_demo_on_backend(backend, twin, 0, reach_world=nominal, demonstrator_seed=7)
    assert other.outcome.success, other.outcome
    ik = HumanLikeDemonstrator(nominal, 0).ik
    n = min(len(other.times_s), len(demo_seed0.times_s))
    palm_a = np.array([ik.forward(q[:6])[:3, 3] for q in demo_seed0.joint_positions[:n]])
    palm_b = np.array([ik.forward(q[:6])[:3, 3] for q in other.joint_positions[:n]])
    assert np.max(np.linalg.norm(palm_a - palm_b, axis=1)) > 0.05  # visibly different paths

    def closure_time(result) -> float:  # type: ignore[no-untyped-def]
        hand_commands = [t for t, c in result.commands if c.controller == "hand"]
        return float(hand_commands[1])  # pre-shape, then closure

    assert abs(closure_time(other) - closure_time(demo_seed0)) > 0.05  # and timing


def test_style_differs_from_the_planner_style_reference(
    backend: MujocoBackend, twin: WorldParams, nominal: WorldParams, demo_seed0
) -> None:  # type: ignore[no-untyped-def]
    ik = HumanLikeDemonstrator(nominal, 0).ik
    human = style_metrics(demo_seed0.times_s, demo_seed0.joint_positions, ik)
    reference = run_planner_reference_on_backend(backend, twin, 0, reach_world=nominal)
    planner = style_metrics(reference.times_s, reference.joint_positions, ik)
    assert human.speed_peak_to_mean > planner.speed_peak_to_mean + 0.15  # bell vs trapezoid
    assert human.plateau_fraction < planner.plateau_fraction - 0.1
    assert planner.joint_straightness < 1.01 < human.joint_straightness  # straight in joints
    assert human.hand_closure_fraction > 0.9 and planner.hand_closure_fraction < 0.5


def test_style_metrics_on_ideal_profiles(nominal: WorldParams) -> None:
    ik = HumanLikeDemonstrator(nominal, 0).ik
    times = np.arange(0.0, 3.0, 0.01)
    start = np.array([0.0, -1.9, 1.9, -1.5708, -1.5708, 0.0])
    delta = np.array([0.8, 0.2, -0.3, 0.1, 0.0, 0.2])

    def trajectory(progress: np.ndarray) -> np.ndarray:
        arm = start + progress[:, None] * delta
        return np.hstack([arm, np.zeros((times.size, 12))])

    bell = np.array([minimum_jerk((t - 0.5) / 2.0) for t in times])
    trapezoid = trapezoid_profile(2.0, times - 0.5)
    m_bell = style_metrics(times, trajectory(bell), ik)
    m_trap = style_metrics(times, trajectory(trapezoid), ik)
    assert m_bell.speed_peak_to_mean > m_trap.speed_peak_to_mean + 0.2
    assert m_bell.normalized_jerk < m_trap.normalized_jerk
    assert m_bell.joint_straightness == pytest.approx(1.0, abs=1e-6)
    assert m_bell.hand_closure_fraction == 0.0
    with pytest.raises(StyleError, match="shape"):
        style_metrics(times, np.zeros((times.size, 6)), ik)


def test_act_rejects_a_wrong_joint_vector(nominal: WorldParams) -> None:
    demonstrator = HumanLikeDemonstrator(nominal, 0)
    with pytest.raises(ValueError, match="joint_positions"):
        demonstrator.act(Observation(0.0, np.zeros(6)))
    assert demonstrator.act(Observation(0.0, np.zeros(18))) == []  # nothing to pick: no command


def test_node_message_conversions() -> None:
    from types import SimpleNamespace

    from r2s2r_description.robot import ALL_JOINT_NAMES
    from r2s2r_sim.demonstrator.node import joint_vector, objects_from_msg, to_trajectory_msg
    from sensor_msgs.msg import JointState

    command = JointCommand(
        "hand", HAND_JOINT_NAMES, np.array([0.25, 1.5]), np.tile(np.linspace(0, 1, 12), (2, 1))
    )
    msg = to_trajectory_msg(command)
    assert list(msg.joint_names) == list(HAND_JOINT_NAMES) and len(msg.points) == 2
    assert msg.points[1].time_from_start.sec == 1
    assert msg.points[1].time_from_start.nanosec == 500_000_000
    assert msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0  # start now
    names = list(reversed(ALL_JOINT_NAMES))
    state = JointState(name=names, position=[float(i) for i in range(18)])
    vector = joint_vector(state)
    assert vector is not None and vector[0] == 17.0 and vector[-1] == 0.0
    assert joint_vector(JointState(name=names[:6], position=[0.0] * 6)) is None
    point = SimpleNamespace
    track = point(
        id=4,
        object_type="cube",
        pose=point(
            position=point(x=1.0, y=2.0, z=3.0), orientation=point(w=1.0, x=0.0, y=0.0, z=0.0)
        ),
        twist=point(linear=point(x=0.1, y=0.0, z=0.0)),
    )
    (obs,) = objects_from_msg(point(tracks=[track]))
    assert obs.object_id == "4" and obs.type_name == "cube"
    assert np.allclose(obs.position_m, [1, 2, 3]) and np.allclose(obs.velocity_mps, [0.1, 0, 0])


def test_a_take_after_a_wound_up_one_succeeds_and_comes_home_unwound(
    backend: MujocoBackend, twin: WorldParams, nominal: WorldParams
) -> None:
    """Through ROS the first joint state a new take sees can still be the previous take's last
    pose (the cell's reset is not yet published): here base and wrist a full turn from home,
    the same pose in space. The demonstrator must plan from the arm as it is measured once it
    rests (it failed IK on that stale pose and never reached: missed_grasp), and come home
    the way it went (it used to continue round and wind base and wrist a turn: seed 4)."""
    from r2s2r_sim.demonstrator.driver import observe, send
    from r2s2r_sim.task import TrialRunner, sample_trial

    seed = 4
    runner = TrialRunner(backend, twin, sample_trial(twin, seed))
    runner.start()
    demonstrator = HumanLikeDemonstrator(nominal, seed)
    first = observe(backend, twin)
    wound = first.joint_positions.copy()
    wound[[0, 5]] -= 2.0 * np.pi
    demonstrator.act(Observation(first.time_s - 0.02, wound))
    outcome, arm, after_s = None, [], 0.0
    while after_s < 4.0:  # on past the outcome: the return home
        observation = observe(backend, twin)
        arm.append(observation.joint_positions[:6])
        for command in demonstrator.act(observation):
            send(backend, command)
        result = runner.step(10)
        outcome = outcome or result
        after_s += 0.02 if outcome is not None else 0.0
    assert outcome is not None and outcome.success, outcome
    assert demonstrator.ik_failures == 0 and demonstrator.phase.value == "done"
    home = np.array([HOME_POSITIONS[name] for name in ARM_JOINT_NAMES])
    np.testing.assert_allclose(arm[-1], home, atol=0.05)
    assert np.abs(np.array(arm)[:, [0, 5]]).max() < 1.5 * np.pi  # never a turn from home


def test_no_pick_starts_for_an_object_already_past_the_grasp_zone(nominal: WorldParams) -> None:
    """A track that outlives its object (a tracker coasting after the cell's reset) or an
    object that got away is downstream of every intercept: no reach starts for it."""
    from r2s2r_sim.demonstrator import ObjectObservation, Phase

    demonstrator = HumanLikeDemonstrator(nominal, 0)
    velocity = np.array([0.0, -0.1, 0.0])  # along base -y, as on the twin's belt
    belt_z = demonstrator.belt_top_z_m + nominal.objects["cube"].size_m[2] / 2.0
    home = np.array([HOME_POSITIONS[name] for name in (*ARM_JOINT_NAMES, *HAND_JOINT_NAMES)])

    def sees(y_m: float, object_id: str, time_s: float) -> Phase:
        cube = ObjectObservation(
            object_id, "cube", np.array([-0.47, y_m, belt_z]), np.array([1.0, 0, 0, 0]), velocity
        )
        demonstrator.act(Observation(time_s, home, (cube,), time_s - 0.2))
        return demonstrator.phase

    past = -demonstrator.style.intercept_along_m[1] - 0.05  # along = -y
    assert sees(past, "7", 1.0) == Phase.IDLE
    assert sees(0.5, "8", 1.02) == Phase.WAITING  # upstream: the operator gets ready
