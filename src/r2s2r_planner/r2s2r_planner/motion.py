"""Motion planning behind one interface: OMPL (here) and MoveIt via moveit_py (when installed).

:class:`OmplPlanner` plans in the 6-D arm joint space with OMPL's RRTConnect and a MuJoCo
:class:`~r2s2r_planner.collision.CollisionChecker` (clearance margin), shortcuts and simplifies
the path, re-checks it densely (straight segments at ``dense_check_step_rad``; a plan that fails
is thrown away and planned again) and times it with ruckig (:mod:`r2s2r_planner.timing`).

OMPL seeds its random generator once per process (``ompl.util.RNG.setSeed`` before the first
generator exists), so a process that runs the same sequence of queries gets the same plans;
queries in a different order get different (equally valid) plans.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from r2s2r_description.cell import CellLayout
from r2s2r_description.robot import ARM_JOINT_NAMES, JOINT_LIMITS
from r2s2r_description.transforms import FloatArray

from r2s2r_planner.collision import AttachedObject, CollisionChecker, Obstacle, PathCheck
from r2s2r_planner.config import MotionConfig, TimingConfig
from r2s2r_planner.timing import JointTrajectory, time_parameterize


class PlanningError(RuntimeError):
    """No valid plan was found; the message gives the reason (start/goal invalid, timeout...)."""


class MoveItUnavailableError(PlanningError):
    """The MoveIt backend was requested but ``moveit_py`` is not importable here."""


@dataclass(frozen=True)
class PlanRequest:
    """A joint-space planning query for the arm.

    Attributes:
        start_q: (6,) start arm joints (ARM_JOINT_NAMES order).
        goal_q: (6,) goal arm joints.
        hand_q: (12,) hand joints held during the motion (HAND_JOINT_NAMES order).
        attached: Object held in the hand, or None.
        clearance_m: Required clearance; the planner's configured one when None.

    """

    start_q: FloatArray
    goal_q: FloatArray
    hand_q: FloatArray
    attached: AttachedObject | None = None
    clearance_m: float | None = None


@dataclass(frozen=True)
class PlanResult:
    """A planned and timed motion.

    Attributes:
        waypoints: (N, 6) simplified joint path (straight segments between rows).
        trajectory: Its time parameterization.
        planning_time_s: Wall time spent (planning, simplification, dense check).
        dense_check: The dense re-check of ``waypoints``.
        attempts: Plans made until one passed the dense check.
        backend: Backend name.

    """

    waypoints: FloatArray
    trajectory: JointTrajectory
    planning_time_s: float
    dense_check: PathCheck
    attempts: int
    backend: str
    timings_s: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class MotionPlanner(Protocol):
    """A collision-free, time-parameterized arm motion planner."""

    @property
    def name(self) -> str:
        """Backend name (``ompl``, ``moveit``)."""
        ...

    def plan(self, request: PlanRequest) -> PlanResult:
        """Plan ``request.start_q`` -> ``request.goal_q``.

        Raises:
            PlanningError: With the reason when no valid plan exists in time.

        """
        ...


def _arm_bounds(margin_rad: float) -> tuple[FloatArray, FloatArray]:
    lower = np.array([JOINT_LIMITS[n].lower_rad for n in ARM_JOINT_NAMES]) + margin_rad
    upper = np.array([JOINT_LIMITS[n].upper_rad for n in ARM_JOINT_NAMES]) - margin_rad
    return lower, upper


class OmplPlanner:
    """RRTConnect in the arm joint space with a MuJoCo collision checker.

    Args:
        layout: Cell placements (from the world the plan is for).
        motion: Planning settings.
        timing: Time parameterization settings.
        obstacles: Extra static boxes in the scene.

    """

    def __init__(
        self,
        layout: CellLayout,
        motion: MotionConfig | None = None,
        timing: TimingConfig | None = None,
        obstacles: Sequence[Obstacle] = (),
    ) -> None:
        from ompl import util as ou  # imported here: the bindings print at import

        self.layout = layout
        self.motion = motion or MotionConfig()
        self.timing = timing or TimingConfig()
        self.obstacles = tuple(obstacles)
        ou.setLogLevel(ou.LogLevel.LOG_ERROR)
        _seed_ompl(self.motion.seed)
        self._checker = CollisionChecker(layout, self.motion.clearance_m, obstacles=self.obstacles)

    @property
    def name(self) -> str:
        """``ompl``."""
        return "ompl"

    def checker_for(self, request: PlanRequest) -> CollisionChecker:
        """Return the collision checker for a request (hand pose, held object, clearance set)."""
        clearance = self.motion.clearance_m if request.clearance_m is None else request.clearance_m
        if request.attached is None:
            checker = self._checker
            checker.clearance_m = clearance
        else:
            checker = CollisionChecker(
                self.layout, clearance, attached=request.attached, obstacles=self.obstacles
            )
        checker.set_hand(request.hand_q)
        return checker

    def plan(self, request: PlanRequest) -> PlanResult:
        """See :meth:`MotionPlanner.plan`.

        Raises:
            PlanningError: Start or goal in collision (named contact), outside the joint
                bounds, or no path passing the dense re-check within ``max_attempts`` plans.

        """
        started = time.perf_counter()
        checker = self.checker_for(request)
        start = np.asarray(request.start_q, dtype=float)
        goal = np.asarray(request.goal_q, dtype=float)
        lower, upper = _arm_bounds(self.motion.joint_margin_rad)
        for label, q in (("start", start), ("goal", goal)):
            if np.any(q < lower - self.motion.joint_margin_rad) or np.any(
                q > upper + self.motion.joint_margin_rad
            ):
                raise PlanningError(f"{label} {np.round(q, 3).tolist()}: outside the joint limits")
            if not checker.is_valid(q):
                contact = checker.contacts(q)[0]
                raise PlanningError(
                    f"{label} in collision (clearance {checker.clearance_m} m): "
                    f"{contact[0]} - {contact[1]} at {contact[2]:.4f} m"
                )
        timings: dict[str, float] = {"rrt_s": 0.0, "simplify_s": 0.0, "dense_check_s": 0.0}
        straight = (
            checker.check_path(np.stack([start, goal]), self.motion.dense_check_step_rad)
            if self.motion.try_straight_first
            else PathCheck(False, 0)
        )
        if straight.valid:
            waypoints, check, attempts = np.stack([start, goal]), straight, 0
        else:
            waypoints, check, attempts = self._sample_path(
                checker, start, goal, lower, upper, timings
            )
        trajectory = time_parameterize(waypoints, self.timing)
        return PlanResult(
            waypoints=waypoints,
            trajectory=trajectory,
            planning_time_s=time.perf_counter() - started,
            dense_check=check,
            attempts=attempts,
            backend=self.name,
            timings_s=timings,
        )

    def _sample_path(
        self,
        checker: CollisionChecker,
        start: FloatArray,
        goal: FloatArray,
        lower: FloatArray,
        upper: FloatArray,
        timings: dict[str, float],
    ) -> tuple[FloatArray, PathCheck, int]:
        from ompl import base as ob
        from ompl import geometric as og

        lower = np.minimum(lower, np.minimum(start, goal))
        upper = np.maximum(upper, np.maximum(start, goal))
        dofs = len(ARM_JOINT_NAMES)
        space = ob.RealVectorStateSpace(dofs)
        bounds = ob.RealVectorBounds(dofs)
        for i in range(dofs):
            bounds.setLow(i, float(lower[i]))
            bounds.setHigh(i, float(upper[i]))
        space.setBounds(bounds)
        setup = og.SimpleSetup(space)

        def valid(state: Any) -> bool:
            return checker.is_valid(state[0:dofs])

        setup.setStateValidityChecker(valid)
        info = setup.getSpaceInformation()
        info.setStateValidityCheckingResolution(
            self.motion.motion_check_step_rad / space.getMaximumExtent()
        )
        planner = og.RRTConnect(info)
        planner.setRange(self.motion.range_rad)
        setup.setPlanner(planner)
        start_state, goal_state = space.allocState(), space.allocState()
        start_state[0:dofs] = start.tolist()
        goal_state[0:dofs] = goal.tolist()
        setup.setStartAndGoalStates(start_state, goal_state)
        last_check: PathCheck | None = None
        clearance = checker.clearance_m
        for attempt in range(1, self.motion.max_attempts + 1):
            setup.clear()
            checker.clearance_m = clearance + self.motion.planning_extra_clearance_m
            t0 = time.perf_counter()
            solved = setup.solve(self.motion.timeout_s)
            timings["rrt_s"] += time.perf_counter() - t0
            if not setup.haveExactSolutionPath():
                checker.clearance_m = clearance
                raise PlanningError(
                    f"RRTConnect found no path in {self.motion.timeout_s} s ({solved})"
                )
            t0 = time.perf_counter()
            if self.motion.simplify_time_s > 0.0:
                setup.simplifySolution(self.motion.simplify_time_s)
            path = setup.getSolutionPath()
            waypoints = np.array([state[0:dofs] for state in path.getStates()], dtype=float)
            timings["simplify_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            checker.clearance_m = clearance
            last_check = checker.check_path(waypoints, self.motion.dense_check_step_rad)
            timings["dense_check_s"] += time.perf_counter() - t0
            if last_check.valid:
                return waypoints, last_check, attempt
        raise PlanningError(
            f"no plan passed the dense re-check in {self.motion.max_attempts} attempts; last "
            f"contact {last_check.contact if last_check else None}"
        )


_SEEDED: list[int] = []


def _seed_ompl(seed: int) -> None:
    """Seed OMPL's process-wide generator once (OMPL ignores later seeds)."""
    from ompl import util as ou

    if not _SEEDED:
        ou.RNG.setSeed(int(seed))
        _SEEDED.append(seed)


class MoveItPyPlanner:
    """MoveIt 2 backend through ``moveit_py``. UNVERIFIED: no MoveIt install exists here.

    Written against the documented moveit_py API (``moveit.planning.MoveItPy``,
    ``PlanningComponent.set_start_state`` / ``set_goal_state`` / ``plan``,
    ``moveit.core.robot_state.RobotState``) for ROS 2 installs that have MoveIt and a MoveIt
    configuration of this robot (URDF from ``r2s2r_description``, an SRDF with a planning group
    ``group_name`` over the six arm joints). It has never run in this workspace: treat its
    output as untested until it has been exercised on such an install. Collision objects and
    attached objects come from MoveIt's own planning scene, not from :class:`PlanRequest`.

    Args:
        group_name: MoveIt planning group of the arm.
        node_name: Name of the node MoveItPy creates.
        timing: Time parameterization of the returned waypoints (MoveIt's own timing is
            replaced by ruckig so both backends give the same kind of trajectory).
        config_dict: MoveItPy configuration (``moveit_configs_utils`` ``to_dict()``), or None
            to use the launch-provided parameters.

    Raises:
        MoveItUnavailableError: If ``moveit`` (moveit_py) cannot be imported.

    """

    def __init__(
        self,
        group_name: str = "arm",
        node_name: str = "r2s2r_planner_moveit",
        timing: TimingConfig | None = None,
        config_dict: dict[str, Any] | None = None,
    ) -> None:
        try:
            from moveit.planning import MoveItPy  # type: ignore[import-not-found]
        except ImportError as error:
            raise MoveItUnavailableError(
                "MoveIt backend requested but moveit_py is not importable "
                f"({error}); install ros-<distro>-moveit-py or use the 'ompl' backend"
            ) from None
        self.group_name = group_name
        self.timing = timing or TimingConfig()
        self._moveit = (
            MoveItPy(node_name=node_name, config_dict=config_dict)
            if config_dict is not None
            else MoveItPy(node_name=node_name)
        )
        self._component = self._moveit.get_planning_component(group_name)

    @property
    def name(self) -> str:
        """``moveit``."""
        return "moveit"

    def plan(self, request: PlanRequest) -> PlanResult:
        """Plan with MoveIt's configured pipeline (UNVERIFIED, see the class docstring).

        Raises:
            PlanningError: If MoveIt returns no trajectory.

        """
        from moveit.core.robot_state import RobotState  # type: ignore[import-not-found]

        started = time.perf_counter()
        model = self._moveit.get_robot_model()
        start_state = RobotState(model)
        start_state.set_joint_group_positions(self.group_name, np.asarray(request.start_q))
        start_state.update()
        goal_state = RobotState(model)
        goal_state.set_joint_group_positions(self.group_name, np.asarray(request.goal_q))
        goal_state.update()
        self._component.set_start_state(robot_state=start_state)
        self._component.set_goal_state(robot_state=goal_state)
        result = self._component.plan()
        if not result:
            raise PlanningError(f"MoveIt found no plan for group {self.group_name!r}")
        message = result.trajectory.get_robot_trajectory_msg().joint_trajectory
        order = [list(message.joint_names).index(n) for n in ARM_JOINT_NAMES]
        waypoints = np.array([[point.positions[i] for i in order] for point in message.points])
        return PlanResult(
            waypoints=waypoints,
            trajectory=time_parameterize(waypoints, self.timing),
            planning_time_s=time.perf_counter() - started,
            dense_check=PathCheck(True, 0),  # MoveIt checked against its own scene
            attempts=1,
            backend=self.name,
        )


def make_planner(
    backend: str,
    layout: CellLayout,
    motion: MotionConfig | None = None,
    timing: TimingConfig | None = None,
) -> MotionPlanner:
    """Build a planner backend by name (``ompl`` or ``moveit``).

    Raises:
        ValueError: For an unknown backend name.
        MoveItUnavailableError: For ``moveit`` where moveit_py is not installed.

    """
    if backend == "ompl":
        return OmplPlanner(layout, motion, timing)
    if backend == "moveit":
        return MoveItPyPlanner(timing=timing)
    raise ValueError(f"backend = {backend!r}: expected 'ompl' or 'moveit'")
