"""The ``sysid`` step of the grounding procedure: the arm and hand controllers' model.

Per-joint excitation through the controllers, ``/joint_states`` logged, controller gains and
latency fitted (the algorithm is :mod:`..sysid`).
"""

from __future__ import annotations

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES, JOINT_LIMITS
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import ControllerRecord, JointControllerRecord, Provenance
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig, ProgressFn
from r2s2r_calibration.sysid.excitation import merge_segments, plan_excitation
from r2s2r_calibration.sysid.identify import identify_controller
from r2s2r_calibration.sysid.log import SysIdLogError, check_log
from r2s2r_calibration.uncertainty import interval_95


def run_sysid(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Excite the joints through the controllers, log joint states, fit the controller model."""
    rest = client.joint_positions()
    lower = [JOINT_LIMITS[n].lower_rad for n in ALL_JOINT_NAMES]
    upper = [JOINT_LIMITS[n].upper_rad for n in ALL_JOINT_NAMES]
    client.release_streams()  # no camera traffic while 500 Hz joint states are logged
    lead_s = config.sysid_command_lead_s
    for attempt in range(1, config.sysid_attempts + 1):
        start = client.now_s() + lead_s + config.sysid.preroll_s
        segments = plan_excitation(config.sysid_joints, rest, start, config.sysid, lower, upper)
        total = segments[-1].end_time_s - start
        say(f"sysid: {len(segments)} excitation segments over {total:.1f} s of cell time")
        client.start_joint_log()
        # One command per controller, stamped ahead of its start: delivery time does not
        # matter as long as the command arrives before its stamp.
        for excitation in merge_segments(segments):
            client.send_trajectory(
                excitation.controller,
                excitation.joint_names,
                excitation.times_s,
                excitation.positions,
                excitation.start_time_s,
            )
        client.wait_until(segments[-1].end_time_s + 0.05)
        log = client.stop_joint_log()
        try:
            check_log(log, segments, config.sysid)
            break
        except SysIdLogError as error:
            if attempt == config.sysid_attempts:
                raise
            # A late command (the cell clock we see lags the cell under load) or dropped
            # samples: repeat with a longer lead.
            lead_s *= 3.0
            say(f"sysid: attempt {attempt} unusable ({error}); repeating with {lead_s:.1f} s lead")
            client.wait_until(client.now_s() + config.sysid.preroll_s)
    result = identify_controller(nominal, log, segments, config.sysid, say)
    provenance = Provenance(
        source=client.source,
        start_stamp_s=result.start_stamp_s,
        end_stamp_s=result.end_stamp_s,
        n_samples=result.n_samples,
        sample_kind="joint_states",
        solver="MuJoCo response fit (sysid.identify_controller), chirps held out",
    )
    unc = config.uncertainty

    def gain_interval(value: float, rel_std: float, latency_rel: float) -> float:
        # The fit's log-space standard error is relative; the latency's carries over too.
        return value * interval_95(rel_std, latency_rel, unc.gain_rel_floor)

    run.artifact.controller = ControllerRecord(
        gains={
            joint: JointControllerRecord(
                kp=fit.kp,
                kd=fit.kd,
                residual_rms_rad=fit.heldout_rms_rad if np.isfinite(fit.heldout_rms_rad) else 0.0,
                provenance=provenance,
                kp_interval_95=gain_interval(fit.kp, fit.kp_rel_std, fit.kp_latency_rel),
                kd_interval_95=gain_interval(fit.kd, fit.kd_rel_std, fit.kd_latency_rel),
            )
            for joint, fit in result.joints.items()
        },
        latency_s=result.latency_s,
        latency_std_s=result.latency_std_s,
        latency_interval_95_s=interval_95(result.latency_std_s, unc.latency_floor_s),
    )
    run.sysid_segments = list(segments)
    run.sysid_log = log
    run.sysid_result = result
