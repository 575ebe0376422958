"""The human-like demonstrator: a teleoperator stand-in that acts through joint trajectories.

It sees objects as a person at the cell would (true pose and velocity in ``base_link``, with a
perception lag) and moves the way people do: a reaction delay, then a reach whose palm path is
a superposition of minimum-jerk submovements (to a pre-grasp via above the object, then down),
expressed relative to the *moving* object and corrected on-line as newer observations arrive
(visual servoing); a whole-hand power grasp while moving with the belt; a lift; a sweep around
the shoulder to above the bin of the object's type; lowering it into the bin; release; back up
over the rim and to the ready pose the way it came (unwinding the turn). Every demonstration
draws its own timing, heights, via-points, closure timing, wrist yaw and speed from a seeded
generator.

Time is the cell's: each observation carries the cell time of its joint positions and of its
objects (a tracker's output is older), object motion is predicted from the objects' own stamp,
and while no arm motion is in progress the demonstrator plans from the measured joints (a new
take can begin where the cell, not the last command, left the arm).

It knows the cell only from the NOMINAL description (kinematics, bin positions, object sizes),
like an operator with the drawings; it never reads the twin's hidden parameters. Its only
outputs are :class:`JointCommand` trajectories for the arm and hand controllers, so what it
commands is exactly what a recorder sees.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from r2s2r_description.cell import BIN_WALL_HEIGHT_M, BIN_WALL_THICKNESS_M
from r2s2r_description.controllers import JointCommand
from r2s2r_description.robot import (
    ALL_JOINT_NAMES,
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
    JOINT_LIMITS,
)
from r2s2r_description.transforms import Pose, wrap_angle
from r2s2r_world.kinematics import IkError, PalmIk, top_down_palm_pose
from r2s2r_world.world import WorldParams

from r2s2r_sim.demonstrator.config import DemonstratorStyle, Range
from r2s2r_sim.demonstrator.hand import GraspShape, cage_preshape
from r2s2r_sim.demonstrator.motion import (
    FloatArray,
    LinearMotion,
    Quintic,
    SmoothTrack,
    minimum_jerk,
    smooth_bump,
)

N_ARM = len(ARM_JOINT_NAMES)
BIN_RIM_HEIGHT_M = BIN_WALL_HEIGHT_M
"""Bin wall height above the bin's frame (the description): the move over the bin clears it."""
BIN_FLOOR_HEIGHT_M = BIN_WALL_THICKNESS_M
"""Height of the bin's inner floor above its frame (the description)."""


@dataclass(frozen=True)
class ObjectObservation:
    """What the operator sees of one object (frame ``base_link``).

    Attributes:
        object_id: Stable identifier (object name or track id).
        type_name: Object type (a key of the world's ``objects``).
        position_m: (3,) centre position.
        quat_wxyz: (4,) orientation.
        velocity_mps: (3,) linear velocity.

    """

    object_id: str
    type_name: str
    position_m: FloatArray
    quat_wxyz: FloatArray
    velocity_mps: FloatArray


@dataclass(frozen=True)
class Observation:
    """One look at the cell.

    Attributes:
        time_s: Time of the observation (the cell's clock): the stamp of the joint positions.
        joint_positions: (18,) measured positions in :data:`ALL_JOINT_NAMES` order.
        objects: Objects currently in the scene.
        objects_time_s: Cell time at which ``objects`` were measured (an object tracker's
            output is older than the joint states it is paired with); None: ``time_s``.

    """

    time_s: float
    joint_positions: FloatArray
    objects: tuple[ObjectObservation, ...] = ()
    objects_time_s: float | None = None

    @property
    def objects_stamp_s(self) -> float:
        """Cell time of ``objects`` (``objects_time_s``, else ``time_s``)."""
        return self.time_s if self.objects_time_s is None else self.objects_time_s


class Phase(StrEnum):
    """What the operator is doing."""

    IDLE = "idle"  # nothing to pick; hands at the ready pose
    WAITING = "waiting"  # an object is coming; reaction delay / waiting for the right moment
    REACHING = "reaching"  # reach, descend, close, tracking the object
    TRANSFERRING = "transferring"  # lift, sweep to the bin, release, return
    DONE = "done"


HAND_OPEN = np.array([0.0, -0.35, 0.1, *([-0.35, 0.1, 0.1] * 3)])
"""Pre-shaped open hand (thumb_rot, thumb mcp/ip, then mcp/pip/dip of index, middle, ring)."""
HAND_CLOSED = np.array([0.0, 1.0, 0.9, *([1.0, 0.9, 0.6] * 3)])
"""Whole-hand power grasp: every finger and the thumb wrap the object."""
HAND_WIDE = np.array([0.0, -0.5, 0.0, *([-0.5, 0.0, 0.0] * 3)])
"""Fully opened hand for releasing (every flexion joint at its lower limit)."""
HAND_READY = np.array([HOME_POSITIONS[n] for n in HAND_JOINT_NAMES])
HAND_LOWER = np.array([JOINT_LIMITS[n].lower_rad for n in HAND_JOINT_NAMES])
HAND_UPPER = np.array([JOINT_LIMITS[n].upper_rad for n in HAND_JOINT_NAMES])
ARM_LOWER = np.array([JOINT_LIMITS[n].lower_rad for n in ARM_JOINT_NAMES])
ARM_UPPER = np.array([JOINT_LIMITS[n].upper_rad for n in ARM_JOINT_NAMES])


def yaw_of_quat(quat_wxyz: FloatArray) -> float:
    """Yaw (rad) about z of a quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


@dataclass(frozen=True)
class PickParameters:
    """One demonstration's draw of the operator's style.

    Attributes: see :class:`DemonstratorStyle`; durations are already divided by the speed.
    """

    reaction_delay_s: float
    speed: float
    reach_duration_s: float
    intercept_along_m: float
    hover_height_m: float
    grasp_height_m: float
    hover_fraction: float
    descent_start_fraction: float
    wrist_yaw_offset_rad: float
    closure_lead_s: float
    closure_duration_s: float
    hold_before_lift_s: float
    closure_scale: float
    thumb_rotation_rad: float
    lift_height_m: float
    lift_duration_s: float
    transport_duration_s: float
    transport_arc_m: float
    drop_height_m: float
    drop_offset_m: tuple[float, float]
    release_duration_s: float
    return_duration_s: float
    place_height_m: float
    lower_duration_s: float
    rise_duration_s: float


def draw_pick_parameters(style: DemonstratorStyle, rng: np.random.Generator) -> PickParameters:
    """Sample one demonstration's parameters from the style ranges."""

    def u(value: Range) -> float:
        return float(rng.uniform(value[0], value[1]))

    speed = u(style.speed_factor)
    angle = float(rng.uniform(-math.pi, math.pi))
    radius = style.drop_jitter_m * math.sqrt(float(rng.uniform()))
    return PickParameters(
        reaction_delay_s=u(style.reaction_delay_s),
        speed=speed,
        reach_duration_s=u(style.reach_duration_s) / speed,
        intercept_along_m=u(style.intercept_along_m),
        hover_height_m=u(style.hover_height_m),
        grasp_height_m=u(style.grasp_height_m),
        hover_fraction=u(style.hover_fraction),
        descent_start_fraction=u(style.descent_start_fraction),
        wrist_yaw_offset_rad=float(
            np.clip(rng.normal(0.0, style.wrist_yaw_noise_rad), -0.2, 0.2)
            if style.wrist_yaw_noise_rad > 0.0
            else 0.0
        ),
        closure_lead_s=u(style.closure_lead_s) / speed,
        closure_duration_s=u(style.closure_duration_s) / speed,
        hold_before_lift_s=u(style.hold_before_lift_s) / speed,
        closure_scale=u(style.closure_scale),
        thumb_rotation_rad=float(rng.uniform(-0.08, 0.08)),
        lift_height_m=u(style.lift_height_m),
        lift_duration_s=u(style.lift_duration_s) / speed,
        transport_duration_s=u(style.transport_duration_s) / speed,
        transport_arc_m=u(style.transport_arc_m),
        drop_height_m=u(style.drop_height_m),
        drop_offset_m=(radius * math.cos(angle), radius * math.sin(angle)),
        release_duration_s=u(style.release_duration_s) / speed,
        return_duration_s=u(style.return_duration_s) / speed,
        place_height_m=u(style.place_height_m),
        lower_duration_s=u(style.lower_duration_s) / speed,
        rise_duration_s=u(style.rise_duration_s) / speed,
    )


PalmPath = Callable[[float], tuple[FloatArray, float]]
"""A palm path: absolute time → (position in base_link, yaw about base z)."""


@dataclass
class _Pick:
    """State of the pick in progress."""

    object_id: str
    type_name: str
    params: PickParameters
    first_seen_s: float
    start_s: float = math.inf
    grasp_s: float = math.inf
    close_s: float = math.inf
    lift_s: float = math.inf
    end_s: float = math.inf
    release_s: float = math.inf
    track: SmoothTrack | None = None
    path: PalmPath | None = None
    last_replan_s: float = -math.inf
    closed: bool = False
    released: bool = False
    grasp_yaw_rad: float = 0.0
    start_azimuth_rad: float = 0.0
    start_yaw_rad: float = 0.0
    shape: GraspShape | None = None


@dataclass
class _CommandLog:
    """The last arm command (absolute times), to seed IK and continue smoothly."""

    times_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    positions: FloatArray = field(default_factory=lambda: np.zeros((0, N_ARM)))

    def at(self, t_s: float, fallback: FloatArray) -> FloatArray:
        if self.times_s.size == 0 or t_s >= self.times_s[-1]:
            return self.positions[-1].copy() if self.times_s.size else fallback.copy()
        if t_s <= self.times_s[0]:
            return self.positions[0].copy()
        return np.array([np.interp(t_s, self.times_s, self.positions[:, j]) for j in range(N_ARM)])


class HumanLikeDemonstrator:
    """A teleoperator stand-in that picks objects off the belt into their bins.

    Args:
        reach_world: The world the operator *believes* in, for kinematics, bin positions and
            object sizes only (pass the NOMINAL world when driving the twin).
        seed: Seed of the style variation; the same seed and observations give the same
            commands.
        style: Style ranges (defaults: :class:`DemonstratorStyle`).

    """

    def __init__(self, reach_world: WorldParams, seed: int, style: DemonstratorStyle | None = None):
        self.style = style or DemonstratorStyle()
        self.rng = np.random.default_rng(seed)
        self.world = reach_world
        layout = reach_world.layout()
        base = layout.base_pose.matrix()
        self._base_inv = np.linalg.inv(base)
        self.ik = PalmIk(dataclasses.replace(layout, base_pose=Pose((0.0, 0.0, 0.0))))
        self.bin_positions_m = {
            name: (self._base_inv @ b.pose.to_pose().matrix())[:3, 3]
            for name, b in reach_world.bins.items()
        }
        belt = self._base_inv @ reach_world.belt.pose.to_pose().matrix()
        self.belt_top_z_m = float(belt[2, 3])
        self.home_arm = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
        home_palm = self.ik.forward(self.home_arm)
        self.home_palm_m = home_palm[:3, 3].copy()
        self.home_yaw_rad = math.atan2(home_palm[1, 0], home_palm[0, 0])
        self.phase = Phase.IDLE
        self.handled: set[str] = set()
        self.picks_started = 0
        self.ik_failures = 0
        self._pick: _Pick | None = None
        self._buffer: deque[Observation] = deque(maxlen=200)
        self._log = _CommandLog()
        self._now_s = 0.0

    # -- perception ----------------------------------------------------------------------------
    def _perceived(self, now_s: float) -> Observation:
        """Return the newest observation with objects ``perception_lag_s`` old (else the oldest).

        The lag is the operator's reaction to what they see; it is counted from the cell time
        the objects were measured at, so a tracker's own latency is part of it, not added.
        """
        lagged = self._buffer[0]
        for obs in self._buffer:
            if obs.objects_stamp_s <= now_s - self.style.perception_lag_s + 1e-9:
                lagged = obs
        return lagged

    def _on_belt(self, obj: ObjectObservation) -> bool:
        half_height = (
            self.world.objects[obj.type_name].size_m[2] / 2.0
            if (obj.type_name in self.world.objects)
            else 0.03
        )
        bottom = float(obj.position_m[2]) - half_height
        return abs(bottom - self.belt_top_z_m) < 0.03

    def _leaving(self, obj: ObjectObservation) -> bool:
        """Return True for a moving object already past every intercept the style allows."""
        velocity = np.asarray(obj.velocity_mps, dtype=float)[:2]
        speed = float(np.linalg.norm(velocity))
        if speed < 1e-3:
            return False
        along = float(velocity @ np.asarray(obj.position_m, dtype=float)[:2]) / speed
        return along > self.style.intercept_along_m[1]

    def _find(self, obs: Observation, object_id: str) -> ObjectObservation | None:
        return next((o for o in obs.objects if o.object_id == object_id), None)

    # -- main entry ----------------------------------------------------------------------------
    def act(self, observation: Observation) -> list[JointCommand]:
        """Take one look and return the trajectories to send now (often none).

        Args:
            observation: Time, measured joints and objects in ``base_link``.

        Returns:
            Commands for the arm and/or hand controllers, ``time_from_start`` relative to now.

        Raises:
            ValueError: If the joint vector is not 18 long.

        """
        q = np.asarray(observation.joint_positions, dtype=float)
        if q.shape != (len(ALL_JOINT_NAMES),):
            raise ValueError(
                f"observation.joint_positions shape {q.shape}: expected ({len(ALL_JOINT_NAMES)},)"
            )
        now = float(observation.time_s)
        self._now_s = now
        self._buffer.append(observation)
        if self._at_rest(now):
            # No arm motion in progress: the arm is where it is measured, whatever was
            # commanded before (a trial reset, an earlier operator, a first look).
            self._log = _CommandLog(np.array([now]), q[None, :N_ARM].copy())
        commands: list[JointCommand] = []
        if self.phase in (Phase.IDLE, Phase.DONE):
            self._look_for_object(now)
        if self.phase == Phase.WAITING:
            commands += self._wait(now)
        if self.phase == Phase.REACHING:
            commands += self._reach(now)
        if self.phase == Phase.TRANSFERRING:
            commands += self._transfer(now)
        return commands

    def _at_rest(self, now: float) -> bool:
        """Return True when no arm command is in progress (none sent yet, or the last one ended)."""
        if self.phase not in (Phase.IDLE, Phase.WAITING, Phase.DONE):
            return False
        return self._log.times_s.size == 0 or now >= float(self._log.times_s[-1])

    def _look_for_object(self, now: float) -> None:
        seen = self._perceived(now)
        for obj in seen.objects:
            if obj.object_id in self.handled or not self._on_belt(obj):
                continue
            if obj.type_name not in self.world.objects:
                self.handled.add(obj.object_id)  # nothing the operator knows to do with it
                continue
            if self._leaving(obj):
                continue  # already past where anyone would reach for it (e.g. a stale track)
            params = draw_pick_parameters(self.style, self.rng)
            self._pick = _Pick(obj.object_id, obj.type_name, params, first_seen_s=now)
            self.handled.add(obj.object_id)
            self.phase = Phase.WAITING
            return

    def _estimate(self, now: float, object_id: str) -> LinearMotion | None:
        seen = self._perceived(now)
        obj = self._find(seen, object_id)
        if obj is None:
            return None
        velocity = np.asarray(obj.velocity_mps, dtype=float).copy()
        velocity[2] = 0.0  # the belt carries objects horizontally
        return LinearMotion(
            np.asarray(obj.position_m, dtype=float).copy(), velocity, seen.objects_stamp_s
        )

    # -- waiting: reaction delay and the moment to start the reach ------------------------------
    def _wait(self, now: float) -> list[JointCommand]:
        pick = self._pick
        assert pick is not None
        if now < pick.first_seen_s + pick.params.reaction_delay_s:
            return []
        estimate = self._estimate(now, pick.object_id)
        if estimate is None:
            self.phase = Phase.IDLE
            return []
        grasp_s = self._intercept_time(now, estimate, pick.params)
        if now < grasp_s - pick.params.reach_duration_s:
            return []  # it is still far upstream: wait for it, as a person would
        self.picks_started += 1
        pick.start_s = now
        pick.grasp_s = max(grasp_s, now + 0.6 * pick.params.reach_duration_s)
        pick.track = SmoothTrack(estimate)
        pick.close_s = pick.grasp_s - pick.params.closure_lead_s
        pick.lift_s = pick.close_s + pick.params.closure_duration_s + pick.params.hold_before_lift_s
        pick.shape = self._grasp_shape(pick.type_name)
        self._build_reach_path(now, estimate, pick)
        self.phase = Phase.REACHING
        commands = self._reach(now, force=True)
        commands.append(
            self._hand_ramp(now, HAND_READY, pick.shape.open, 0.5 * pick.params.reach_duration_s)
        )
        return commands

    def _intercept_time(self, now: float, estimate: LinearMotion, params: PickParameters) -> float:
        """When the object reaches the chosen spot along its travel (now if it does not move)."""
        velocity = estimate.velocity_mps[:2]
        speed = float(np.linalg.norm(velocity))
        if speed < 1e-3:
            return now + params.reach_duration_s
        direction = velocity / speed
        along_now = float(direction @ estimate(now)[:2])
        return now + max(0.0, (params.intercept_along_m - along_now) / speed)

    def _grasp_yaw(self, obj_yaw: float, type_name: str, wrist_offset: float) -> float:
        """Palm yaw that closes the hand across the object's narrow side, near the ready yaw.

        The palm closes along its y axis (fingers on +y, thumb on −y); the yaw is chosen among
        the object's symmetric grasp directions as the one nearest the comfortable ready yaw.
        """
        obj = self.world.objects[type_name]
        if obj.shape in ("cylinder", "sphere"):
            return self.home_yaw_rad + wrist_offset
        size_x, size_y = obj.size_m[0], obj.size_m[1]
        base = obj_yaw - math.pi / 2.0 if size_x <= size_y else obj_yaw
        period = math.pi / 2.0 if abs(size_x - size_y) < 0.005 else math.pi
        k = round((self.home_yaw_rad - base) / period)
        return base + k * period + wrist_offset

    def _build_reach_path(self, now: float, estimate: LinearMotion, pick: _Pick) -> None:
        params = pick.params
        obj = self._find(self._perceived(now), pick.object_id)
        assert obj is not None and pick.track is not None
        track = pick.track
        size = self.world.objects[pick.type_name].size_m
        top = size[2] / 2.0
        shape = pick.shape
        assert shape is not None
        palm0, yaw0 = self._palm_at(now)
        offset0 = palm0 - track.position(now)
        grasp_z = top + shape.palm_above_top_m + params.grasp_height_m
        hover = np.array([0.0, 0.0, grasp_z + params.hover_height_m])
        grasp = np.array([0.0, 0.0, grasp_z])
        reach = pick.grasp_s - now
        hover_s = params.hover_fraction * reach
        descent_start = now + params.descent_start_fraction * reach
        descent_s = pick.grasp_s - descent_start
        yaw_g = self._grasp_yaw(
            yaw_of_quat(obj.quat_wxyz), pick.type_name, params.wrist_yaw_offset_rad
        )
        yaw_g = yaw0 + wrap_angle(yaw_g - yaw0, upper_closed=True)
        pick.grasp_yaw_rad = yaw_g
        pick.start_azimuth_rad = math.atan2(palm0[1], palm0[0])
        pick.start_yaw_rad = yaw0

        def path(t: float) -> tuple[FloatArray, float]:
            s_hover = minimum_jerk((t - now) / hover_s)
            s_down = minimum_jerk((t - descent_start) / descent_s)
            offset = offset0 + (hover - offset0) * s_hover + (grasp - hover) * s_down
            return track.position(t) + offset, yaw0 + (yaw_g - yaw0) * s_hover

        pick.path = path

    # -- reaching with visual servoing ---------------------------------------------------------
    def _reach(self, now: float, force: bool = False) -> list[JointCommand]:
        pick = self._pick
        assert pick is not None and pick.path is not None and pick.track is not None
        commands: list[JointCommand] = []
        if now < pick.close_s and now - pick.last_replan_s >= self.style.replan_period_s - 1e-9:
            estimate = self._estimate(now, pick.object_id)
            if estimate is not None and not force:
                pick.track.correct(now, estimate, self.style.correction_duration_s)
            pick.last_replan_s = now
            arm = self._arm_command(now, pick.path, pick.lift_s)
            if arm is None:
                self._abort(now)
                return [self._hand_command(now, [(0.4, HAND_READY)])]
            commands.append(arm)
        if not pick.closed and now >= pick.close_s - 1e-9:
            pick.closed = True
            assert pick.shape is not None
            commands.append(
                self._hand_ramp(
                    now, pick.shape.open, self._closed_hand(pick), pick.params.closure_duration_s
                )
            )
        if now >= pick.lift_s - 1e-9:
            self.phase = Phase.TRANSFERRING
            commands += self._start_transfer(now)
        return commands

    def _abort(self, now: float) -> None:
        """Give up this object (unreachable): go back to the ready pose."""
        self.ik_failures += 1
        self._pick = None
        self.phase = Phase.IDLE

    # -- lift, transport, release, return -----------------------------------------------------
    def _start_transfer(self, now: float) -> list[JointCommand]:
        pick = self._pick
        assert pick is not None and pick.track is not None
        params = pick.params
        palm0, yaw0 = self._palm_at(now)
        velocity = pick.track.velocity(now)
        velocity[2] = 0.0
        lift_end = palm0 + velocity * params.lift_duration_s * 0.5
        lift_end[2] += params.lift_height_m
        lift = Quintic.fit(palm0, lift_end, params.lift_duration_s, start_velocity=velocity)
        t_lift_end = now + params.lift_duration_s

        bin_name = self.world.objects[pick.type_name].target_bin
        height = self.world.objects[pick.type_name].size_m[2]
        drop = self.bin_positions_m[bin_name].copy()
        drop[:2] += params.drop_offset_m
        assert pick.shape is not None
        palm_above = pick.shape.palm_above_top_m + params.grasp_height_m
        place = drop.copy()  # object lowered into the bin, released just above its floor
        place[2] += BIN_FLOOR_HEIGHT_M + params.place_height_m + height + palm_above
        drop[2] += BIN_RIM_HEIGHT_M + params.drop_height_m + height + palm_above
        t_drop = t_lift_end + params.transport_duration_s
        sweep = _CylindricalMove(lift_end, drop, t_lift_end, params.transport_duration_s)
        t_placed = t_drop + params.lower_duration_s
        t_release = t_placed + 0.1 / params.speed
        t_rise = t_release + params.release_duration_s + 0.1 / params.speed
        t_return = t_rise + params.rise_duration_s
        # Back the way it came: the azimuth and the palm yaw unwind what the reach and the
        # sweep turned (the shortest way home can continue round and wind the base and wrist
        # joints a full turn from where the pick started).
        start_az = pick.start_azimuth_rad
        turned_az = (
            wrap_angle(math.atan2(lift_end[1], lift_end[0]) - start_az, upper_closed=True)
            + sweep.turn_rad
        )
        home_az = math.atan2(self.home_palm_m[1], self.home_palm_m[0])
        back = _CylindricalMove(
            drop,
            self.home_palm_m,
            t_return,
            params.return_duration_s,
            turn_rad=wrap_angle(home_az - start_az, upper_closed=True) - turned_az,
        )
        t_end = t_return + params.return_duration_s
        # unwrapped since start
        yaw0 = pick.grasp_yaw_rad + wrap_angle(yaw0 - pick.grasp_yaw_rad, upper_closed=True)
        yaw_drop = yaw0 + sweep.turn_rad
        yaw_home = pick.start_yaw_rad + wrap_angle(
            self.home_yaw_rad - pick.start_yaw_rad, upper_closed=True
        )
        arc = params.transport_arc_m

        def path(t: float) -> tuple[FloatArray, float]:
            if t <= t_lift_end:
                return lift(t - now), yaw0
            if t <= t_drop:
                position = sweep(t)
                position[2] += arc * smooth_bump((t - t_lift_end) / params.transport_duration_s)
                return position, yaw0 + sweep.turned(t)
            if t <= t_rise:  # lower it in, hold while the hand opens
                s = minimum_jerk((t - t_drop) / params.lower_duration_s)
                return drop + (place - drop) * s, yaw_drop
            if t <= t_return:  # the open hand back up over the rim
                s = minimum_jerk((t - t_rise) / params.rise_duration_s)
                return place + (drop - place) * s, yaw_drop
            s = minimum_jerk((t - t_return) / params.return_duration_s)
            return back(t), yaw_drop + (yaw_home - yaw_drop) * s

        pick.path = path
        pick.end_s = t_end
        pick.release_s = t_release
        arm = self._arm_command(now, path, t_end)
        if arm is None:
            self._abort(now)
            return []
        return [arm]

    def _transfer(self, now: float) -> list[JointCommand]:
        pick = self._pick
        assert pick is not None
        commands: list[JointCommand] = []
        if not pick.released and now >= pick.release_s - 1e-9:
            pick.released = True
            commands.append(
                self._hand_ramp(
                    now, self._closed_hand(pick), HAND_WIDE, pick.params.release_duration_s
                )
            )
        if now >= pick.end_s:
            self.phase = Phase.DONE
            self._pick = None
            commands.append(self._hand_ramp(now, HAND_WIDE, HAND_READY, 0.5))
        return commands

    def _grasp_shape(self, type_name: str) -> GraspShape:
        """Return the cage pre-shape for this object type (closing across its narrow side)."""
        obj = self.world.objects[type_name]
        half_width = min(obj.size_m[0], obj.size_m[1]) / 2.0
        return cage_preshape(obj.size_m[2], half_width, self.style.closure_flexion_rad)

    @staticmethod
    def _closed_hand(pick: _Pick) -> FloatArray:
        """Return the closure of this pick: the shape's closure scaled, a little thumb rotation."""
        assert pick.shape is not None
        delta = (pick.shape.closed - pick.shape.open) * pick.params.closure_scale
        closed = np.clip(pick.shape.open + delta, HAND_LOWER, HAND_UPPER)
        closed[0] = pick.params.thumb_rotation_rad
        return closed

    # -- commands ------------------------------------------------------------------------------
    def _palm_at(self, t: float) -> tuple[FloatArray, float]:
        """Commanded palm position and yaw at ``t`` (from the last arm command)."""
        q = self._log.at(t, self.home_arm)
        pose = self.ik.forward(q)
        return pose[:3, 3].copy(), math.atan2(pose[1, 0], pose[0, 0])

    def _arm_command(self, now: float, path: PalmPath, end_s: float) -> JointCommand | None:
        """Sample ``path`` from now to ``end_s`` and convert it to joints by IK."""
        dt = self.style.command_dt_s
        count = max(1, math.ceil((end_s - now) / dt - 1e-9))
        times = now + dt * np.arange(1, count + 1)
        times[-1] = max(end_s, now + 1e-3)
        seed = self._log.at(now, self.home_arm)
        positions = np.empty((count, N_ARM))
        try:
            for k, t in enumerate(times):
                position, yaw = path(float(t))
                seed = self.ik.solve(top_down_palm_pose(position, yaw), seed, 1e-4, 2e-3, 100)
                positions[k] = seed
        except IkError:
            return None
        positions = np.clip(positions, ARM_LOWER, ARM_UPPER)
        self._log = _CommandLog(
            np.concatenate([[now], times]), np.vstack([self._log.at(now, self.home_arm), positions])
        )
        return JointCommand("arm", ARM_JOINT_NAMES, np.asarray(times - now, dtype=float), positions)

    def _hand_command(self, now: float, points: Sequence[tuple[float, FloatArray]]) -> JointCommand:
        times = np.array([t for t, _ in points], dtype=float)
        positions = np.clip(np.array([p for _, p in points], dtype=float), HAND_LOWER, HAND_UPPER)
        return JointCommand("hand", HAND_JOINT_NAMES, times, positions)

    def _hand_ramp(
        self, now: float, start: FloatArray, end: FloatArray, duration_s: float
    ) -> JointCommand:
        """Return a minimum-jerk hand motion from ``start`` to ``end`` (dense points)."""
        count = max(2, math.ceil(duration_s / self.style.command_dt_s))
        times = duration_s * np.arange(1, count + 1) / count
        points = [(float(t), start + (end - start) * minimum_jerk(t / duration_s)) for t in times]
        return self._hand_command(now, points)


class _CylindricalMove:
    """A minimum-jerk sweep in cylindrical coordinates about the base z axis.

    People move objects across the robot's body by swinging the arm round the shoulder, not
    through it: radius, azimuth and height each follow a minimum-jerk profile.
    """

    def __init__(
        self,
        start: FloatArray,
        end: FloatArray,
        start_s: float,
        duration_s: float,
        turn_rad: float | None = None,
    ):
        self.start = np.asarray(start, dtype=float)
        self.end = np.asarray(end, dtype=float)
        self.start_s = start_s
        self.duration_s = duration_s
        self.r0 = float(np.hypot(*self.start[:2]))
        self.r1 = float(np.hypot(*self.end[:2]))
        self.phi0 = math.atan2(self.start[1], self.start[0])
        shortest = wrap_angle(math.atan2(self.end[1], self.end[0]) - self.phi0, upper_closed=True)
        if turn_rad is None:
            self.turn_rad = shortest
        else:  # the given way round (the shortest turn plus whole turns)
            self.turn_rad = shortest + 2.0 * math.pi * round((turn_rad - shortest) / (2 * math.pi))

    def turned(self, t: float) -> float:
        """Azimuth turned by time ``t``."""
        return self.turn_rad * minimum_jerk((t - self.start_s) / self.duration_s)

    def __call__(self, t: float) -> FloatArray:
        s = minimum_jerk((t - self.start_s) / self.duration_s)
        radius = self.r0 + (self.r1 - self.r0) * s
        phi = self.phi0 + self.turn_rad * s
        z = self.start[2] + (self.end[2] - self.start[2]) * s
        return np.array([radius * math.cos(phi), radius * math.sin(phi), z])
