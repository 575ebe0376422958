"""The inference engine: a policy run on the latest observations, commands safety-filtered.

The overview (time rule, execution modes, safety filter) is the package's,
:mod:`r2s2r_policy.inference`. The engine takes its inputs through an
:class:`~r2s2r_policy.inference.observations.ObservationBuffer`, filters every chunk with
:mod:`r2s2r_policy.inference.safety`, averages chunks with a
:class:`~r2s2r_policy.inference.ensemble.TemporalEnsemble` when configured to, and hands each
:class:`~r2s2r_policy.inference.commands.ActionCommand` to its ``publish`` callback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_dataset.object_track import TrackView

from r2s2r_dataset import BELT_SPEED_KEY, JOINT_POS_KEY, OBJECT_TRACK_KEY

from ..models import Policy
from .commands import ActionCommand, split_by_controller
from .ensemble import TemporalEnsemble
from .observations import ObservationBuffer, observation_ages, stale_inputs
from .safety import (
    InterventionKind,
    JointSafetyLimits,
    chunk_is_finite,
    clamp_positions,
    limit_velocities,
)
from .safety_layer import (
    PalmWorkspace,
    SafetyLayerConfig,
    SafetyStop,
    SafetyWatchdog,
    StopCause,
)
from .trace import InferenceTrace

_LOG = logging.getLogger(__name__)

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
    safety: SafetyLayerConfig = Field(
        default_factory=SafetyLayerConfig,
        description="The safety layer: the palm's box, the watchdog, the stop "
        "(r2s2r_policy.inference.safety_layer).",
    )
    trigger: Literal["images", "timer"] = Field(
        default="images",
        description="images: infer as soon as every camera delivered a new frame and the "
        "tracked object of that frame has arrived (lowest image-to-command latency, inputs of "
        "one instant as in the datasets; a step also runs when none came for 1.5 periods, so "
        "staleness is still detected); timer: infer every period.",
    )


class StepStatus(StrEnum):
    """What one :meth:`InferenceEngine.step` did."""

    COMMANDED = "commanded"
    EXECUTING = "executing"  # receding horizon: the chunk in force still has steps to run
    WAITING = "waiting"  # some input never arrived
    HOLD = "hold"  # inputs went stale: the hold command was sent
    HOLDING = "holding"  # still stale, hold already sent: nothing sent
    DROPPED = "dropped"  # non-finite action or inference error: nothing sent
    SAFETY_STOP = "safety_stop"  # the safety layer stopped the policy: one hold, then nothing


@dataclass(frozen=True)
class StepResult:
    """Outcome of one engine step.

    Attributes:
        status: What happened.
        command: The command sent (COMMANDED, HOLD), else None.
        latency_s: Inference latency of this step (snapshot + model + safety), 0 if none ran.
        detail: Missing or stale inputs, or the error.
        real_likeness: The attached monitor's real-likeness of the observation the policy ran
            on (in [0, 1]; NaN when no monitor is attached or the policy did not run).

    """

    status: StepStatus
    command: ActionCommand | None = None
    latency_s: float = 0.0
    detail: str = ""
    real_likeness: float = float("nan")


class LatentMonitor(Protocol):
    """Judges, per inference, how real-like the policy's latent is (live monitor)."""

    def real_likeness(self, latent: np.ndarray) -> float:
        """Real-likeness of one latent ``(latent_dim,)``, in [0, 1]."""
        ...


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
        safety_stop: The safety layer's stop in force (cause and reason), empty when armed.
        safety_stop_cause: Its cause (:class:`StopCause` value), empty when armed.

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
    safety_stop: str = ""
    safety_stop_cause: str = ""


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
        self.ensemble = TemporalEnsemble(
            self.spec.chunk_length, self.dt_s, self.config.ensemble_weight_decay
        )
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
        self.trace: InferenceTrace | None = None
        """When set, every step that ran the policy or held is recorded in it."""
        self.monitor: LatentMonitor | None = None
        """When set, judges each commanded step's latent after its command is sent."""
        self.workspace = PalmWorkspace(self.config.safety, self.spec.action_names)
        self.watchdog = SafetyWatchdog(self.config.safety)

    # -- observations (any thread) --------------------------------------------------------
    # ``stamp_s``: the value's source stamp (cell time it was taken; see ``.observations``).
    def observe_image(self, key: str, rgb: np.ndarray, stamp_s: float | None = None) -> None:
        """Store a camera image (resized to the spec), received now.

        With ``trigger='images'`` the worker wakes once the observation is ready
        (:meth:`observation_ready`).
        """
        self.buffer.set_image(key, rgb, self.clock(), stamp_s)
        if self.observation_ready():
            self._wake.set()

    def new_image_set(self) -> bool:
        """Whether every camera delivered a frame since the last step."""
        counts = self.buffer.image_counts()
        return all(counts[key] > self._consumed.get(key, 0) for key in counts)

    def observation_ready(self) -> bool:
        """Whether every camera has a new frame and the tracked object of the newest has come.

        The object tracker's message for a frame arrives after the frame itself (detection
        takes time); inferring on the frame alone would pair it with the previous frame's
        object, which no dataset does.
        """
        return self.new_image_set() and self.buffer.tracks_caught_up()

    def observe_joints(
        self,
        names: Sequence[str],
        positions_rad: Sequence[float] | np.ndarray,
        stamp_s: float | None = None,
    ) -> None:
        """Store joint positions, received now."""
        self.buffer.set_joint_positions(names, positions_rad, self.clock(), stamp_s)

    def observe_belt_speed(self, speed_mps: float, stamp_s: float | None = None) -> None:
        """Store the belt speed, received now."""
        self.buffer.set_belt_speed(speed_mps, self.clock(), stamp_s)

    def observe_object_tracks(
        self, tracks: Sequence[TrackView], stamp_s: float | None = None
    ) -> None:
        """Store one ``/objects/tracks`` message, received now (ignored without track input)."""
        if self.buffer.latch is not None:
            self.buffer.set_object_tracks(tracks, self.clock(), stamp_s)
            if self.observation_ready():
                self._wake.set()

    @property
    def uses_object_tracks(self) -> bool:
        """Whether the policy reads ``/objects/tracks``."""
        return self.buffer.latch is not None

    def reset(self) -> None:
        """Forget observations, chunks and the hold state (a new episode waits for inputs)."""
        self.buffer.clear()
        self._holding = False
        self._last_chunk_time_s = None
        self.ensemble.clear()
        with self._publish_lock:
            self.watchdog.restart()

    def _chunk_due(self, now_s: float) -> bool:
        """Receding horizon: whether the chunk in force has run its executed steps.

        Measured on the engine clock from the last chunk sent, with half an engine period of
        slack (ticks are never exactly on the grid).
        """
        if self.config.execution != "receding" or self._last_chunk_time_s is None:
            return True
        elapsed = now_s - self._last_chunk_time_s
        return elapsed + 0.5 * self.period_s >= self.config.executed_steps * self.dt_s

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

    # -- the safety layer ---------------------------------------------------------------------
    @property
    def safety_stop(self) -> SafetyStop | None:
        """The safety layer's stop in force, or None while armed."""
        return self.watchdog.stop

    def trip_safety_stop(self, cause: StopCause, detail: str) -> SafetyStop:
        """Stop the policy from outside (e.g. the node saw a second commander); holds next step.

        The hold is sent at once when the measured position is known.
        """
        with self._publish_lock:
            stop = self.watchdog.trip(cause, detail, self.clock())
        self._hold_for_stop()
        return stop

    def rearm(self) -> SafetyStop | None:
        """Clear a safety stop (an operator's explicit act); returns the stop cleared, if any."""
        with self._publish_lock:
            cleared = self.watchdog.rearm()
        self._holding = False
        self._last_chunk_time_s = None
        self.ensemble.clear()
        if cleared is not None:
            _LOG.warning("re-armed after %s", cleared)
        return cleared

    def _hold_for_stop(self) -> ActionCommand | None:
        """Send the stop's one hold (once per stop); returns it when sent now."""
        with self._publish_lock:
            if self.watchdog.stop is None or self.watchdog.hold_sent:
                return None
            hold = self.hold_command()
            if hold is None:
                return None
            self.watchdog.hold_sent = True
        _LOG.error("%s: holding", self.watchdog.stop)
        self._send(hold)
        return hold

    def filter_chunk(self, chunk: np.ndarray, current_rad: np.ndarray) -> np.ndarray | None:
        """Apply the safety filter to a raw chunk; None when it must be dropped (counted).

        The result ends before the first point that would put the palm outside the
        workspace; a chunk whose first point does is dropped and stops the policy.

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
        violation = self.workspace.first_violation(limited)
        if violation is not None:
            # The chunk ends before its first point outside the box (the arm holds the last
            # one inside if nothing replaces it); outside at its next target: stop.
            index, where = violation
            self._count(InterventionKind.WORKSPACE_LIMIT)
            if index == 0:
                with self._publish_lock:
                    self.watchdog.trip(
                        StopCause.WORKSPACE,
                        f"the next target puts palm_link at ({where[0]:+.3f}, {where[1]:+.3f}, "
                        f"{where[2]:+.3f}) m, outside the workspace "
                        f"{self.config.safety.workspace_min_m} .. "
                        f"{self.config.safety.workspace_max_m} or inside the belt's keep-out "
                        f"{self.config.safety.belt_keep_out_min_m} .. "
                        f"{self.config.safety.belt_keep_out_max_m}; not sent",
                        self.clock(),
                    )
                return None
            limited, clamped, chunk = limited[:index], clamped[:index], chunk[:index]
        arm = self.workspace.arm_columns
        arm_clamped = bool(np.any(clamped[:, arm] != chunk[:, arm])) if arm else n_position > 0
        with self._publish_lock:
            self.watchdog.chunk_sent(arm_clamped, self.clock())
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
        with self._publish_lock:
            self.watchdog.tick(now_s)
        if self.watchdog.stop is not None:
            return self._stopped_result(now_s, values, ages)
        missing = [key for key in self.buffer.required_keys if key not in values]
        if missing:
            return StepResult(StepStatus.WAITING, detail=f"no {missing} yet")
        stale = stale_inputs(ages, self.config.stale_observation_s)
        if stale:
            detail = ", ".join(f"{key} {ages[key] * 1e3:.0f} ms" for key in stale)
            self._last_chunk_time_s = None
            self.ensemble.clear()
            if self._holding:
                return StepResult(StepStatus.HOLDING, detail=detail)
            self._holding = True
            self._count(InterventionKind.STALE_OBSERVATION)
            hold = self.hold_command()
            if hold is not None:
                self._send(hold)
            self._trace(now_s, "hold", 0.0, values, ages, hold)
            _LOG.warning("stale observations (%s): holding", detail)
            return StepResult(StepStatus.HOLD, command=hold, detail=detail)
        image_time = max(received[key] for key in self.spec.image_keys)
        if not self._holding and not self._chunk_due(now_s):
            return StepResult(StepStatus.EXECUTING)
        self._holding = False
        try:
            chunk, latent = self.policy.predict_chunk_and_latent(values)
        except (ValueError, RuntimeError) as error:
            self._count(InterventionKind.INFERENCE_ERROR)
            with self._stats_lock:
                self._stats.last_error = str(error)
            return self._dropped(now_s, started, values, ages, f"inference error: {error}")
        if not chunk_is_finite(chunk):
            self._count(InterventionKind.NON_FINITE_ACTION)
            return self._dropped(now_s, started, values, ages, "non-finite action")
        if self.config.execution == "temporal_ensemble":
            chunk = self.ensemble.add(image_time, chunk.astype(np.float64))
        current = values[JOINT_POS_KEY][self._action_in_state]
        safe = self.filter_chunk(chunk, current)
        if self.watchdog.stop is not None:
            return self._stopped_result(now_s, values, ages)
        if safe is None:
            return self._dropped(now_s, started, values, ages, "non-finite action")
        # Point k is due (k + 1)·dt after the observation; time already spent is taken off.
        # The safety layer may end a chunk early (its points beyond the workspace).
        times = self._times_s[: len(safe)] - max(now_s - image_time, 0.0)
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
        # Frozen while inferring (SIGSTOP mid-step): the chunk is from before the freeze and
        # resuming must not send it; the same gap rule as between ticks.
        with self._publish_lock:
            self.watchdog.tick(self.clock())
        if self.watchdog.stop is not None:
            return self._stopped_result(now_s, values, ages)
        self._last_chunk_time_s = now_s
        latency_s = time.perf_counter() - started
        with self._stats_lock:
            self._latencies.append(latency_s)
        self._send(command)
        # After the command left: the monitor never delays the robot.
        likeness = float("nan") if self.monitor is None else self.monitor.real_likeness(latent)
        self._trace(now_s, "commanded", latency_s, values, ages, command, latent, likeness)
        return StepResult(
            StepStatus.COMMANDED, command=command, latency_s=latency_s, real_likeness=likeness
        )

    def _dropped(
        self,
        now_s: float,
        started: float,
        values: dict[str, np.ndarray],
        ages: dict[str, float],
        reason: str,
    ) -> StepResult:
        """Record a chunk not sent, for the trace and the watchdog (a run of them stops)."""
        self._trace(now_s, "dropped", time.perf_counter() - started, values, ages, None)
        with self._publish_lock:
            self.watchdog.chunk_dropped(reason, now_s)
        if self.watchdog.stop is not None:
            return self._stopped_result(now_s, values, ages)
        return StepResult(StepStatus.DROPPED, detail=reason)

    def _stopped_result(
        self, now_s: float, values: dict[str, np.ndarray], ages: dict[str, float]
    ) -> StepResult:
        """Answer a step while the safety layer holds the policy stopped: one hold, then none."""
        hold = self._hold_for_stop()
        if hold is not None:
            self._trace(now_s, "hold", 0.0, values, ages, hold)
        return StepResult(StepStatus.SAFETY_STOP, command=hold, detail=str(self.watchdog.stop))

    def _trace(
        self,
        now_s: float,
        status: str,
        latency_s: float,
        values: dict[str, np.ndarray],
        ages: dict[str, float],
        command: ActionCommand | None,
        latent: np.ndarray | None = None,
        real_likeness: float = float("nan"),
    ) -> None:
        """Record a step in :attr:`trace` (when one is attached)."""
        trace = self.trace
        if trace is None:
            return
        belt = values.get(BELT_SPEED_KEY)
        trace.record(
            now_s,
            status,
            latency_s,
            self.buffer.source_stamps(),
            ages,
            values[JOINT_POS_KEY],
            float(belt[0]) if belt is not None else float("nan"),
            values.get(OBJECT_TRACK_KEY),
            None if command is None else command.times_s,
            None if command is None else command.positions_rad,
            latent,
            real_likeness,
            values,
        )

    def new_trace(self, keep_images: bool = False) -> InferenceTrace:
        """Attach and return an empty :class:`InferenceTrace` for this engine's policy.

        Args:
            keep_images: Also keep the camera images each step read (latent analysis).

        """
        self.trace = InferenceTrace(
            list(self.buffer.required_keys),
            self.spec.chunk_length,
            self.spec.action_dim,
            image_keys=tuple(self.spec.image_keys) if keep_images else (),
        )
        return self.trace

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
        stop = self.watchdog.stop
        if stop is not None:
            stats.safety_stop, stats.safety_stop_cause = str(stop), stop.cause.value
        if latencies is not None:
            stats.latency_p50_s = float(np.percentile(latencies, 50))
            stats.latency_p99_s = float(np.percentile(latencies, 99))
        return stats
