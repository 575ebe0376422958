"""Run the demonstrator directly against a simulator backend (fast; for tests and benches).

The driver plays the operator's side of the twin's interface without ROS: it shows the
demonstrator the joint positions and the objects' true poses and velocities in ``base_link``
(what the twin's operator view publishes) and forwards its commands to the backend's
controllers (what the twin does with ``/arm_controller`` and ``/hand_controller`` messages).
The trial and its success predicate are :class:`r2s2r_sim.task.TrialRunner`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from r2s2r_description.controllers import JointCommand
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_description.transforms import matrix_to_quat, quat_to_matrix
from r2s2r_world.world import WorldParams

from r2s2r_sim.backend import FloatArray, SimBackend
from r2s2r_sim.demonstrator.config import DemonstratorStyle
from r2s2r_sim.demonstrator.core import HumanLikeDemonstrator, ObjectObservation, Observation
from r2s2r_sim.task import TrialOutcome, TrialPlan, TrialRunner, sample_trial


@dataclass
class DemoResult:
    """One demonstration on the backend.

    Attributes:
        plan: The trial that was played.
        outcome: The success predicate's judgement.
        episode_time_s: Simulated time until the outcome was decided.
        times_s: (K,) recording times.
        joint_positions: (K, 18) measured joints at ``times_s`` (what ``/joint_states`` gives).
        commands: ``(time_s, command)`` for every command sent.
        picks_started: Reaches the demonstrator started.

    """

    plan: TrialPlan
    outcome: TrialOutcome
    episode_time_s: float
    times_s: FloatArray
    joint_positions: FloatArray
    commands: list[tuple[float, JointCommand]] = field(default_factory=list)
    picks_started: int = 0


def observe(backend: SimBackend, world: WorldParams) -> Observation:
    """Return what the twin's operator view shows: joints and active objects in ``base_link``.

    Args:
        backend: The simulator.
        world: The world the backend runs (its true base pose expresses poses in base_link).

    """
    base = world.robot.base_pose.to_pose().matrix()
    rotation_t, origin = base[:3, :3].T, base[:3, 3]
    objects = []
    for pose in backend.object_poses().values():
        if not pose.active:
            continue
        objects.append(
            ObjectObservation(
                object_id=pose.name,
                type_name=pose.type_name,
                position_m=rotation_t @ (pose.position_m - origin),
                quat_wxyz=matrix_to_quat(rotation_t @ quat_to_matrix(pose.quat_wxyz)),
                velocity_mps=rotation_t @ pose.linear_velocity_mps,
            )
        )
    return Observation(backend.time_s, backend.joint_positions(), tuple(objects))


def send(backend: SimBackend, command: JointCommand) -> None:
    """Forward a command to the backend's controller (as the twin does with a message)."""
    backend.command_trajectory(command.joint_names, command.times_s.tolist(), command.positions)


def run_demo_on_backend(
    backend: SimBackend,
    world: WorldParams,
    seed: int,
    reach_world: WorldParams | None = None,
    style: DemonstratorStyle | None = None,
    act_period_s: float = 0.02,
    record_period_s: float = 0.02,
    demonstrator_seed: int | None = None,
) -> DemoResult:
    """Play trial ``seed`` of ``world`` with a demonstrator seeded by ``seed``.

    Args:
        backend: The simulator (e.g. ``MujocoBackend(enable_rendering=False)``).
        world: The world the simulator runs (e.g. the twin's).
        seed: Trial seed and demonstrator seed.
        reach_world: What the demonstrator believes about the cell (the NOMINAL world when
            ``world`` is the twin's); defaults to ``world``.
        style: Demonstrator style.
        act_period_s: How often the demonstrator looks and acts.
        record_period_s: Recording period of the measured joints.
        demonstrator_seed: Seed of the demonstrator's style draw (``seed`` if None): the same
            trial with another demonstrator seed is another demonstration of it.

    Returns:
        The outcome, the recorded joint trajectory and the commands sent.

    Raises:
        ValueError: If a period is not a positive multiple of the physics timestep.

    """
    timestep = world.physics.timestep_s
    act_steps = round(act_period_s / timestep)
    record_every = round(record_period_s / act_period_s)
    if act_steps < 1 or record_every < 1:
        raise ValueError(
            f"act_period_s = {act_period_s}, record_period_s = {record_period_s}: expected "
            f"≥ timestep_s = {timestep} and record_period_s ≥ act_period_s"
        )
    plan = sample_trial(world, seed)
    runner = TrialRunner(backend, world, plan)
    runner.start()
    demonstrator = HumanLikeDemonstrator(
        reach_world or world, seed if demonstrator_seed is None else demonstrator_seed, style
    )
    times: list[float] = []
    joints: list[FloatArray] = []
    commands: list[tuple[float, JointCommand]] = []
    tick = 0
    outcome: TrialOutcome | None = None
    while outcome is None:
        observation = observe(backend, world)
        if tick % record_every == 0:
            times.append(observation.time_s)
            joints.append(observation.joint_positions)
        for command in demonstrator.act(observation):
            send(backend, command)
            commands.append((observation.time_s, command))
        outcome = runner.step(act_steps)
        tick += 1
    return DemoResult(
        plan=plan,
        outcome=outcome,
        episode_time_s=outcome.time_s,
        times_s=np.array(times),
        joint_positions=np.array(joints),
        commands=commands,
        picks_started=demonstrator.picks_started,
    )


@dataclass
class ReferenceResult:
    """The planner-STYLE reference played on the backend (for style comparison only).

    Attributes:
        outcome: The success predicate's judgement (not a goal of the reference).
        times_s: (K,) recording times.
        joint_positions: (K, 18) measured joints.

    """

    outcome: TrialOutcome
    times_s: FloatArray
    joint_positions: FloatArray


def run_planner_reference_on_backend(
    backend: SimBackend,
    world: WorldParams,
    seed: int,
    reach_world: WorldParams | None = None,
    record_period_s: float = 0.02,
    start_along_m: float = -0.45,
) -> ReferenceResult:
    """Play trial ``seed`` with :func:`~r2s2r_sim.demonstrator.style.planner_style_reference`.

    The plan is made once, open loop, when the object has come within ``start_along_m``
    of the base along its travel. This exists only to compare motion style with the
    demonstrator on the same picks; the project's planner is another package.

    Args:
        backend: The simulator.
        world: The world the simulator runs.
        seed: Trial seed.
        reach_world: The world the reference believes in (defaults to ``world``).
        record_period_s: Recording period.
        start_along_m: Distance along the travel (relative to the base) at which it plans.

    """
    from r2s2r_sim.demonstrator.style import planner_style_reference

    believed = reach_world or world
    helper = HumanLikeDemonstrator(believed, seed)
    plan = sample_trial(world, seed)
    runner = TrialRunner(backend, world, plan)
    runner.start()
    steps = max(1, round(record_period_s / world.physics.timestep_s))
    times: list[float] = []
    joints: list[FloatArray] = []
    end_s = np.inf
    outcome: TrialOutcome | None = None
    while outcome is None and backend.time_s < end_s:
        observation = observe(backend, world)
        times.append(observation.time_s)
        joints.append(observation.joint_positions)
        if np.isinf(end_s) and observation.objects:
            obj = observation.objects[0]
            velocity = np.asarray(obj.velocity_mps)
            speed = float(np.linalg.norm(velocity[:2]))
            along = float(velocity[:2] @ obj.position_m[:2]) / max(speed, 1e-9)
            if speed > 0.02 and along >= start_along_m:
                size = believed.objects[obj.type_name].size_m
                yaw = helper._grasp_yaw(_yaw(obj.quat_wxyz), obj.type_name, 0.0)
                ref_times, ref_positions = planner_style_reference(
                    helper.ik,
                    obj.position_m,
                    velocity,
                    size[2],
                    yaw,
                    helper.bin_positions_m[believed.objects[obj.type_name].target_bin],
                    start_arm=observation.joint_positions[:6],
                )
                backend.command_trajectory(
                    ARM_JOINT_NAMES, ref_times[1:].tolist(), ref_positions[1:, :6]
                )
                backend.command_trajectory(
                    HAND_JOINT_NAMES, ref_times[1:].tolist(), ref_positions[1:, 6:]
                )
                end_s = observation.time_s + float(ref_times[-1]) + 0.5
        outcome = runner.step(steps)
    return ReferenceResult(runner.outcome(), np.array(times), np.array(joints))


def _yaw(quat_wxyz: FloatArray) -> float:
    from r2s2r_sim.demonstrator.core import yaw_of_quat

    return yaw_of_quat(quat_wxyz)
