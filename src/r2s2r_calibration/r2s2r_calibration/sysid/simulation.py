"""The simulator's MuJoCo model run on excitation commands: one segment, or a whole excitation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES
from r2s2r_sim.backend_config import SimBackendConfig, make_mujoco_backend
from r2s2r_world.world import WorldParams

from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.excitation import ExcitationSegment
from r2s2r_calibration.sysid.log import JointStateLog


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
        self.backend = make_mujoco_backend(SimBackendConfig(enable_rendering=False))
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
    backend = make_mujoco_backend(SimBackendConfig(enable_rendering=False))
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
