"""Grounding report from a run with a known controller discrepancy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from r2s2r_calibration.artifact import (
    ControllerRecord,
    GroundingArtifact,
    JointControllerRecord,
    Provenance,
)
from r2s2r_calibration.procedure import GroundingRun
from r2s2r_calibration.report import build_report, format_report, save_report
from r2s2r_calibration.sysid.excitation import plan_excitation
from r2s2r_calibration.sysid.simulation import simulate_log
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_world.world import apply_grounding, load_world

NOMINAL = Path(__file__).resolve().parents[3] / "config" / "world" / "nominal.yaml"


def _run(artifact_gain: float) -> tuple[GroundingRun, object]:
    nominal = load_world(NOMINAL)
    truth = apply_grounding(
        nominal,
        {"controller": {"latency_s": 0.02, "gains": {"elbow_joint": {"kp": 2500.0, "kd": 120.0}}}},
    )
    home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])
    segments = plan_excitation(["elbow_joint"], home, 0.1)
    log = simulate_log(truth, segments)
    provenance = Provenance(source="live", n_samples=1, sample_kind="joint_states", solver="test")
    artifact = GroundingArtifact(
        controller=ControllerRecord(
            gains={
                "elbow_joint": JointControllerRecord(
                    kp=artifact_gain, kd=120.0, residual_rms_rad=0.0, provenance=provenance
                )
            },
            latency_s=0.02,
        )
    )
    run = GroundingRun(artifact=artifact, sysid_segments=segments, sysid_log=log)
    run.failures["intrinsics"] = "no board"
    return run, nominal


def test_replay_error_drops_with_the_right_gains(tmp_path):
    run, nominal = _run(2500.0)
    figures, traces = build_report(run, nominal)
    replay = next(f for f in figures if f.axis == "replay_joint_rms_rad")
    assert replay.before > 1e-3
    assert replay.after < 1e-6
    assert replay.improvement > 1000
    board = next(f for f in figures if f.axis == "board_reprojection_rms_px")
    assert math.isnan(board.before) and "no board" in board.note
    text = format_report(figures)
    assert "replay_joint_rms_rad" in text and "not measured" in text
    written = save_report(figures, traces, tmp_path / "artifact.yaml")
    assert {p.name for p in written} == {
        "artifact.report.yaml",
        "artifact.report.json",
        "artifact.replay.png",
    }
    data = json.loads((tmp_path / "artifact.report.json").read_text())
    assert data["figures"][0]["before"] is None


def test_wrong_gains_give_a_worse_replay():
    right, nominal = _run(2500.0)
    wrong, _ = _run(1800.0)
    after_right = next(f for f in build_report(right, nominal)[0] if f.axis.startswith("replay"))
    after_wrong = next(f for f in build_report(wrong, nominal)[0] if f.axis.startswith("replay"))
    assert after_wrong.after > 100 * after_right.after
