"""ROS-free policy inference: observation buffer, safety filter and a worker-thread engine.

The :class:`InferenceEngine` holds a loaded :class:`~r2s2r_policy.models.Policy`, the latest
observation of every input with the time it was received (camera images resized to the spec's
size, joint positions, belt speed, the tracked object made from ``/objects/tracks`` by
:class:`r2s2r_recorder.dataset.ObjectTrackLatch` as in the datasets), and runs
:meth:`~r2s2r_policy.models.Policy.predict_chunk` at the command rate on its own worker thread
(never in a sensor callback).

Time (the rule of :mod:`r2s2r_policy.spec`): chunk step ``k`` is the target ``k + 1`` control
steps after the observation it was computed from, so the sent trajectory's ``time_from_start``
of point ``k`` is ``(k + 1)·dt`` minus the time already spent since the newest image arrived.
How chunks become commands is a setting (:class:`InferenceConfig`):

- ``receding`` (default): a new chunk is computed every ``executed_steps`` control steps and
  replaces the trajectory in force (with 1: every step, only its first point is ever reached);
- ``temporal_ensemble`` (ACT, Zhao et al. 2023): a chunk every step; the target of each future
  step is the weighted mean of every stored chunk's prediction for that step, weights
  ``exp(-m·i)`` with ``i = 0`` the oldest prediction (ACT's convention, ``m`` =
  ``ensemble_weight_decay``).

Every command passes the safety filter before it is handed to the ``publish`` callback:

- a chunk with a NaN or Inf is dropped and counted (:func:`chunk_is_finite`);
- joint positions are clamped to the joint limits (:func:`clamp_positions`);
- successive points (starting at the measured position) are limited so that
  ``|Δq| / dt`` stays within the velocity limits (:func:`limit_velocities`);
- when any observation is older than ``stale_observation_s`` the engine stops commanding: it
  sends one hold command at the measured position and then nothing until every input is fresh
  again (:func:`observation_ages`, :meth:`InferenceEngine.step`).

The policy node (:mod:`r2s2r_policy.nodes.policy_inference`) is a thin edge over this module;
the in-process evaluator (:mod:`r2s2r_policy.evaluation.in_process`) drives the same engine
synchronously on simulated time (:meth:`InferenceEngine.step` with a sim clock), so both
paths share one observation pipeline and one safety filter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES, JOINT_LIMITS
from r2s2r_recorder.dataset.object_track import ObjectTrackLatch, TrackView, type_names_of

from .data import resize_image
from .models import Policy
from .spec import BELT_SPEED_KEY, JOINT_POS_KEY, OBJECT_TRACK_KEY, PolicySpec

_LOG = logging.getLogger(__name__)

CONTROLLER_JOINTS: dict[str, tuple[str, ...]] = {"arm": ARM_JOINT_NAMES, "hand": HAND_JOINT_NAMES}
"""Joints of each joint_trajectory_controller (``/<name>_controller/joint_trajectory``)."""

LATENCY_WINDOW = 2000
"""Inference latencies kept for the percentiles."""


class InferenceConfig(ConfigModel):
    """Settings of the :class:`InferenceEngine` (the node's parameters carry the same names)."""

    stale_observation_s: float = Field(
        default=0.2,
        gt=0.0,
        le=10.0,
        description="An input older than this stops commanding (one hold, then nothing).",
    )
    command_rate_hz: float = Field(
        default=0.0,
        ge=0.0,
        le=1000.0,
        description="Inference/command rate; 0 = the checkpoint's control_rate_hz.",
    )
    velocity_limit_scale: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description="Fraction of each joint's velocity limit allowed between chunk points.",
    )
    hold_time_s: float = Field(
        default=0.1,
        gt=0.0,
        le=10.0,
        description="time_from_start of the single point of a hold command.",
    )
    execution: Literal["receding", "temporal_ensemble"] = Field(
        default="receding",
        description="receding: a new chunk every executed_steps control steps replaces the "
        "last; temporal_ensemble: a chunk every step, future targets averaged over chunks (ACT).",
    )
    executed_steps: int = Field(
        default=1,
        ge=1,
        le=256,
        description="receding: control steps of a chunk executed before the next inference "
        "(at most the chunk length).",
    )
    ensemble_weight_decay: float = Field(
        default=0.01,
        ge=0.0,
        le=10.0,
        description="temporal_ensemble: m of the weights exp(-m·i), i = 0 the oldest chunk.",
    )
    trigger: Literal["images", "timer"] = Field(
        default="images",
        description="images: infer as soon as every camera delivered a new frame (lowest "
        "image-to-command latency; a step also runs when none came for 1.5 periods, so "
        "staleness is still detected); timer: infer every period.",
    )


class InterventionKind(StrEnum):
    """Safety interventions, counted per chunk (or per hold)."""

    POSITION_CLAMP = "position_clamp"
    VELOCITY_CLAMP = "velocity_clamp"
    NON_FINITE_ACTION = "non_finite_action"
    STALE_OBSERVATION = "stale_observation"
    INFERENCE_ERROR = "inference_error"


@dataclass(frozen=True)
class JointSafetyLimits:
    """Position and velocity limits of a list of joints, as arrays in that order.

    Attributes:
        joint_names: Joint names.
        lower_rad: (N,) lower position limits.
        upper_rad: (N,) upper position limits.
        velocity_radps: (N,) speed limits.

    """

    joint_names: tuple[str, ...]
    lower_rad: np.ndarray
    upper_rad: np.ndarray
    velocity_radps: np.ndarray

    @classmethod
    def for_joints(
        cls, joint_names: Sequence[str], velocity_scale: float = 1.0
    ) -> JointSafetyLimits:
        """Limits of ``joint_names`` from :data:`r2s2r_description.robot.JOINT_LIMITS`.

        Args:
            joint_names: Joints in action order.
            velocity_scale: Fraction of the velocity limits to allow, in (0, 1].

        Raises:
            KeyError: If a joint has no limits in the robot description (all such are named).
            ValueError: If ``velocity_scale`` is outside (0, 1].

        """
        unknown = [name for name in joint_names if name not in JOINT_LIMITS]
        if unknown:
            raise KeyError(f"joints {unknown} have no limits in r2s2r_description.robot")
        if not 0.0 < velocity_scale <= 1.0:
            raise ValueError(f"velocity_scale = {velocity_scale}: expected in (0, 1]")
        limits = [JOINT_LIMITS[name] for name in joint_names]
        return cls(
            joint_names=tuple(joint_names),
            lower_rad=np.array([lim.lower_rad for lim in limits]),
            upper_rad=np.array([lim.upper_rad for lim in limits]),
            velocity_radps=np.array([lim.velocity_radps for lim in limits]) * velocity_scale,
        )


def chunk_is_finite(chunk: np.ndarray) -> bool:
    """Whether every value of an action chunk is finite (no NaN, no Inf)."""
    return bool(np.all(np.isfinite(chunk)))


def clamp_positions(chunk: np.ndarray, limits: JointSafetyLimits) -> tuple[np.ndarray, int]:
    """Clamp every point of a ``(H, N)`` chunk to the joint position limits.

    Returns:
        The clamped chunk (a new array) and the number of values that were changed.

    """
    clamped = np.clip(chunk, limits.lower_rad, limits.upper_rad)
    return clamped, int(np.count_nonzero(clamped != chunk))


def limit_velocities(
    chunk: np.ndarray, start_rad: np.ndarray, dt_s: float, limits: JointSafetyLimits
) -> tuple[np.ndarray, int]:
    """Limit the step between successive points to ``velocity_radps * dt_s``.

    Point ``k`` is reached ``dt_s`` after point ``k - 1``; point 0 ``dt_s`` after
    ``start_rad`` (the measured position). A step that is too large is shortened towards its
    target, and later points start from the shortened one, so the returned chunk is a feasible
    path that follows the policy's as closely as the limits allow. With ``start_rad`` and
    ``chunk`` inside the position limits, the result stays inside them.

    Args:
        chunk: ``(H, N)`` joint targets (rad).
        start_rad: ``(N,)`` position the chunk starts from (rad).
        dt_s: Time between points (s), > 0.
        limits: Velocity limits of the N joints.

    Returns:
        The limited chunk (a new array) and the number of steps (point × joint) shortened.

    Raises:
        ValueError: If ``dt_s`` is not positive or shapes disagree.

    """
    if not dt_s > 0.0:
        raise ValueError(f"dt_s = {dt_s}: expected > 0")
    if chunk.ndim != 2 or chunk.shape[1] != start_rad.shape[0]:
        raise ValueError(f"chunk {chunk.shape} and start {start_rad.shape}: expected (H, N), (N,)")
    max_step = limits.velocity_radps * dt_s
    limited = np.empty_like(chunk, dtype=np.float64)
    previous = np.asarray(start_rad, dtype=np.float64)
    changed = 0
    for index in range(chunk.shape[0]):
        step = chunk[index] - previous
        bounded = np.clip(step, -max_step, max_step)
        changed += int(np.count_nonzero(np.abs(bounded - step) > 1e-12))
        previous = previous + bounded
        limited[index] = previous
    return limited, changed


def observation_ages(received_s: Mapping[str, float], now_s: float) -> dict[str, float]:
    """Age (s) of every input: ``now_s`` minus the time it was received."""
    return {key: now_s - stamp for key, stamp in received_s.items()}


def stale_inputs(ages_s: Mapping[str, float], max_age_s: float) -> list[str]:
    """Return the inputs older than ``max_age_s``, sorted."""
    return sorted(key for key, age in ages_s.items() if age > max_age_s)


def split_by_controller(
    joint_names: Sequence[str], positions: np.ndarray
) -> dict[str, tuple[list[str], np.ndarray]]:
    """Split ``(M, N)`` trajectory points into one block per controller.

    Returns:
        ``controller -> (joint names, (M, n) positions)`` for each controller that owns at least
        one of ``joint_names``, the joints in the controller's order.

    Raises:
        ValueError: If a joint belongs to no controller.

    """
    index = {name: i for i, name in enumerate(joint_names)}
    owned = {name for joints in CONTROLLER_JOINTS.values() for name in joints}
    orphans = [name for name in joint_names if name not in owned]
    if orphans:
        raise ValueError(f"joints {orphans} belong to no controller ({sorted(CONTROLLER_JOINTS)})")
    blocks: dict[str, tuple[list[str], np.ndarray]] = {}
    for controller, joints in CONTROLLER_JOINTS.items():
        names = [name for name in joints if name in index]
        if names:
            blocks[controller] = (names, positions[:, [index[name] for name in names]])
    return blocks


@dataclass(frozen=True)
class ActionCommand:
    """A joint trajectory to send (one JointTrajectory per controller).

    Attributes:
        joint_names: Joints, action order.
        times_s: ``(M,)`` time_from_start of each point (s), start = when it is sent: point
            ``k`` of a chunk at ``(k + 1)·dt`` after the observation, less the time since.
        positions_rad: ``(M, N)`` targets.
        hold: True for a hold at the measured position (one point).
        observation_time_s: Engine-clock time of the newest image the chunk was computed from.

    """

    joint_names: tuple[str, ...]
    times_s: np.ndarray
    positions_rad: np.ndarray
    hold: bool = False
    observation_time_s: float = 0.0

    def by_controller(self) -> dict[str, tuple[list[str], np.ndarray]]:
        """Split the command per controller (see :func:`split_by_controller`)."""
        return split_by_controller(self.joint_names, self.positions_rad)


class StepStatus(StrEnum):
    """What one :meth:`InferenceEngine.step` did."""

    COMMANDED = "commanded"
    EXECUTING = "executing"  # receding horizon: the chunk in force still has steps to run
    WAITING = "waiting"  # some input never arrived
    HOLD = "hold"  # inputs went stale: the hold command was sent
    HOLDING = "holding"  # still stale, hold already sent: nothing sent
    DROPPED = "dropped"  # non-finite action or inference error: nothing sent


@dataclass(frozen=True)
class StepResult:
    """Outcome of one engine step.

    Attributes:
        status: What happened.
        command: The command sent (COMMANDED, HOLD), else None.
        latency_s: Inference latency of this step (snapshot + model + safety), 0 if none ran.
        detail: Missing or stale inputs, or the error.

    """

    status: StepStatus
    command: ActionCommand | None = None
    latency_s: float = 0.0
    detail: str = ""


@dataclass
class EngineStats:
    """Counters and latency statistics for diagnostics.

    Attributes:
        steps: Engine steps run.
        commands_sent: Chunks sent.
        holds_sent: Hold commands sent.
        interventions: Safety interventions by :class:`InterventionKind` value.
        latency_p50_s: Median inference latency over the recent window.
        latency_p99_s: 99th percentile.
        observation_age_s: Age of each input at the last step.
        last_error: Last inference error message.

    """

    steps: int = 0
    commands_sent: int = 0
    holds_sent: int = 0
    interventions: dict[str, int] = field(
        default_factory=lambda: {kind.value: 0 for kind in InterventionKind}
    )
    latency_p50_s: float = 0.0
    latency_p99_s: float = 0.0
    observation_age_s: dict[str, float] = field(default_factory=dict)
    last_error: str = ""


class ObservationBuffer:
    """The latest value of every policy input with the engine-clock time it was received.

    Thread-safe: sensor callbacks write, the worker reads a consistent snapshot.

    Args:
        spec: The policy spec (image keys and sizes, joint names, belt speed use).

    """

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        self._values: dict[str, np.ndarray] = {}
        self._received_s: dict[str, float] = {}
        self._image_count: dict[str, int] = {key: 0 for key in spec.image_keys}
        self._joint_index: dict[str, int] = {n: i for i, n in enumerate(spec.joint_names)}
        self.latch: ObjectTrackLatch | None = None
        if spec.uses_object_track:
            self.latch = ObjectTrackLatch(type_names_of(spec.object_track_fields))
        self.required_keys = [
            *spec.image_keys,
            JOINT_POS_KEY,
            *([BELT_SPEED_KEY] if spec.use_belt_speed else []),
            *([OBJECT_TRACK_KEY] if spec.uses_object_track else []),
        ]

    def clear(self) -> None:
        """Forget every observation (e.g. on activation: wait for fresh data)."""
        with self._lock:
            self._values.clear()
            self._received_s.clear()
            if self.latch is not None:
                self.latch.reset()

    def set_object_tracks(self, tracks: Sequence[TrackView], received_s: float) -> None:
        """Take one ``/objects/tracks`` message (every track in it), received at ``received_s``.

        The latch's time base is the receive time (the engine clock), so ``age_s`` is the time
        since the target was last published.

        Raises:
            ValueError: If the policy has no tracked-object input.

        """
        if self.latch is None:
            raise ValueError("object tracks: the policy has no tracked-object input")
        with self._lock:
            self.latch.update(received_s, tracks)
            self._received_s[OBJECT_TRACK_KEY] = received_s
            self._values[OBJECT_TRACK_KEY] = np.zeros(0, dtype=np.float32)  # made at snapshot

    def set_image(self, key: str, rgb: np.ndarray, received_s: float) -> None:
        """Store a uint8 ``(H, W, 3)`` RGB image of camera ``key``, resized to the spec's size.

        Raises:
            KeyError: If the spec has no such camera.
            ValueError: If the image is not uint8 ``(H, W, 3)``.

        """
        height_px, width_px, _ = self.spec.image_shape(key)
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(
                f"image {key!r}: expected uint8 (H, W, 3), got {rgb.dtype} {rgb.shape}"
            )
        resized = np.ascontiguousarray(resize_image(rgb, height_px, width_px))
        with self._lock:
            self._values[key] = resized
            self._received_s[key] = received_s
            self._image_count[key] += 1

    def image_counts(self) -> dict[str, int]:
        """Images received so far per camera key."""
        with self._lock:
            return dict(self._image_count)

    def set_joint_positions(
        self, names: Sequence[str], positions_rad: Sequence[float] | np.ndarray, received_s: float
    ) -> None:
        """Store joint positions given by name (any order, extra joints ignored).

        Raises:
            ValueError: If lengths differ, a policy joint is missing or a value is not finite.

        """
        values = np.asarray(positions_rad, dtype=np.float64)
        if len(names) != values.shape[0]:
            raise ValueError(f"joint state: {len(names)} names but {values.shape[0]} positions")
        lookup = {name: i for i, name in enumerate(names)}
        missing = [name for name in self.spec.joint_names if name not in lookup]
        if missing:
            raise ValueError(f"joint state lacks {missing}")
        ordered = values[[lookup[name] for name in self.spec.joint_names]]
        if not np.all(np.isfinite(ordered)):
            raise ValueError("joint state: non-finite position")
        with self._lock:
            self._values[JOINT_POS_KEY] = ordered
            self._received_s[JOINT_POS_KEY] = received_s

    def set_belt_speed(self, speed_mps: float, received_s: float) -> None:
        """Store the belt speed (m/s along belt x).

        Raises:
            ValueError: If the speed is not finite.

        """
        if not np.isfinite(speed_mps):
            raise ValueError(f"belt speed = {speed_mps}: expected a finite value")
        with self._lock:
            self._values[BELT_SPEED_KEY] = np.array([speed_mps], dtype=np.float32)
            self._received_s[BELT_SPEED_KEY] = received_s

    def snapshot(self, now_s: float) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """Return current values at ``now_s`` and receive times (copies; arrays never mutated).

        The tracked-object vector is made here, at ``now_s`` (its ``age_s`` grows with time).
        """
        with self._lock:
            values, received = dict(self._values), dict(self._received_s)
            if self.latch is not None and OBJECT_TRACK_KEY in values:
                values[OBJECT_TRACK_KEY] = self.latch.features(now_s)
            return values, received

    def joint_positions(self) -> np.ndarray | None:
        """Latest joint positions (spec order), or None."""
        with self._lock:
            return self._values.get(JOINT_POS_KEY)


class InferenceEngine:
    """Runs a policy on the latest observations and sends safety-filtered action chunks.

    Args:
        policy: Loaded policy (eval mode).
        config: Rates and safety settings.
        publish: Called with each :class:`ActionCommand` (from the worker thread, or from the
            caller of :meth:`step`).
        clock: Monotonic time source in seconds (wall clock by default; the in-process evaluator
            passes simulated time).

    Raises:
        KeyError: If an action joint has no limits in the robot description.
        ValueError: If an action joint belongs to no controller.

    """

    def __init__(
        self,
        policy: Policy,
        config: InferenceConfig | None = None,
        publish: Callable[[ActionCommand], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.spec = policy.spec
        self.config = config or InferenceConfig()
        self.limits = JointSafetyLimits.for_joints(
            self.spec.action_names, self.config.velocity_limit_scale
        )
        split_by_controller(self.spec.action_names, np.zeros((1, self.spec.action_dim)))
        missing_state = [n for n in self.spec.action_names if n not in self.spec.joint_names]
        if missing_state:
            raise ValueError(
                f"action joints {missing_state} are not in the policy's joint state: the "
                "measured start position of the velocity limit would be unknown"
            )
        self._action_in_state = [self.spec.joint_names.index(n) for n in self.spec.action_names]
        self.publish = publish
        self.clock = clock
        self.buffer = ObservationBuffer(self.spec)
        self.dt_s = 1.0 / self.spec.control_rate_hz
        self.period_s = 1.0 / (self.config.command_rate_hz or self.spec.control_rate_hz)
        self._times_s = self.dt_s * np.arange(1, self.spec.chunk_length + 1, dtype=np.float64)
        if self.config.execution == "receding" and (
            self.config.executed_steps > self.spec.chunk_length
        ):
            raise ValueError(
                f"executed_steps = {self.config.executed_steps}: expected at most the chunk "
                f"length {self.spec.chunk_length}"
            )
        self._last_chunk_time_s: float | None = None
        self._chunks: deque[tuple[float, np.ndarray]] = deque(maxlen=self.spec.chunk_length)
        self._stats_lock = threading.Lock()
        self._stats = EngineStats()
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._holding = False
        self._publish_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._consumed: dict[str, int] = {}
        self._accepting = True  # chunks are sent; False after stop() until start()
        self._thread: threading.Thread | None = None

    # -- observations (any thread) --------------------------------------------------------
    def observe_image(self, key: str, rgb: np.ndarray) -> None:
        """Store a camera image (resized to the spec), received now.

        With ``trigger='images'`` the worker wakes once every camera has a new frame.
        """
        self.buffer.set_image(key, rgb, self.clock())
        if self.new_image_set():
            self._wake.set()

    def new_image_set(self) -> bool:
        """Whether every camera delivered a frame since the last step."""
        counts = self.buffer.image_counts()
        return all(counts[key] > self._consumed.get(key, 0) for key in counts)

    def observe_joints(
        self, names: Sequence[str], positions_rad: Sequence[float] | np.ndarray
    ) -> None:
        """Store joint positions, received now."""
        self.buffer.set_joint_positions(names, positions_rad, self.clock())

    def observe_belt_speed(self, speed_mps: float) -> None:
        """Store the belt speed, received now."""
        self.buffer.set_belt_speed(speed_mps, self.clock())

    def observe_object_tracks(self, tracks: Sequence[TrackView]) -> None:
        """Store one ``/objects/tracks`` message, received now (ignored without track input)."""
        if self.buffer.latch is not None:
            self.buffer.set_object_tracks(tracks, self.clock())

    @property
    def uses_object_tracks(self) -> bool:
        """Whether the policy reads ``/objects/tracks``."""
        return self.buffer.latch is not None

    def reset(self) -> None:
        """Forget observations, chunks and the hold state (a new episode waits for inputs)."""
        self.buffer.clear()
        self._holding = False
        self._last_chunk_time_s = None
        self._chunks.clear()

    def _chunk_due(self, now_s: float) -> bool:
        """Receding horizon: whether the chunk in force has run its executed steps.

        Measured on the engine clock from the last chunk sent, with half an engine period of
        slack (ticks are never exactly on the grid).
        """
        if self.config.execution != "receding" or self._last_chunk_time_s is None:
            return True
        elapsed = now_s - self._last_chunk_time_s
        return elapsed + 0.5 * self.period_s >= self.config.executed_steps * self.dt_s

    def _ensembled(self, observation_time_s: float, chunk: np.ndarray) -> np.ndarray:
        """Temporal ensembling: the weighted mean prediction of every future step (ACT)."""
        self._chunks.append((observation_time_s, chunk))
        horizon = self.spec.chunk_length
        out = np.empty_like(chunk, dtype=np.float64)
        for step in range(horizon):
            target_s = observation_time_s + (step + 1) * self.dt_s
            predictions = []
            for chunk_time_s, stored in self._chunks:  # oldest first
                index = round((target_s - chunk_time_s) / self.dt_s) - 1
                if 0 <= index < horizon:
                    predictions.append(stored[index])
            weights = np.exp(-self.config.ensemble_weight_decay * np.arange(len(predictions)))
            out[step] = np.average(np.stack(predictions), axis=0, weights=weights)
        return out

    # -- one control tick ---------------------------------------------------------------------
    def _count(self, kind: InterventionKind, count: int = 1) -> None:
        with self._stats_lock:
            self._stats.interventions[kind.value] += count

    def _send(self, command: ActionCommand) -> None:
        with self._publish_lock:
            if command.hold:
                with self._stats_lock:
                    self._stats.holds_sent += 1
            elif not self._accepting:
                return  # stopped while this chunk was computed: stop means stop
            else:
                with self._stats_lock:
                    self._stats.commands_sent += 1
            if self.publish is not None:
                self.publish(command)

    def hold_command(self) -> ActionCommand | None:
        """Build a one-point command at the measured position (clamped to limits), or None."""
        positions = self.buffer.joint_positions()
        if positions is None:
            return None
        current = np.clip(
            positions[self._action_in_state], self.limits.lower_rad, self.limits.upper_rad
        )
        return ActionCommand(
            joint_names=tuple(self.spec.action_names),
            times_s=np.array([self.config.hold_time_s]),
            positions_rad=current[None, :],
            hold=True,
        )

    def filter_chunk(self, chunk: np.ndarray, current_rad: np.ndarray) -> np.ndarray | None:
        """Apply the safety filter to a raw chunk; None when it must be dropped (counted).

        Args:
            chunk: ``(H, A)`` raw policy output (rad).
            current_rad: ``(A,)`` measured positions of the action joints.

        """
        if not chunk_is_finite(chunk):
            self._count(InterventionKind.NON_FINITE_ACTION)
            return None
        clamped, n_position = clamp_positions(chunk.astype(np.float64), self.limits)
        if n_position:
            self._count(InterventionKind.POSITION_CLAMP)
        start = np.clip(current_rad, self.limits.lower_rad, self.limits.upper_rad)
        limited, n_velocity = limit_velocities(clamped, start, self.dt_s, self.limits)
        if n_velocity:
            self._count(InterventionKind.VELOCITY_CLAMP)
        return limited

    def step(self) -> StepResult:
        """Run one control tick: check freshness, infer, filter and send.

        Never raises for bad data or model errors: they are counted and reported in the result.
        """
        started = time.perf_counter()
        now_s = self.clock()
        self._consumed = self.buffer.image_counts()
        values, received = self.buffer.snapshot(now_s)
        ages = observation_ages(received, now_s)
        with self._stats_lock:
            self._stats.steps += 1
            self._stats.observation_age_s = ages
        missing = [key for key in self.buffer.required_keys if key not in values]
        if missing:
            return StepResult(StepStatus.WAITING, detail=f"no {missing} yet")
        stale = stale_inputs(ages, self.config.stale_observation_s)
        if stale:
            detail = ", ".join(f"{key} {ages[key] * 1e3:.0f} ms" for key in stale)
            self._last_chunk_time_s = None
            self._chunks.clear()
            if self._holding:
                return StepResult(StepStatus.HOLDING, detail=detail)
            self._holding = True
            self._count(InterventionKind.STALE_OBSERVATION)
            hold = self.hold_command()
            if hold is not None:
                self._send(hold)
            _LOG.warning("stale observations (%s): holding", detail)
            return StepResult(StepStatus.HOLD, command=hold, detail=detail)
        image_time = max(received[key] for key in self.spec.image_keys)
        if not self._holding and not self._chunk_due(now_s):
            return StepResult(StepStatus.EXECUTING)
        self._holding = False
        try:
            chunk = self.policy.predict_chunk(values)
        except (ValueError, RuntimeError) as error:
            self._count(InterventionKind.INFERENCE_ERROR)
            with self._stats_lock:
                self._stats.last_error = str(error)
            return StepResult(StepStatus.DROPPED, detail=str(error))
        if not chunk_is_finite(chunk):
            self._count(InterventionKind.NON_FINITE_ACTION)
            return StepResult(StepStatus.DROPPED, detail="non-finite action")
        if self.config.execution == "temporal_ensemble":
            chunk = self._ensembled(image_time, chunk.astype(np.float64))
        current = values[JOINT_POS_KEY][self._action_in_state]
        safe = self.filter_chunk(chunk, current)
        if safe is None:
            return StepResult(StepStatus.DROPPED, detail="non-finite action")
        # Point k is due (k + 1)·dt after the observation; time already spent is taken off.
        times = self._times_s - max(now_s - image_time, 0.0)
        keep = times > 1e-6
        if not keep.any():
            keep[-1] = True
            times[-1] = self.dt_s
        command = ActionCommand(
            joint_names=tuple(self.spec.action_names),
            times_s=times[keep],
            positions_rad=safe[keep],
            observation_time_s=image_time,
        )
        self._last_chunk_time_s = now_s
        latency_s = time.perf_counter() - started
        with self._stats_lock:
            self._latencies.append(latency_s)
        self._send(command)
        return StepResult(StepStatus.COMMANDED, command=command, latency_s=latency_s)

    # -- worker thread ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the worker thread is commanding."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the worker thread (ticks every ``period_s`` on absolute deadlines)."""
        if self.running:
            return
        self._stop.clear()
        self._wake.clear()
        self._accepting = True
        self._thread = threading.Thread(target=self._run, name="policy_inference", daemon=True)
        self._thread.start()

    def stop(self, send_hold: bool = True, timeout_s: float = 5.0) -> None:
        """Stop commanding at once; optionally send one hold at the measured position.

        No chunk is sent after this returns, even one whose inference was in progress.
        """
        with self._publish_lock:
            self._accepting = False
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._thread = None
        if send_hold:
            hold = self.hold_command()
            if hold is not None:
                self._send(hold)

    def _run(self) -> None:
        if self.config.trigger == "images":
            self._run_on_images()
            return
        deadline = time.monotonic()
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:
                _LOG.exception("inference step failed")
                self._count(InterventionKind.INFERENCE_ERROR)
            deadline += self.period_s
            now = time.monotonic()
            if deadline < now:  # overran: skip missed ticks instead of bursting
                deadline = now
            self._stop.wait(deadline - now)

    def _run_on_images(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(1.5 * self.period_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.step()
            except Exception:
                _LOG.exception("inference step failed")
                self._count(InterventionKind.INFERENCE_ERROR)

    # -- diagnostics --------------------------------------------------------------------------
    def stats(self) -> EngineStats:
        """Return a copy of the counters with latency percentiles over the recent window."""
        with self._stats_lock:
            latencies = np.array(self._latencies) if self._latencies else None
            stats = EngineStats(
                steps=self._stats.steps,
                commands_sent=self._stats.commands_sent,
                holds_sent=self._stats.holds_sent,
                interventions=dict(self._stats.interventions),
                observation_age_s=dict(self._stats.observation_age_s),
                last_error=self._stats.last_error,
            )
        if latencies is not None:
            stats.latency_p50_s = float(np.percentile(latencies, 50))
            stats.latency_p99_s = float(np.percentile(latencies, 99))
        return stats
