"""The planner-style pick, ROS-free: grasp proposal, intercept, plans, timing and execution.

Phases (absolute times; the object rides the belt throughout):

1. hold at the current configuration while "planning" (``planning_budget_s``), then
2. approach: a collision-free plan (:class:`~r2s2r_planner.motion.MotionPlanner`) to the
   pre-grasp above where the object will be at the intercept time, timed with ruckig,
   the hand opening to the pinch pre-grasp on the way;
3. descend, pinch and lift while following the belt (IK samples of the palm pose locked to the
   object's predicted motion; the belt-following speed fades out during the lift);
4. transport: a plan with the object attached to the palm to over the object's target bin;
5. release: the pinch opens.

:func:`plan_and_execute_pick` runs this in the simulator on a :class:`~r2s2r_sim.task.TrialPlan`
and returns the executed commands and the trial outcome (the "ungrounded behavior" generator of
the data-generation jobs). :class:`PickPlanner.plan_pick` is the planning half, used by the
``planner`` node on the real cell.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from r2s2r_description.cell import BIN_WALL_HEIGHT_M
from r2s2r_description.controllers import ARM, HAND, JointCommand
from r2s2r_description.robot import (
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
)
from r2s2r_description.transforms import FloatArray, quat_to_matrix, rot_z
from r2s2r_sim.backend import SimBackend
from r2s2r_sim.task import TrialOutcome, TrialPlan, TrialRunner
from r2s2r_world.kinematics import IkError, PalmIk
from r2s2r_world.world import WorldParams

from r2s2r_planner.collision import AttachedObject, CollisionChecker
from r2s2r_planner.config import PlannerConfig
from r2s2r_planner.grasps import GraspCandidate, GraspError, GraspProposer
from r2s2r_planner.intercept import BeltObjectState, Intercept, InterceptError, InterceptSolver
from r2s2r_planner.motion import (
    MotionPlanner,
    OmplPlanner,
    PlanningError,
    PlanRequest,
    PlanResult,
)


class PickError(RuntimeError):
    """The pick cannot be planned; ``reason`` is a short code, the message the details."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class PickPlan:
    """A planned pick, all times relative to ``reference_time_s``.

    Attributes:
        reference_time_s: The time the commands are meant to be sent (trajectory start).
        arm: The arm command (whole pick and transport).
        hand: The hand command (open, pinch, hold, release).
        grasp: The chosen grasp (at the grasp time).
        intercept: Where and when the approach meets the object.
        phase_times_s: Absolute times of ``approach_start``, ``arrival``, ``grasp``, ``closed``,
            ``lifted``, ``over_bin``, ``released``.
        target_bin: Bin the object goes to.
        plans: The motion plans (``approach``, ``transport``).

    """

    reference_time_s: float
    arm: JointCommand
    hand: JointCommand
    grasp: GraspCandidate
    intercept: Intercept
    phase_times_s: dict[str, float]
    target_bin: str
    plans: dict[str, PlanResult]


@dataclass(frozen=True)
class PickResult:
    """A synthesized (planned and executed) pick.

    Attributes:
        outcome: The trial outcome from the simulator's success predicate.
        commands: Commands sent, in order.
        failure_reason: '' on success; otherwise a short code (``no_grasp``, ``intercept_*``,
            ``planning_failed``, ``outcome_<reason>``...) and details after a colon.
        timings: Wall-clock seconds per stage (``plan_s``, ``execute_s``, ``total_s``) and the
            simulated episode length (``sim_s``).
        plan: The pick plan, or None when planning failed.

    """

    outcome: TrialOutcome
    commands: list[JointCommand]
    failure_reason: str
    timings: dict[str, float] = field(default_factory=dict)
    plan: PickPlan | None = None


def smoothstep(u: FloatArray | float) -> FloatArray:
    """``3u² - 2u³`` on [0, 1]: zero slope at both ends."""
    value = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
    return value * value * (3.0 - 2.0 * value)  # type: ignore[no-any-return]


def _pose(rotation: FloatArray, position: FloatArray) -> FloatArray:
    pose = np.eye(4)
    pose[:3, :3] = rotation
    pose[:3, 3] = position
    return pose


def seed_toward(ik: PalmIk, point_m: FloatArray) -> FloatArray:
    """Home arm joints with the shoulder pan turned so the palm points toward ``point_m``."""
    home = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
    palm = ik.forward(home)[:3, 3]
    shoulder = ik.model.body("shoulder_link").id
    origin = ik.data.xpos[shoulder].copy()
    axis_z = float(ik.data.xmat[shoulder].reshape(3, 3)[2, 2])  # pan axis up (+1) or down (-1)
    current = math.atan2(palm[1] - origin[1], palm[0] - origin[0])
    wanted = math.atan2(point_m[1] - origin[1], point_m[0] - origin[0])
    home[0] = math.remainder(home[0] + (wanted - current) * math.copysign(1.0, axis_z), 2 * math.pi)
    return home


class PickPlanner:
    """Plans planner-style picks for one world.

    Args:
        world: The world (cell layout, objects, bins, belt pose).
        config: Planner settings.
        planner: Motion planning backend (OMPL by default).

    """

    def __init__(
        self,
        world: WorldParams,
        config: PlannerConfig | None = None,
        planner: MotionPlanner | None = None,
    ) -> None:
        self.world = world
        self.config = config or PlannerConfig()
        layout = world.layout()
        self.ik = PalmIk(layout)
        self.proposer = GraspProposer(self.ik, self.config.grasp)
        self.planner = planner or OmplPlanner(layout, self.config.motion, self.config.timing)
        self.intercept_solver = InterceptSolver(self.config.intercept)
        self.checker = CollisionChecker(layout, self.config.pick.contact_clearance_m)
        self.belt_pose = world.belt.pose.to_pose().matrix()

    # -- belt-following segments ------------------------------------------------------------
    def _track(
        self,
        state: BeltObjectState,
        grasp: GraspCandidate,
        arrival_s: float,
        seed_q: FloatArray,
    ) -> tuple[FloatArray, FloatArray, dict[str, float]]:
        """IK samples of descend, close and lift; returns (times, arm q, phase times)."""
        pick = self.config.pick
        grasp_s = arrival_s + pick.descend_duration_s
        closed_s = grasp_s + pick.close_duration_s
        lifted_s = closed_s + pick.lift_duration_s
        approach_axis = grasp.palm_pose[:3, 2]
        pre_offset = grasp.palm_offset_m - approach_axis * self.config.grasp.pre_grasp_height_m
        up = np.array([0.0, 0.0, 1.0])
        velocity = state.velocity_mps
        period = pick.track_sample_period_s
        times = np.unique(
            np.concatenate(
                [
                    np.arange(arrival_s, lifted_s, period),
                    [arrival_s, grasp_s, closed_s, lifted_s],
                ]
            )
        )
        object_at_close = state.position_at(closed_s)
        positions = []
        for t in times:
            if t <= grasp_s:
                u = smoothstep((t - arrival_s) / pick.descend_duration_s)
                palm = state.position_at(t) + pre_offset + u * (grasp.palm_offset_m - pre_offset)
            elif t <= closed_s:
                palm = state.position_at(t) + grasp.palm_offset_m
            else:
                tau = t - closed_s
                duration = pick.lift_duration_s
                drift = velocity * (tau - tau * tau / (2.0 * duration))  # speed fades to zero
                lift = up * pick.lift_height_m * smoothstep(tau / duration)
                palm = object_at_close + grasp.palm_offset_m + drift + lift
            positions.append(palm)
        arm_q = []
        q = np.asarray(seed_q, dtype=float)
        rotation = grasp.palm_pose[:3, :3]
        for palm in positions:
            q = self.ik.solve(_pose(rotation, palm), q)
            arm_q.append(q)
        phases = {"arrival": arrival_s, "grasp": grasp_s, "closed": closed_s, "lifted": lifted_s}
        return times, np.array(arm_q), phases

    def _check_tracking(
        self, grasp: GraspCandidate, times: FloatArray, arm_q: FloatArray, grasp_s: float
    ) -> None:
        step = self.config.motion.dense_check_step_rad
        descend = times <= grasp_s + 1e-9
        for hand_q, rows, label in (
            (grasp.pinch.pre_grasp, arm_q[descend], "descend"),
            (grasp.pinch.closed, arm_q[~descend], "lift"),
        ):
            if rows.shape[0] == 0:
                continue
            self.checker.set_hand(hand_q)
            check = self.checker.check_path(rows, step)
            if not check.valid:
                raise PlanningError(f"{label} segment in collision: {check.contact}")

    # -- transport --------------------------------------------------------------------------
    def _bin_goal(
        self,
        grasp: GraspCandidate,
        type_name: str,
        object_rotation: FloatArray,
        lifted_q: FloatArray,
    ) -> tuple[FloatArray, AttachedObject, str]:
        obj = self.world.objects[type_name]
        bin_name = obj.target_bin
        bin_pose = self.world.bins[bin_name].pose.to_pose().matrix()
        object_goal = bin_pose[:3, 3] + np.array(
            [
                0.0,
                0.0,
                BIN_WALL_HEIGHT_M + self.config.pick.bin_release_height_m + obj.size_m[2] / 2.0,
            ]
        )
        object_at_grasp = _pose(object_rotation, grasp.palm_pose[:3, 3] - grasp.palm_offset_m)
        attached = AttachedObject(obj, np.linalg.inv(grasp.palm_pose) @ object_at_grasp)
        checker = CollisionChecker(
            self.world.layout(), self.config.motion.clearance_m, grasp.pinch.closed, attached
        )
        seed = seed_toward(self.ik, object_goal)
        best: tuple[float, FloatArray] | None = None
        for yaw in (0.0, math.pi / 2.0, -math.pi / 2.0, math.pi):
            turn = rot_z(yaw)
            palm = _pose(turn @ grasp.palm_pose[:3, :3], object_goal + turn @ grasp.palm_offset_m)
            try:
                q = self.ik.solve(palm, seed)
            except IkError:
                continue
            if not checker.is_valid(q):
                continue
            travel = float(np.linalg.norm(q - lifted_q))
            if best is None or travel < best[0]:
                best = (travel, q)
        if best is None:
            raise PlanningError(f"no collision-free IK over {bin_name} at {object_goal.round(3)}")
        return best[1], attached, bin_name

    # -- the whole pick ---------------------------------------------------------------------
    def plan_pick(
        self,
        type_name: str,
        state: BeltObjectState,
        rotation: FloatArray,
        current_q: FloatArray,
        now_s: float,
        preferred_belt_x_m: float | None = None,
    ) -> PickPlan:
        """Plan the whole pick of one object.

        Args:
            type_name: A key of ``world.objects``.
            state: Object position at a time, with belt pose and speed.
            rotation: 3x3 object orientation in world.
            current_q: (18,) current joints (ALL_JOINT_NAMES order).
            now_s: Current time; commands start here, motion after ``planning_budget_s``.
            preferred_belt_x_m: Where to prefer meeting the object (config default if None).

        Raises:
            PickError: ``unknown_object``, ``no_grasp``, ``intercept_<reason>`` or
                ``planning_failed`` with details.

        """
        if type_name not in self.world.objects:
            raise PickError(
                "unknown_object", f"{type_name!r} not in world objects {sorted(self.world.objects)}"
            )
        obj = self.world.objects[type_name]
        cfg = self.config
        n_arm = len(ARM_JOINT_NAMES)
        start_q = np.asarray(current_q, dtype=float)[:n_arm]
        start_hand = np.asarray(current_q, dtype=float)[n_arm:]
        belt_top_z = float(self.belt_pose[2, 3])
        found: dict[str, object] = {}
        errors: list[str] = []

        def approach_duration(arrival_s: float, position: FloatArray) -> float:
            grasp_position = state.position_at(arrival_s + cfg.pick.descend_duration_s)
            try:
                candidates = self.proposer.propose(
                    obj, grasp_position, rotation, belt_top_z, start_q
                )
            except GraspError as error:
                errors.append(f"no_grasp: {error}")
                raise
            for grasp in candidates:
                try:
                    pre = grasp.pre_grasp_pose.copy()
                    pre[:3, 3] += position - grasp_position
                    pre_q = self.ik.solve(pre, grasp.pre_grasp_arm_q)
                    times, arm_q, phases = self._track(state, grasp, arrival_s, pre_q)
                    self._check_tracking(grasp, times, arm_q, phases["grasp"])
                    approach = self.planner.plan(PlanRequest(start_q, pre_q, grasp.pinch.pre_grasp))
                except (IkError, PlanningError) as error:
                    errors.append(f"planning_failed: {error}")
                    continue
                found.update(grasp=grasp, times=times, arm_q=arm_q, phases=phases)
                found["approach"] = approach
                return approach.trajectory.duration_s
            raise PlanningError(f"no candidate of {len(candidates)} could be planned")

        pick_time = cfg.pick.descend_duration_s + cfg.pick.close_duration_s
        try:
            intercept = self.intercept_solver.solve(
                state,
                now_s + cfg.pick.planning_budget_s,
                approach_duration,
                pick_time,
                preferred_belt_x_m,
            )
        except InterceptError as error:
            if error.reason.value == "unreachable" and errors:
                code = errors[-1].split(":", 1)[0]
                raise PickError(code, f"{error}; last: {errors[-1]}") from None
            raise PickError(f"intercept_{error.reason.value}", str(error)) from None
        grasp: GraspCandidate = found["grasp"]  # type: ignore[assignment]
        approach: PlanResult = found["approach"]  # type: ignore[assignment]
        times: FloatArray = found["times"]  # type: ignore[assignment]
        arm_q: FloatArray = found["arm_q"]  # type: ignore[assignment]
        phases: dict[str, float] = dict(found["phases"])  # type: ignore[call-overload]
        try:
            bin_q, attached, bin_name = self._bin_goal(grasp, type_name, rotation, arm_q[-1])
            transport = self.planner.plan(
                PlanRequest(arm_q[-1], bin_q, grasp.pinch.closed, attached)
            )
        except (IkError, PlanningError) as error:
            raise PickError("planning_failed", f"transport: {error}") from None

        start_s = intercept.arrival_time_s - approach.trajectory.duration_s
        phases["approach_start"] = start_s
        phases["over_bin"] = phases["lifted"] + transport.trajectory.duration_s
        phases["released"] = phases["over_bin"] + cfg.pick.release_duration_s
        arm = self._arm_command(now_s, start_q, start_s, approach, times, arm_q, transport)
        hand = self._hand_command(now_s, start_hand, start_s, grasp, phases)
        return PickPlan(
            reference_time_s=now_s,
            arm=arm,
            hand=hand,
            grasp=grasp,
            intercept=intercept,
            phase_times_s=phases,
            target_bin=bin_name,
            plans={"approach": approach, "transport": transport},
        )

    def _arm_command(
        self,
        now_s: float,
        start_q: FloatArray,
        start_s: float,
        approach: PlanResult,
        track_times: FloatArray,
        track_q: FloatArray,
        transport: PlanResult,
    ) -> JointCommand:
        track_velocity = np.gradient(track_q, track_times, axis=0)
        track_velocity[-1] = 0.0  # the lift ends at rest (belt-following speed faded out)
        pieces: list[tuple[FloatArray, FloatArray, FloatArray]] = [
            (np.array([max(start_s - now_s, 1e-3)]), start_q[None, :], np.zeros((1, 6))),
            (
                approach.trajectory.times_s[1:] + start_s - now_s,
                approach.trajectory.positions[1:],
                approach.trajectory.velocities[1:],
            ),
            (track_times[1:] - now_s, track_q[1:], track_velocity[1:]),
            (
                transport.trajectory.times_s[1:] + track_times[-1] - now_s,
                transport.trajectory.positions[1:],
                transport.trajectory.velocities[1:],
            ),
        ]
        times = np.concatenate([p[0] for p in pieces])
        keep = np.concatenate([[True], np.diff(times) > 1e-6])
        return JointCommand(
            ARM,
            ARM_JOINT_NAMES,
            times[keep],
            np.vstack([p[1] for p in pieces])[keep],
            np.vstack([p[2] for p in pieces])[keep],
            now_s,
        )

    def _hand_command(
        self,
        now_s: float,
        start_hand: FloatArray,
        start_s: float,
        grasp: GraspCandidate,
        phases: dict[str, float],
    ) -> JointCommand:
        pinch = grasp.pinch
        open_by = min(max(start_s, now_s) + 0.5, phases["arrival"])
        points = [
            (open_by, pinch.pre_grasp),
            (phases["grasp"], pinch.pre_grasp),
            (phases["closed"], pinch.closed),
            (phases["over_bin"], pinch.closed),
            (phases["released"], pinch.pre_grasp),
        ]
        times = np.array([max(t - now_s, 1e-3) for t, _ in points])
        positions = np.array([q for _, q in points])
        keep = np.concatenate([[True], np.diff(times) > 1e-6])
        del start_hand  # the controller interpolates from its current desired position
        return JointCommand(HAND, HAND_JOINT_NAMES, times[keep], positions[keep], None, now_s)


def _to_matrix(quat_wxyz: Sequence[float] | FloatArray) -> FloatArray:
    return quat_to_matrix(np.asarray(quat_wxyz, dtype=float))


def plan_and_execute_pick(
    backend: SimBackend,
    world: WorldParams,
    plan: TrialPlan,
    rng: np.random.Generator,
    config: PlannerConfig | None = None,
    planner: PickPlanner | None = None,
    step_callback: Callable[[TrialRunner], None] | None = None,
    callback_period_s: float = 0.1,
    object_ready: Callable[[], bool] | None = None,
) -> PickResult:
    """Synthesize one planner-style pick in the simulator ("ungrounded behavior").

    Starts the trial (``TrialRunner.start``), waits for the first object to arrive (and, with
    ``object_ready``, until the cell's perception reports it: a cell reacts to what it sees,
    never before), plans the pick from the object's simulated pose and the plan's belt speed,
    sends the arm and hand commands and steps until the success predicate decides (or the
    trial times out).

    Args:
        backend: The simulator (reset by this call).
        world: World to run in (nominal or grounded).
        plan: The trial (``r2s2r_sim.task.sample_trial``); its first object is picked.
        rng: Randomness of the synthesis (the preferred intercept position's jitter).
        config: Planner settings (defaults when None; ignored when ``planner`` is given).
        planner: A reusable :class:`PickPlanner` for ``world`` (built when None; reuse it
            across episodes of one world to save the set-up).
        step_callback: Called with the runner every ``callback_period_s`` of simulated time
            (e.g. to render and record observations).
        callback_period_s: Callback period.
        object_ready: Whether the object is perceived (e.g. the recording's object tracker has
            it); None: the object's arrival is enough.

    Returns:
        The outcome, the commands and, on failure, the reason. Never raises for a pick that
        cannot be planned: that is a failed episode with its reason.

    """
    started = time.perf_counter()
    pick_planner = planner or PickPlanner(world, config)
    cfg = pick_planner.config
    runner = TrialRunner(backend, world, plan)
    runner.start()
    timestep = world.physics.timestep_s
    chunk = max(round(callback_period_s / timestep), 1)
    arrival = plan.arrivals[0]
    name = arrival.instance.name

    def advance(steps: int) -> None:
        remaining = steps
        while remaining > 0 and not runner.done:
            n = min(chunk, remaining)
            runner.step(n)
            remaining -= n
            if step_callback is not None:
                step_callback(runner)

    deadline = arrival.arrival_time_s + cfg.pick.max_wait_for_object_s

    def ready() -> bool:
        return backend.object_poses()[name].active and (object_ready is None or object_ready())

    while not ready() and backend.time_s < deadline and not runner.done:
        advance(chunk)
    advance(max(round(0.05 / timestep), 1))  # let it settle onto the belt
    pose = backend.object_poses()[name]
    state = BeltObjectState(
        position_m=pose.position_m.copy(),
        time_s=backend.time_s,
        belt_pose=pick_planner.belt_pose,
        belt_speed_mps=plan.belt_speed_mps,
    )
    jitter = cfg.intercept.preferred_jitter_m
    preferred = cfg.intercept.preferred_belt_x_m + float(rng.uniform(-jitter, jitter))
    commands: list[JointCommand] = []
    t_plan = time.perf_counter()
    try:
        pick = pick_planner.plan_pick(
            arrival.instance.type_name,
            state,
            _to_matrix(pose.quat_wxyz),
            backend.joint_positions(),
            backend.time_s,
            preferred,
        )
    except PickError as error:
        timings = {"plan_s": time.perf_counter() - t_plan, "total_s": time.perf_counter() - started}
        timings["sim_s"] = backend.time_s
        return PickResult(runner.outcome(), commands, str(error), timings)
    plan_s = time.perf_counter() - t_plan
    t_exec = time.perf_counter()
    for command in (pick.arm, pick.hand):
        backend.command_trajectory(
            command.joint_names, command.times_s, command.positions, command.velocities
        )
        commands.append(command)
    settle = world.task.settle_time_s + 2.0
    end_s = min(pick.phase_times_s["released"] + settle, world.task.trial_timeout_s)
    while not runner.done and backend.time_s < end_s:
        advance(chunk)
    outcome = runner.outcome()
    timings = {
        "plan_s": plan_s,
        "execute_s": time.perf_counter() - t_exec,
        "total_s": time.perf_counter() - started,
        "sim_s": backend.time_s,
    }
    reason = "" if outcome.success else f"outcome_{outcome.reason}"
    return PickResult(outcome, commands, reason, timings, pick)
