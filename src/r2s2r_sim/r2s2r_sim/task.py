"""The sorting task: objects arrive on the belt; each must end at rest in its type's bin.

:func:`sample_trial` draws a trial from a seed (object types, arrival times, lateral offsets,
yaw, optionally belt speed); :class:`TrialRunner` plays it on a backend (spawning objects at
their arrival times, watching them) and :meth:`TrialRunner.outcome` applies the success
predicate to simulator state, returning a :class:`TrialOutcome` with one of
:class:`OutcomeReason`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from r2s2r_description.cell import (
    BELT_LENGTH_M,
    BELT_WIDTH_M,
    BIN_INNER_SIZE_M,
    BIN_WALL_HEIGHT_M,
    BIN_WALL_THICKNESS_M,
)
from r2s2r_description.frames import BASE_LINK
from r2s2r_world.world import WorldParams

from r2s2r_sim.backend import FloatArray, ObjectInstance, SimBackend

ROBOT_BODY_PREFIXES = (BASE_LINK, "shoulder", "upper_arm", "forearm", "wrist", "flange")
HAND_BODY_MARKERS = ("palm", "thumb", "index", "middle", "ring")


class OutcomeReason(StrEnum):
    """Why a trial (or an object) ended as it did."""

    SUCCESS = "success"
    MISSED_GRASP = "missed_grasp"  # never lifted off the belt and came to rest outside a bin
    DROPPED = "dropped"  # lifted, then came to rest outside every bin
    WRONG_BIN = "wrong_bin"  # at rest inside a bin of another type
    TIMEOUT = "timeout"  # still moving, held or on the belt when time ran out


@dataclass(frozen=True)
class TrialOutcome:
    """The result of a trial.

    Attributes:
        success: Every object at rest in its own bin and nothing elsewhere.
        reason: ``success`` or the first failure among the objects (in arrival order).
        time_s: Simulated time at which the outcome was decided.
        object_reasons: Per-object reason.

    """

    success: bool
    reason: str
    time_s: float
    object_reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ObjectArrival:
    """One object's arrival on the belt.

    Attributes:
        instance: Name and type.
        arrival_time_s: When it appears at ``task.spawn_x_m`` on the belt.
        lateral_offset_m: Offset along belt y.
        yaw_rad: Yaw about the belt normal.

    """

    instance: ObjectInstance
    arrival_time_s: float
    lateral_offset_m: float
    yaw_rad: float


@dataclass(frozen=True)
class TrialPlan:
    """A sampled trial (deterministic from ``seed``).

    Attributes:
        seed: The seed it was drawn from.
        belt_speed_mps: Belt speed during the trial.
        arrivals: Objects in arrival order.

    """

    seed: int
    belt_speed_mps: float
    arrivals: tuple[ObjectArrival, ...]

    @property
    def objects(self) -> tuple[ObjectInstance, ...]:
        """The objects of the trial."""
        return tuple(a.instance for a in self.arrivals)


def sample_trial(world: WorldParams, seed: int, randomize_belt_speed: bool = False) -> TrialPlan:
    """Draw a trial from ``world.randomization`` and ``world.task``.

    Args:
        world: The world (object mix, ranges, objects per trial).
        seed: Trial seed; the same seed gives the same plan.
        randomize_belt_speed: Draw the belt speed from ``randomization.belt_speed_mps``
            (generation); otherwise use ``belt.speed_mps`` (the twin, evaluation).

    """
    rng = np.random.default_rng(seed)
    ranges = world.randomization
    names = [n for n, w in ranges.object_mix.items() if w > 0.0]
    weights = np.array([ranges.object_mix[n] for n in names], dtype=float)
    belt_speed = (
        float(rng.uniform(*ranges.belt_speed_mps)) if randomize_belt_speed else world.belt.speed_mps
    )
    arrivals = []
    time_s = float(rng.uniform(*ranges.arrival_time_s))
    for index in range(world.task.objects_per_trial):
        type_name = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        arrivals.append(
            ObjectArrival(
                ObjectInstance(f"object_{index}", type_name),
                arrival_time_s=time_s,
                lateral_offset_m=float(rng.uniform(*ranges.lateral_offset_m)),
                yaw_rad=float(rng.uniform(*ranges.yaw_rad)),
            )
        )
        time_s += float(rng.uniform(*ranges.arrival_gap_s))
    return TrialPlan(seed, belt_speed, tuple(arrivals))


def world_to_frame(pose: FloatArray, point_m: FloatArray) -> FloatArray:
    """Express a world point in the frame whose world pose is ``pose`` (4x4)."""
    return pose[:3, :3].T @ (np.asarray(point_m) - pose[:3, 3])  # type: ignore[no-any-return]


def bin_containing(world: WorldParams, position_m: FloatArray) -> str | None:
    """Name of the bin whose interior contains ``position_m`` (world), or None."""
    half_x, half_y = BIN_INNER_SIZE_M[0] / 2.0, BIN_INNER_SIZE_M[1] / 2.0
    for name, params in world.bins.items():
        local = world_to_frame(params.pose.to_pose().matrix(), position_m)
        if (
            abs(local[0]) <= half_x
            and abs(local[1]) <= half_y
            and BIN_WALL_THICKNESS_M <= local[2] <= BIN_WALL_HEIGHT_M
        ):
            return name
    return None


def _is_robot_body(name: str) -> bool:
    return name.startswith(ROBOT_BODY_PREFIXES) or any(m in name for m in HAND_BODY_MARKERS)


@dataclass
class _Watch:
    spawned: bool = False
    lifted: bool = False
    rest_since_s: float | None = None


class TrialRunner:
    """Plays a :class:`TrialPlan` on a backend and judges it.

    Args:
        backend: The simulator.
        world: The world to run in.
        plan: The trial.

    """

    def __init__(self, backend: SimBackend, world: WorldParams, plan: TrialPlan):
        self.backend = backend
        self.world = world
        self.plan = plan
        self._watch = {a.instance.name: _Watch() for a in plan.arrivals}
        self._outcome: TrialOutcome | None = None
        self._belt_pose = world.belt.pose.to_pose().matrix()

    def start(self) -> None:
        """Reset the backend for this trial (robot home, objects parked, belt at plan speed)."""
        self.backend.reset(self.world, self.plan.seed, self.plan.objects)
        self.backend.set_belt_speed(self.plan.belt_speed_mps)
        self._watch = {a.instance.name: _Watch() for a in self.plan.arrivals}
        self._outcome = None
        self._spawn_due()

    def spawn_pose(self, arrival: ObjectArrival) -> tuple[FloatArray, FloatArray]:
        """World position and quaternion (w, x, y, z) where ``arrival`` appears on the belt."""
        height = self.world.objects[arrival.instance.type_name].size_m[2]
        local = np.array(
            [self.world.task.spawn_x_m, arrival.lateral_offset_m, height / 2.0 + 0.001, 1.0]
        )
        position = (self._belt_pose @ local)[:3]
        belt_yaw = math.atan2(self._belt_pose[1, 0], self._belt_pose[0, 0])
        yaw = belt_yaw + arrival.yaw_rad
        quat = np.array([math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0)])
        return position, quat

    def _spawn_due(self) -> None:
        now = self.backend.time_s
        for arrival in self.plan.arrivals:
            watch = self._watch[arrival.instance.name]
            if not watch.spawned and arrival.arrival_time_s <= now + 1e-9:
                position, quat = self.spawn_pose(arrival)
                self.backend.spawn_object(arrival.instance.name, position, quat)
                watch.spawned = True

    def step(self, n_steps: int = 1) -> TrialOutcome | None:
        """Advance the simulation, spawn arrivals, update the watch; return the outcome if final."""
        self.backend.step(n_steps)
        self._spawn_due()
        self._observe()
        self._outcome = self._judge(final=self.backend.time_s >= self.world.task.trial_timeout_s)
        return self._outcome

    @property
    def done(self) -> bool:
        """Whether the outcome is decided."""
        return self._outcome is not None

    def outcome(self) -> TrialOutcome:
        """Return the outcome now; if undecided, judged as if time had run out."""
        return self._outcome or self._judge(final=True)  # type: ignore[return-value]

    def _observe(self) -> None:
        now = self.backend.time_s
        task = self.world.task
        for name, pose in self.backend.object_poses().items():
            watch = self._watch[name]
            if not pose.active:
                continue
            half_height = self.world.objects[pose.type_name].size_m[2] / 2.0
            above_belt = world_to_frame(self._belt_pose, pose.position_m)[2] - half_height
            if above_belt > task.lift_height_m:
                watch.lifted = True
            if float(np.linalg.norm(pose.linear_velocity_mps)) < task.rest_speed_mps:
                if watch.rest_since_s is None:
                    watch.rest_since_s = now
            else:
                watch.rest_since_s = None

    def _touching_robot(self, name: str) -> bool:
        for contact in self.backend.contacts():
            if name in (contact.body1, contact.body2):
                other = contact.body2 if contact.body1 == name else contact.body1
                if _is_robot_body(other):
                    return True
        return False

    def _object_reason(self, name: str, type_name: str, final: bool) -> OutcomeReason | None:
        watch = self._watch[name]
        if not watch.spawned:
            return OutcomeReason.TIMEOUT if final else None
        pose = self.backend.object_poses()[name]
        now = self.backend.time_s
        settled = (
            watch.rest_since_s is not None
            and now - watch.rest_since_s >= self.world.task.settle_time_s
            and not self._touching_robot(name)
        )
        if settled:
            bin_name = bin_containing(self.world, pose.position_m)
            if bin_name is not None:
                target = self.world.objects[type_name].target_bin
                return OutcomeReason.SUCCESS if bin_name == target else OutcomeReason.WRONG_BIN
            on_belt = self._on_belt(pose.position_m)
            if not on_belt:
                return OutcomeReason.DROPPED if watch.lifted else OutcomeReason.MISSED_GRASP
        return OutcomeReason.TIMEOUT if final else None

    def _on_belt(self, position_m: FloatArray) -> bool:
        local = world_to_frame(self._belt_pose, position_m)
        return (
            abs(local[0]) <= BELT_LENGTH_M / 2.0
            and abs(local[1]) <= BELT_WIDTH_M / 2.0
            and (-0.01 <= local[2] <= 0.2)
        )

    def _judge(self, final: bool) -> TrialOutcome | None:
        reasons: dict[str, OutcomeReason] = {}
        for arrival in self.plan.arrivals:
            reason = self._object_reason(arrival.instance.name, arrival.instance.type_name, final)
            if reason is None:
                return None
            reasons[arrival.instance.name] = reason
        failures = [r for r in reasons.values() if r != OutcomeReason.SUCCESS]
        overall = failures[0] if failures else OutcomeReason.SUCCESS
        return TrialOutcome(
            success=not failures,
            reason=overall.value,
            time_s=self.backend.time_s,
            object_reasons={k: v.value for k, v in reasons.items()},
        )
