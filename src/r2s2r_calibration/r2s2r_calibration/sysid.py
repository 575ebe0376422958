"""Robot system identification: the simulator's controller model fitted to measured responses.

The simulator's controller model (:mod:`r2s2r_sim.controllers` + :mod:`r2s2r_sim.mujoco_backend`)
is a position servo per joint (stiffness ``kp``, damping ``kd``) on gravity-compensated links,
fed by a joint trajectory controller whose commands execute ``latency_s`` after they arrive
(one latency shared by arm and hand). System identification:

1. :func:`plan_excitation` designs per-joint excitation segments (a step out and back, then a
   chirp), each one a JointTrajectory for the joint's controller with a *future* start time
   (``header.stamp``), so the start of each segment is known on the cell clock.
2. The procedure sends them and logs ``/joint_states`` (:class:`JointStateLog`).
3. :func:`check_log` refuses logs with gaps, missing joints or joints that never moved.
4. :func:`identify_controller` simulates the nominal MuJoCo model on the same commands
   (:class:`SegmentSimulator`) and fits, by least squares on the joint trajectory error:
   first the latency, continuous (a command path's delay is no multiple of the control period;
   the controller samples a command from ``receipt + latency``), jointly with the gains of a
   few probe joints, then every joint's ``kp`` and ``kd`` on its step segment with that
   latency. The chirp segments are held out: their RMS
   error validates the model, and a held-out error above the threshold refuses the result.

Nothing here imports rclpy; the log is plain arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HAND_JOINT_NAMES
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import WorldParams
from scipy.optimize import least_squares

from r2s2r_calibration.errors import CalibrationError, ResidualTooLargeError
from r2s2r_calibration.geometry import FloatArray

SegmentKind = Literal["step", "chirp"]
ProgressFn = Callable[[str], None]


class SysIdLogError(CalibrationError):
    """A system-identification log is unusable: gaps, missing joints, a joint that never moved."""


class LatencyAtBoundError(CalibrationError):
    """The fitted latency sits at the largest latency searched: the true one may be larger."""


MIN_RESPONSE_IN_WINDOW_S = 0.05
"""Step response a fit window must hold after the largest latency searched (s)."""


class SysIdConfig(ConfigModel):
    """Excitation design and acceptance thresholds of the system identification."""

    arm_step_rad: float = Field(
        0.015,
        gt=0.0,
        le=0.2,
        description="Step amplitude of arm joints (small: the servo must not saturate).",
    )
    hand_step_rad: float = Field(0.08, gt=0.0, le=0.5, description="Step amplitude, hand joints.")
    step_hold_s: float = Field(0.3, gt=0.0, le=5.0, description="Hold after each step edge (s).")
    chirp_duration_s: float = Field(0.8, gt=0.0, le=20.0, description="Chirp length (s).")
    chirp_start_hz: float = Field(1.0, gt=0.0, le=50.0, description="Chirp start frequency.")
    chirp_end_hz: float = Field(6.0, gt=0.0, le=100.0, description="Chirp end frequency.")
    chirp_point_period_s: float = Field(
        0.01, gt=0.0, le=0.1, description="Spacing of the chirp's trajectory points (s)."
    )
    fit_window_s: float = Field(
        0.2,
        gt=0.0,
        le=5.0,
        description="Step response compared after each step's start (s); the rest is settled.",
    )
    settle_s: float = Field(0.15, ge=0.0, le=5.0, description="Rest between segments (s).")
    preroll_s: float = Field(
        0.04, gt=0.0, le=1.0, description="Logged rest before a segment that starts its simulation."
    )
    max_latency_s: float = Field(
        0.15,
        ge=0.0,
        le=0.5,
        description="Largest latency searched (s): three times the twin family's 0.05 s, so "
        "that a slower command path than the family's is still measured; a fit at this bound is "
        "refused (LatencyAtBoundError), never clipped.",
    )
    max_rise_s: float = Field(
        0.1,
        gt=0.0,
        le=2.0,
        description="A step response must pass 20 % of the step this long after latency (s).",
    )
    latency_joints: list[str] = Field(
        default_factory=lambda: ["wrist_1_joint", "index_mcp_joint"],
        description="Joints whose step segments fix the shared latency (those present are used).",
    )
    gain_bounds_factor: float = Field(
        5.0, gt=1.0, le=100.0, description="kp, kd searched within nominal / f .. nominal * f."
    )
    refinement_passes: int = Field(
        1,
        ge=1,
        le=5,
        description="Fitting passes; later passes simulate the other joints with fitted gains.",
    )
    min_motion_fraction: float = Field(
        0.2,
        gt=0.0,
        le=1.0,
        description="A joint must move at least this fraction of its step amplitude.",
    )
    max_gap_factor: float = Field(
        2.5, gt=1.0, le=100.0, description="A sample interval above this x the median is a gap."
    )
    max_heldout_relative_rms: float = Field(
        0.15,
        gt=0.0,
        le=10.0,
        description="Refuse when a joint's held-out RMS error / its chirp amplitude exceeds this.",
    )

    @model_validator(mode="after")
    def _window_sees_the_response(self) -> SysIdConfig:
        # A step response is compared over fit_window_s from the command time: with a latency
        # near the window's end the window holds too little response to fit the gains.
        if self.fit_window_s < self.max_latency_s + MIN_RESPONSE_IN_WINDOW_S:
            raise ValueError(
                f"fit_window_s = {self.fit_window_s} s must be at least max_latency_s + "
                f"{MIN_RESPONSE_IN_WINDOW_S} s = {self.max_latency_s + MIN_RESPONSE_IN_WINDOW_S:g} "
                "s (the step response after the largest latency searched)"
            )
        return self


@dataclass(frozen=True)
class ExcitationSegment:
    """One excitation command: a trajectory for one controller that moves one joint.

    Attributes:
        joint: The excited joint.
        kind: ``step`` (used for fitting) or ``chirp`` (held out for validation).
        controller: ``arm`` or ``hand``.
        joint_names: The controller's joints, in the order of ``positions`` columns.
        times_s: (M,) ``time_from_start`` of the points (s).
        positions: (M, N) positions (rad).
        start_time_s: Cell time the trajectory starts at (the command's ``header.stamp``).
        rest_positions: (N,) positions the controller holds before the segment (rad).
        amplitude_rad: Excitation amplitude (rad).

    """

    joint: str
    kind: SegmentKind
    controller: str
    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    start_time_s: float
    rest_positions: FloatArray
    amplitude_rad: float

    @property
    def duration_s(self) -> float:
        """Time from start to the last point (s)."""
        return float(self.times_s[-1])

    @property
    def end_time_s(self) -> float:
        """Cell time of the last point (s)."""
        return self.start_time_s + self.duration_s


@dataclass
class JointStateLog:
    """Logged ``/joint_states``: stamps on the cell clock and joint vectors.

    Attributes:
        stamps_s: (K,) increasing stamps (s).
        positions: (K, J) positions (rad), columns in ``joint_names`` order.
        velocities: (K, J) velocities (rad/s).
        joint_names: The column names.

    """

    stamps_s: FloatArray
    positions: FloatArray
    velocities: FloatArray
    joint_names: tuple[str, ...] = ALL_JOINT_NAMES

    def column(self, joint: str) -> int:
        """Column of ``joint``.

        Raises:
            SysIdLogError: If the log has no such joint.

        """
        if joint not in self.joint_names:
            raise SysIdLogError(
                f"joint {joint!r} is not in the log (joints: {list(self.joint_names)}); "
                "record /joint_states with every joint of the robot"
            )
        return self.joint_names.index(joint)

    def window(self, start_s: float, end_s: float) -> FloatArray:
        """Boolean mask of the samples with ``start_s <= stamp <= end_s``."""
        mask = (self.stamps_s >= start_s - 1e-9) & (self.stamps_s <= end_s + 1e-9)
        return np.asarray(mask, dtype=bool)  # type: ignore[return-value]


@dataclass
class JointFit:
    """Identified servo of one joint.

    Attributes:
        kp: Stiffness (N m/rad).
        kd: Damping (N m s/rad).
        kp_rel_std: 1-sigma relative uncertainty of kp.
        kd_rel_std: 1-sigma relative uncertainty of kd.
        fit_rms_rad: RMS error on the fitted (step) segment (rad).
        heldout_rms_rad: RMS error on the held-out (chirp) segment (rad); NaN without one.
        heldout_relative_rms: ``heldout_rms_rad`` / chirp amplitude.
        nominal_heldout_rms_rad: Held-out RMS error of the nominal model (rad).
        kp_latency_rel: Relative change of kp when fitted with the latency one standard
            deviation larger (what the latency's uncertainty carries into kp).
        kd_latency_rel: The same for kd.

    """

    kp: float
    kd: float
    kp_rel_std: float
    kd_rel_std: float
    fit_rms_rad: float
    heldout_rms_rad: float
    heldout_relative_rms: float
    nominal_heldout_rms_rad: float
    kp_latency_rel: float = 0.0
    kd_latency_rel: float = 0.0


@dataclass
class SysIdResult:
    """System identification result.

    Attributes:
        joints: Fit per joint.
        latency_s: Shared command latency (s), continuous.
        latency_std_s: 1-sigma of the latency (the larger of the probe joints' spread and
            their fits' standard error, s).
        latency_estimates: Continuous latency estimate per probe joint (s).
        control_period_s: Controller period of the model (s).
        n_samples: Log samples used.
        start_stamp_s: First log stamp used (s).
        end_stamp_s: Last log stamp used (s).

    """

    joints: dict[str, JointFit]
    latency_s: float
    latency_std_s: float
    latency_estimates: dict[str, float]
    control_period_s: float
    n_samples: int
    start_stamp_s: float
    end_stamp_s: float
    notes: list[str] = field(default_factory=list)

    def gains(self) -> dict[str, tuple[float, float]]:
        """``(kp, kd)`` per identified joint."""
        return {name: (fit.kp, fit.kd) for name, fit in self.joints.items()}


def controller_of(joint: str) -> str:
    """``arm`` or ``hand``: the controller that owns ``joint``.

    Raises:
        ValueError: For an unknown joint.

    """
    if joint in ARM_JOINT_NAMES:
        return "arm"
    if joint in HAND_JOINT_NAMES:
        return "hand"
    raise ValueError(f"joint {joint!r}: expected one of {list(ALL_JOINT_NAMES)}")


def _controller_joints(controller: str) -> tuple[str, ...]:
    return ARM_JOINT_NAMES if controller == "arm" else HAND_JOINT_NAMES


def plan_excitation(
    joints: Sequence[str],
    rest_positions: Sequence[float] | FloatArray,
    start_time_s: float,
    config: SysIdConfig | None = None,
    lower_rad: Sequence[float] | None = None,
    upper_rad: Sequence[float] | None = None,
) -> list[ExcitationSegment]:
    """Design the excitation: per joint a step segment then a chirp segment, back to back.

    Args:
        joints: Joints to excite (any of :data:`ALL_JOINT_NAMES`).
        rest_positions: (18,) current positions (:data:`ALL_JOINT_NAMES` order): every segment
            starts and ends there.
        start_time_s: Cell time of the first segment's start (leave time to send it).
        config: Excitation design; defaults to :class:`SysIdConfig`.
        lower_rad: Optional (18,) lower limits; a step goes the other way when it would cross.
        upper_rad: Optional (18,) upper limits.

    Returns:
        The segments in time order.

    Raises:
        ValueError: Unknown joint or a rest vector of the wrong length.

    """
    cfg = config or SysIdConfig()
    rest = np.asarray(rest_positions, dtype=float).reshape(-1)
    if rest.size != len(ALL_JOINT_NAMES):
        raise ValueError(f"rest_positions has {rest.size} values; expected {len(ALL_JOINT_NAMES)}")
    segments: list[ExcitationSegment] = []
    t = float(start_time_s)
    for joint in joints:
        controller = controller_of(joint)
        names = _controller_joints(controller)
        index = [ALL_JOINT_NAMES.index(n) for n in names]
        base = rest[index]
        column = names.index(joint)
        amplitude = cfg.arm_step_rad if controller == "arm" else cfg.hand_step_rad
        full = ALL_JOINT_NAMES.index(joint)
        sign = 1.0
        if upper_rad is not None and rest[full] + amplitude > upper_rad[full]:
            sign = -1.0
        if lower_rad is not None and sign < 0 and rest[full] - amplitude < lower_rad[full]:
            raise ValueError(f"joint {joint!r} has no room for a {amplitude} rad step")
        # Step out and back: one control-period-short ramp is a step for the servo.
        hold = cfg.step_hold_s
        edge = 0.002
        step_times = np.array([edge, hold, hold + edge, 2.0 * hold])
        offsets = np.array([1.0, 1.0, 0.0, 0.0]) * sign * amplitude
        step_positions = np.tile(base, (4, 1))
        step_positions[:, column] += offsets
        segments.append(
            ExcitationSegment(
                joint, "step", controller, names, step_times, step_positions, t, base, amplitude
            )
        )
        t += 2.0 * hold + cfg.settle_s
        # Chirp (held out): a linear frequency sweep under a sine window (starts and ends at rest).
        n_points = max(4, round(cfg.chirp_duration_s / cfg.chirp_point_period_s))
        chirp_times = np.linspace(cfg.chirp_duration_s / n_points, cfg.chirp_duration_s, n_points)
        phase = (
            2.0
            * math.pi
            * (
                cfg.chirp_start_hz * chirp_times
                + 0.5
                * (cfg.chirp_end_hz - cfg.chirp_start_hz)
                / cfg.chirp_duration_s
                * chirp_times**2
            )
        )
        window = np.sin(math.pi * chirp_times / cfg.chirp_duration_s)
        chirp_positions = np.tile(base, (n_points, 1))
        chirp_positions[:, column] += sign * amplitude * window * np.sin(phase)
        segments.append(
            ExcitationSegment(
                joint, "chirp", controller, names, chirp_times, chirp_positions, t, base, amplitude
            )
        )
        t += cfg.chirp_duration_s + cfg.settle_s
    return segments


@dataclass(frozen=True)
class ControllerExcitation:
    """All excitation segments of one controller as one trajectory command.

    Attributes:
        controller: ``arm`` or ``hand``.
        joint_names: The controller's joints (columns of ``positions``).
        times_s: (M,) ``time_from_start`` of the points (s).
        positions: (M, N) positions (rad).
        start_time_s: Cell time of ``time_from_start = 0`` (the command's ``header.stamp``).

    """

    controller: str
    joint_names: tuple[str, ...]
    times_s: FloatArray
    positions: FloatArray
    start_time_s: float


def merge_segments(segments: Sequence[ExcitationSegment]) -> list[ControllerExcitation]:
    """Join each controller's segments into one trajectory that holds rest between them.

    Sending one command per controller, stamped well ahead of its start, makes the excitation
    independent of message delivery time: the controller executes it at ``header.stamp`` (as
    ros2_control's joint_trajectory_controller does with a future stamp), whereas one command
    per segment arriving late would shift or cut short the segments.

    Raises:
        ValueError: Segments of one controller overlap in time.

    """
    merged: list[ControllerExcitation] = []
    for controller in dict.fromkeys(s.controller for s in segments):
        own = sorted(
            (s for s in segments if s.controller == controller), key=lambda s: s.start_time_s
        )
        start = own[0].start_time_s
        times: list[FloatArray] = []
        rows: list[FloatArray] = []
        last = -np.inf
        for segment in own:
            offset = segment.start_time_s - start
            if offset < last - 1e-9:
                raise ValueError(
                    f"{segment.kind} segment of {segment.joint} starts at "
                    f"{segment.start_time_s:.3f} s, before the previous {controller} segment ends"
                )
            if offset > last + 1e-9 and segment is not own[0]:
                # Hold rest until the segment starts (no interpolation across the pause).
                times.append(np.array([offset]))
                rows.append(np.asarray(segment.rest_positions, dtype=float)[None, :])
            times.append(offset + np.asarray(segment.times_s, dtype=float))
            rows.append(np.asarray(segment.positions, dtype=float))
            last = offset + segment.duration_s
        merged.append(
            ControllerExcitation(
                controller, own[0].joint_names, np.concatenate(times), np.vstack(rows), start
            )
        )
    return merged


def check_log(
    log: JointStateLog,
    segments: Sequence[ExcitationSegment],
    config: SysIdConfig | None = None,
) -> None:
    """Refuse a log that cannot identify the segments' joints.

    Raises:
        SysIdLogError: Empty or unordered log; a joint missing from it; a segment window
            (with its pre-roll) not covered or with a gap (naming the segment and the missing
            time span); a joint that never moved in its step segment.

    """
    cfg = config or SysIdConfig()
    stamps = np.asarray(log.stamps_s, dtype=float)
    if stamps.size < 3:
        raise SysIdLogError(
            f"the joint-state log has {stamps.size} samples; record /joint_states during the "
            "whole excitation"
        )
    if np.any(np.diff(stamps) <= 0.0):
        raise SysIdLogError("joint-state stamps are not strictly increasing; expected one clock")
    for name in {s.joint for s in segments}:
        log.column(name)
    median = float(np.median(np.diff(stamps)))
    for segment in segments:
        start = segment.start_time_s - cfg.preroll_s
        end = segment.end_time_s
        if stamps[0] > start + median or stamps[-1] < end - median:
            raise SysIdLogError(
                f"{segment.kind} segment of {segment.joint} spans {start:.3f}..{end:.3f} s but "
                f"the log covers {stamps[0]:.3f}..{stamps[-1]:.3f} s; record from before the "
                "first command to after the last segment"
            )
        inside = stamps[(stamps >= start - median) & (stamps <= end + median)]
        gaps = np.diff(inside)
        worst = int(np.argmax(gaps)) if gaps.size else 0
        if gaps.size and gaps[worst] > cfg.max_gap_factor * median:
            raise SysIdLogError(
                f"joint-state log has a gap of {gaps[worst] * 1000:.1f} ms "
                f"({inside[worst]:.3f}..{inside[worst + 1]:.3f} s, expected a sample every "
                f"{median * 1000:.1f} ms) in the {segment.kind} segment of {segment.joint}; "
                "samples were dropped: re-record with a reliable subscription or repeat that "
                "joint's excitation"
            )
        if segment.kind == "step":
            column = log.column(segment.joint)
            mask = log.window(segment.start_time_s, end)
            moved = float(np.ptp(log.positions[mask, column])) if np.any(mask) else 0.0
            if moved >= cfg.min_motion_fraction * segment.amplitude_rad:
                # The response must begin within the largest latency searched (plus the servo's
                # rise): later means the command arrived after its stamp and started late.
                values = log.positions[mask, column]
                departed = np.abs(values - values[0]) > 0.2 * segment.amplitude_rad
                onset = float(log.stamps_s[mask][int(np.argmax(departed))] - segment.start_time_s)
                limit_s = cfg.max_latency_s + cfg.max_rise_s
                if onset > limit_s:
                    raise SysIdLogError(
                        f"joint {segment.joint} started its step {onset * 1000:.0f} ms after the "
                        f"command time (expected within {limit_s * 1000:.0f} ms): the command "
                        "arrived late; send it further ahead"
                    )
            if moved < cfg.min_motion_fraction * segment.amplitude_rad:
                raise SysIdLogError(
                    f"joint {segment.joint} moved {moved:.5f} rad in its step segment (commanded "
                    f"{segment.amplitude_rad} rad, need at least "
                    f"{cfg.min_motion_fraction * segment.amplitude_rad:.5f}); the command was not "
                    "executed: check that the controller is active and accepts the trajectory"
                )


class SegmentSimulator:
    """Simulate the nominal MuJoCo model on a logged segment with candidate gains and latency.

    The model is compiled once from the nominal world; candidate gains are written into the
    compiled position actuators (``gainprm[0] = kp``, ``biasprm[1:3] = -kp, -kd``), which is
    what the simulator compiles a world with those gains to.

    Args:
        nominal_world: The world whose robot model (inertias, damping, limits) is simulated.

    """

    def __init__(self, nominal_world: WorldParams):
        self.world = nominal_world
        self.backend = MujocoBackend(enable_rendering=False)
        self.backend.reset(nominal_world, 0)
        model = self.backend.model
        self._actuator = {name: model.actuator(name).id for name in ALL_JOINT_NAMES}
        self.control_period_s = (
            nominal_world.physics.steps_per_control * nominal_world.physics.timestep_s
        )
        self.steps_per_control = nominal_world.physics.steps_per_control

    def set_gains(self, gains: dict[str, tuple[float, float]]) -> None:
        """Write ``(kp, kd)`` per joint into the compiled actuators."""
        model = self.backend.model
        for name, (kp, kd) in gains.items():
            actuator = self._actuator[name]
            model.actuator_gainprm[actuator, 0] = kp
            model.actuator_biasprm[actuator, 1] = -kp
            model.actuator_biasprm[actuator, 2] = -kd

    def simulate(
        self,
        segment: ExcitationSegment,
        log: JointStateLog,
        latency_s: float,
        preroll_s: float,
        joints: Sequence[str],
        end_time_s: float | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """Simulate a segment from the logged state ``preroll_s`` before its start.

        Args:
            segment: The command.
            log: The measured log (initial state; output stamps).
            latency_s: Command latency (s).
            preroll_s: Rest time simulated before the segment starts (s).
            joints: Joints whose trajectories to return.
            end_time_s: Simulate until this cell time; the segment's end by default.

        Returns:
            (stamps in the window, simulated positions (K, len(joints)) at those stamps).

        """
        backend = self.backend
        backend.reset(self.world, 0)
        start = segment.start_time_s - preroll_s
        first = int(np.searchsorted(log.stamps_s, start - 1e-9))
        first = min(first, len(log.stamps_s) - 1)
        t0 = float(log.stamps_s[first])
        columns = [log.column(n) for n in ALL_JOINT_NAMES]
        q0 = log.positions[first, columns]
        v0 = log.velocities[first, columns]
        data = backend.data
        data.qpos[backend._qadr] = q0
        data.qvel[backend._dadr] = v0
        n_arm = len(ARM_JOINT_NAMES)
        arm_hold = segment.rest_positions if segment.controller == "arm" else q0[:n_arm]
        hand_hold = segment.rest_positions if segment.controller == "hand" else q0[n_arm:]
        backend.arm_controller.reset(arm_hold)
        backend.hand_controller.reset(hand_hold)
        backend.arm_controller.latency_s = latency_s
        backend.hand_controller.latency_s = latency_s
        data.ctrl[backend._arm_act] = backend.arm_controller.desired
        data.ctrl[backend._hand_act] = backend.hand_controller.desired
        # The cell delays a future-start command by prepending a hold at the current position
        # (r2s2r_sim.cell_runtime.SimCell._delayed); do the same with the delay to the start.
        delay = segment.start_time_s - t0
        times = segment.times_s + delay
        positions = segment.positions
        hold_time = delay if segment.times_s[0] > 0.0 else delay - self.control_period_s
        if hold_time > 0.0:
            index = [ALL_JOINT_NAMES.index(j) for j in segment.joint_names]
            times = np.concatenate([[hold_time], times])
            positions = np.vstack([q0[index], positions])
        backend.command_trajectory(segment.joint_names, times, positions)
        end = segment.end_time_s if end_time_s is None else min(end_time_s, segment.end_time_s)
        mask = log.window(t0, end)
        stamps = log.stamps_s[mask]
        n_periods = math.ceil((stamps[-1] - t0) / self.control_period_s + 1e-6)
        want = [ALL_JOINT_NAMES.index(j) for j in joints]
        trace = np.empty((n_periods + 1, len(want)))
        trace[0] = backend.joint_positions()[want]
        for k in range(n_periods):
            backend.step(self.steps_per_control)
            trace[k + 1] = backend.joint_positions()[want]
        sim_times = t0 + self.control_period_s * np.arange(n_periods + 1)
        out = np.column_stack([np.interp(stamps, sim_times, trace[:, i]) for i in range(len(want))])
        return stamps, out


LINEAR_GAIN_CHANGE_MAX = 0.02
"""Largest log-gain change taken from one linearized step (beyond it, 5 % of the change is lost)."""


@dataclass(frozen=True)
class GainFit:
    """One joint's (kp, kd) fit: the gains, its cost, log-space covariance and Jacobian."""

    kp: float
    kd: float
    cost: float
    cov: FloatArray
    jacobian: FloatArray


def _measured(log: JointStateLog, stamps: FloatArray, joint: str) -> FloatArray:
    return np.interp(stamps, log.stamps_s, log.positions[:, log.column(joint)])


class _Fitter:
    def __init__(
        self,
        simulator: SegmentSimulator,
        log: JointStateLog,
        config: SysIdConfig,
        gains: dict[str, tuple[float, float]],
    ):
        self.sim = simulator
        self.log = log
        self.cfg = config
        self.gains = dict(gains)
        self.nominal = dict(gains)

    def residual(
        self,
        segment: ExcitationSegment,
        kp: float,
        kd: float,
        latency_s: float,
        shift_s: float = 0.0,
    ) -> FloatArray:
        """Return the normalized error of the segment's joint (``shift_s`` delays the response).

        The model is time invariant and at rest before a segment, so a response simulated with
        latency L and delayed by ``shift_s`` is the response with latency L + ``shift_s``: a
        continuous latency at the price of one simulation.
        """
        gains = dict(self.gains)
        gains[segment.joint] = (kp, kd)
        self.sim.set_gains(gains)
        end = segment.start_time_s + self.cfg.fit_window_s if segment.kind == "step" else None
        preroll = self.cfg.preroll_s
        stamps, simulated = self.sim.simulate(
            segment, self.log, latency_s, preroll, [segment.joint], end
        )
        if shift_s != 0.0:
            simulated = np.interp(stamps - shift_s, stamps, simulated[:, 0])[:, None]
        measured = _measured(self.log, stamps, segment.joint)
        return (simulated[:, 0] - measured) / segment.amplitude_rad  # type: ignore[no-any-return]

    def _bounds(self, joint: str) -> tuple[FloatArray, FloatArray]:
        nominal_kp, nominal_kd = self.nominal[joint]
        factor = math.log(self.cfg.gain_bounds_factor)
        centre = np.array([math.log(nominal_kp), math.log(max(nominal_kd, 1e-6))])
        return centre - factor, centre + factor

    def fit(self, segment: ExcitationSegment, latency_s: float) -> GainFit:
        """Fit (kp, kd) of the segment's joint at a fixed latency."""
        kp0, kd0 = self.gains[segment.joint]
        lower, upper = self._bounds(segment.joint)
        x0 = np.clip(np.log([kp0, max(kd0, 1e-6)]), lower + 1e-6, upper - 1e-6)

        def fun(x: FloatArray) -> FloatArray:
            return self.residual(segment, math.exp(x[0]), math.exp(x[1]), latency_s)

        solution = least_squares(
            fun, x0, bounds=(lower, upper), diff_step=1e-4, xtol=1e-8, ftol=1e-10, max_nfev=60
        )
        cost, cov = _cost_and_cov(solution.fun, solution.jac)
        return GainFit(
            kp=math.exp(solution.x[0]),
            kd=math.exp(solution.x[1]),
            cost=cost,
            cov=cov,
            jacobian=np.asarray(solution.jac, dtype=float),
        )

    def latency_sensitivity(
        self, segment: ExcitationSegment, fit: GainFit, latency_s: float
    ) -> tuple[float, float]:
        """Relative change of (kp, kd) when the latency is ``latency_s`` instead of the fit's.

        One Gauss-Newton step from the fit, with its Jacobian in log(kp), log(kd): one
        simulation, where a refit takes ~15. The step is accepted while it is small
        (:data:`LINEAR_GAIN_CHANGE_MAX`; a latency uncertainty of tens of microseconds, the
        usual case); a larger one starts a refit at the other latency instead.
        """
        residual = self.residual(segment, fit.kp, fit.kd, latency_s)
        step, *_ = np.linalg.lstsq(fit.jacobian, -residual, rcond=None)
        if np.all(np.isfinite(step)) and float(np.max(np.abs(step))) <= LINEAR_GAIN_CHANGE_MAX:
            lower, upper = self._bounds(segment.joint)
            x = np.clip(np.log([fit.kp, max(fit.kd, 1e-6)]) + step, lower, upper)
            return math.exp(x[0]) / fit.kp - 1.0, math.exp(x[1]) / fit.kd - 1.0
        refit = self.fit(segment, latency_s)
        return refit.kp / fit.kp - 1.0, refit.kd / fit.kd - 1.0

    def fit_latency(self, segment: ExcitationSegment, max_latency_s: float) -> tuple[float, float]:
        """Fit (kp, kd, latency) of one step, latency continuous; return latency and its std.

        A grid of delayed responses (one simulation, :meth:`residual` with ``shift_s``) finds
        the start; the final fit simulates every candidate latency itself, since the controller
        starts a command at ``receipt + latency`` and samples it on its ticks from there: a
        latency between two ticks shifts the sampled command by less than a period, which a
        delayed response on the tick grid does not reproduce.
        """
        lower, upper = self._bounds(segment.joint)
        kp0, kd0 = self.gains[segment.joint]
        grid = np.linspace(0.0, max_latency_s, 25)
        costs = [float(np.sum(self.residual(segment, kp0, kd0, 0.0, s) ** 2)) for s in grid]
        start = float(grid[int(np.argmin(costs))])
        x0 = np.array([*np.clip(np.log([kp0, max(kd0, 1e-6)]), lower, upper), start])

        def shifted(x: FloatArray) -> FloatArray:
            return self.residual(segment, math.exp(x[0]), math.exp(x[1]), 0.0, x[2])

        coarse = least_squares(
            shifted,
            x0,
            bounds=(np.append(lower, 0.0), np.append(upper, max_latency_s + 1e-9)),
            diff_step=[1e-4, 1e-4, 1e-2],
            xtol=1e-8,
            ftol=1e-10,
            max_nfev=60,
        )
        # Latency in milliseconds for the final fit, so that the finite-difference step
        # (relative, at least diff_step in the variable's unit) is a small fraction of a period.
        scale = 1000.0

        def simulated(x: FloatArray) -> FloatArray:
            return self.residual(segment, math.exp(x[0]), math.exp(x[1]), x[2] / scale)

        x1 = coarse.x.copy()
        x1[2] = min(max(x1[2], 0.0), max_latency_s) * scale
        solution = least_squares(
            simulated,
            x1,
            bounds=(np.append(lower, 0.0), np.append(upper, max_latency_s * scale + 1e-6)),
            diff_step=[1e-4, 1e-4, 2e-3],
            xtol=1e-10,
            ftol=1e-12,
            max_nfev=80,
        )
        _, cov = _cost_and_cov(solution.fun, solution.jac)
        return float(solution.x[2] / scale), float(math.sqrt(max(cov[2, 2], 0.0)) / scale)


def _cost_and_cov(residual: FloatArray, jacobian: FloatArray) -> tuple[float, FloatArray]:
    n_params = jacobian.shape[1]
    dof = max(residual.size - n_params, 1)
    sigma2 = float(residual @ residual) / dof
    try:
        cov = np.linalg.inv(jacobian.T @ jacobian) * sigma2
    except np.linalg.LinAlgError:
        cov = np.full((n_params, n_params), np.inf)
    return float(residual @ residual), cov


def identify_controller(
    nominal_world: WorldParams,
    log: JointStateLog,
    segments: Sequence[ExcitationSegment],
    config: SysIdConfig | None = None,
    progress: ProgressFn | None = None,
) -> SysIdResult:
    """Fit latency and per-joint gains of the simulator's controller model to a log.

    Args:
        nominal_world: The nominal world (robot model and starting gains).
        log: Measured joint states over the excitation.
        segments: The excitation that was sent (from :func:`plan_excitation`).
        config: Thresholds; defaults to :class:`SysIdConfig`.
        progress: Optional callback for one-line progress messages.

    Returns:
        Gains per excited joint, the latency and the held-out validation errors.

    Raises:
        SysIdLogError: See :func:`check_log`; also when a joint has no step segment.
        LatencyAtBoundError: A probe joint's latency is within half a control period of
            ``max_latency_s`` (the search clipped it).
        ResidualTooLargeError: A joint's held-out error exceeds ``max_heldout_relative_rms``.

    """
    cfg = config or SysIdConfig()
    say = progress or (lambda _message: None)
    check_log(log, segments, cfg)
    steps = {s.joint: s for s in segments if s.kind == "step"}
    chirps = {s.joint: s for s in segments if s.kind == "chirp"}
    missing = sorted({s.joint for s in segments} - set(steps))
    if missing:
        raise SysIdLogError(f"joints {missing} have no step segment; excite them with a step")
    simulator = SegmentSimulator(nominal_world)
    period = simulator.control_period_s
    nominal_gains = nominal_world.joint_gains()
    fitter = _Fitter(simulator, log, cfg, nominal_gains)

    # 1. Latency: fitted continuously (with the gains) on a few joints' steps. It is not
    #    rounded to the control period: the command path's delay is not a whole number of
    #    the controller's ticks, and the controller samples a command from its execution time.
    probe = [steps[j] for j in cfg.latency_joints if j in steps] or list(steps.values())[:2]
    estimates = [fitter.fit_latency(segment, cfg.max_latency_s) for segment in probe]
    values = np.array([value for value, _ in estimates])
    latency = float(np.median(values))
    spread = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    fit_std = float(np.median([std for _, std in estimates]))
    latency_std = max(spread, fit_std)
    # A latency at the search bound is a clipped one: the gains fitted with it come out wrong
    # (a 90 ms latency searched up to 80 ms gave kp -56 % with a held-out error that passed).
    at_bound = [
        segment.joint
        for segment, value in zip(probe, values, strict=True)
        if cfg.max_latency_s > 0.0 and value >= cfg.max_latency_s - 0.5 * period
    ]
    if at_bound:
        raise LatencyAtBoundError(
            f"sysid: the command latency fitted on {at_bound} is "
            f"{float(np.max(values)) * 1000:.1f} ms, at the largest latency searched "
            f"(sysid.max_latency_s = {cfg.max_latency_s} s): the cell's may be larger; raise "
            "sysid.max_latency_s and repeat the sysid step"
        )
    say(
        f"sysid: latency {latency * 1000:.1f} ms (per-joint estimates "
        f"{[round(v * 1000, 2) for v in values]} ms on {[s.joint for s in probe]})"
    )

    # 2. Gains per joint; later passes simulate the other joints with the fitted gains.
    fits: dict[str, GainFit] = {}
    for pass_index in range(cfg.refinement_passes):
        for joint, segment in steps.items():
            fits[joint] = fitter.fit(segment, latency)
        for joint, fit in fits.items():
            fitter.gains[joint] = (fit.kp, fit.kd)
        say(f"sysid: pass {pass_index + 1}/{cfg.refinement_passes}: fitted {len(fits)} joints")

    # 2b. What the latency's uncertainty carries into the gains: the relative change of each
    #     joint's gains with the latency one standard deviation larger (linearized at the fit).
    latency_rel: dict[str, tuple[float, float]] = {}
    if latency_std > 0.0:
        for joint, segment in steps.items():
            latency_rel[joint] = fitter.latency_sensitivity(
                segment, fits[joint], latency + latency_std
            )

    # 3. Validation on the held-out chirps, against the nominal model too.
    results: dict[str, JointFit] = {}
    nominal_fitter = _Fitter(simulator, log, cfg, nominal_gains)
    for joint, fit in fits.items():
        kp, kd, cost, cov = fit.kp, fit.kd, fit.cost, fit.cov
        step = steps[joint]
        fit_rms = math.sqrt(cost / max(len(fitter.residual(step, kp, kd, latency)), 1))
        heldout = nominal_heldout = relative = float("nan")
        if joint in chirps:
            chirp = chirps[joint]
            residual = fitter.residual(chirp, kp, kd, latency) * chirp.amplitude_rad
            heldout = float(np.sqrt(np.mean(residual**2)))
            relative = heldout / chirp.amplitude_rad
            kp0, kd0 = nominal_gains[joint]
            nominal_residual = (
                nominal_fitter.residual(chirp, kp0, kd0, nominal_world.controller.latency_s)
                * chirp.amplitude_rad
            )
            nominal_heldout = float(np.sqrt(np.mean(nominal_residual**2)))
        std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        results[joint] = JointFit(
            kp=kp,
            kd=kd,
            kp_rel_std=float(std[0]),
            kd_rel_std=float(std[1]),
            fit_rms_rad=fit_rms * step.amplitude_rad,
            heldout_rms_rad=heldout,
            heldout_relative_rms=relative,
            nominal_heldout_rms_rad=nominal_heldout,
            kp_latency_rel=latency_rel[joint][0] if joint in latency_rel else 0.0,
            kd_latency_rel=latency_rel[joint][1] if joint in latency_rel else 0.0,
        )
        if math.isfinite(relative) and relative > cfg.max_heldout_relative_rms:
            raise ResidualTooLargeError(
                f"joint {joint}: held-out chirp error {heldout:.5f} rad is {relative:.1%} of the "
                f"excitation (max_heldout_relative_rms = {cfg.max_heldout_relative_rms:.0%}); "
                "the servo does not behave like the simulator's PD model (saturation, friction "
                "or a payload): check the excitation amplitude and the robot"
            )
    used = log.window(
        min(s.start_time_s for s in segments) - cfg.preroll_s, max(s.end_time_s for s in segments)
    )
    stamps = log.stamps_s[used]
    return SysIdResult(
        joints=results,
        latency_s=latency,
        latency_std_s=latency_std,
        latency_estimates={s.joint: float(v) for s, v in zip(probe, values, strict=True)},
        control_period_s=period,
        n_samples=int(np.count_nonzero(used)),
        start_stamp_s=float(stamps[0]),
        end_stamp_s=float(stamps[-1]),
    )


def simulate_log(
    world: WorldParams,
    segments: Sequence[ExcitationSegment],
    start_positions: Sequence[float] | FloatArray | None = None,
    sample_period_s: float | None = None,
    end_time_s: float | None = None,
) -> JointStateLog:
    """Run a world's MuJoCo model on a whole excitation and log joint states like a cell.

    Used by the tests (a "measured" log from known gains and latency) and by the grounding
    report (the grounded simulator's replay of the commands sent to the real cell).

    Args:
        world: World to simulate (its gains and latency).
        segments: Commands, in time order; each is sent one control period before it starts.
        start_positions: Initial (18,) positions; the robot's home by default.
        sample_period_s: Logging period; the control period by default.
        end_time_s: Log until this cell time; the last segment's end + 0.1 s by default.

    Returns:
        The log (stamps from cell time 0).

    """
    backend = MujocoBackend(enable_rendering=False)
    backend.reset(world, 0)
    if start_positions is not None:
        q0 = np.asarray(start_positions, dtype=float)
        backend.data.qpos[backend._qadr] = q0
        n_arm = len(ARM_JOINT_NAMES)
        backend.arm_controller.reset(q0[:n_arm])
        backend.hand_controller.reset(q0[n_arm:])
    period = world.physics.steps_per_control * world.physics.timestep_s
    sample = sample_period_s or period
    every = max(1, round(sample / period))
    end = end_time_s if end_time_s is not None else max(s.end_time_s for s in segments) + 0.1
    pending = sorted(segments, key=lambda s: s.start_time_s)
    stamps, positions, velocities = [], [], []
    tick = 0
    while True:
        now = tick * period
        while pending and pending[0].start_time_s - period <= now + 1e-9:
            segment = pending.pop(0)
            delay = segment.start_time_s - now
            times = segment.times_s + delay
            points = segment.positions
            hold_time = delay if segment.times_s[0] > 0.0 else delay - period
            if hold_time > 0.0:
                index = [ALL_JOINT_NAMES.index(j) for j in segment.joint_names]
                times = np.concatenate([[hold_time], times])
                points = np.vstack([backend.joint_positions()[index], points])
            backend.command_trajectory(segment.joint_names, times, points)
        backend.step(world.physics.steps_per_control)
        tick += 1
        if tick % every == 0:
            stamps.append(tick * period)
            positions.append(backend.joint_positions())
            velocities.append(backend.joint_velocities())
        if tick * period >= end - 1e-9:
            break
    return JointStateLog(
        stamps_s=np.asarray(stamps),
        positions=np.asarray(positions),
        velocities=np.asarray(velocities),
    )
