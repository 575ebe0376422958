"""Grounded values outside the twin family: one warning line each, the cell used as grounded."""

from __future__ import annotations

import json
from pathlib import Path

from r2s2r_calibration.artifact import (
    ControllerRecord,
    GroundingArtifact,
    JointControllerRecord,
    Provenance,
)
from r2s2r_calibration.family_check import grounded_outside_family, grounding_family_warnings
from r2s2r_calibration.procedure import GroundingRun
from r2s2r_calibration.report import write_grounding_outputs
from r2s2r_sim.twin_family import load_family
from r2s2r_world.world import load_world

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
FAMILY = REPO / "config" / "twin" / "family.yaml"
UNTESTED = "outside the twin family: the cell is used, results are untested there"


def test_a_grounded_value_outside_the_family_is_named_with_its_range() -> None:
    nominal, family = load_world(NOMINAL), load_family(FAMILY)
    fx = nominal.cameras.head.fx_px
    overrides = {
        "controller": {"latency_s": 0.08},
        "cameras": {"head": {"fx_px": fx * 1.05, "fy_px": fx * 1.05}},
    }
    lines = grounded_outside_family(overrides, nominal, family)
    assert len(lines) == 2, lines
    head_fx, latency = lines
    assert head_fx.startswith("grounded cameras.head.fx_px = 126: relative deviation from nominal")
    assert "[-0.03, 0.03]" in head_fx
    assert latency.startswith(
        "grounded controller.latency_s = 0.08: value +0.08 s is outside the twin family's "
        "range [0, 0.05] s"
    )
    assert all(line.endswith(UNTESTED) for line in lines)


def test_only_grounded_values_are_placed_and_inside_values_are_silent() -> None:
    nominal, family = load_world(NOMINAL), load_family(FAMILY)
    # The nominal hand lens (k1 = 0, no blur) lies outside the family, but a run that did not
    # ground the hand camera says nothing about it.
    assert grounded_outside_family({"controller": {"latency_s": 0.03}}, nominal, family) == []
    assert grounded_outside_family({}, nominal, family) == []
    hand = {"cameras": {"hand": {"distortion": {"k1": 0.0, "k2": 0.01}, "blur_sigma_px": 0.8}}}
    lines = grounded_outside_family(hand, nominal, family)
    assert [line.split(" = ")[0] for line in lines] == ["grounded cameras.hand.distortion.k1"]


def test_a_missing_family_file_skips_the_check_with_one_line(tmp_path: Path) -> None:
    nominal = load_world(NOMINAL)
    lines = grounding_family_warnings({"controller": {"latency_s": 0.08}}, nominal, FAMILY)
    assert len(lines) == 1 and "controller.latency_s = 0.08" in lines[0]
    skipped = grounding_family_warnings(
        {"controller": {"latency_s": 0.08}}, nominal, tmp_path / "family.yaml"
    )
    assert len(skipped) == 1 and skipped[0].startswith("twin family check of the grounded")


def test_the_grounding_outputs_warn_and_keep_the_artifact(tmp_path: Path) -> None:
    provenance = Provenance(source="live", n_samples=1, sample_kind="joint_states", solver="test")
    artifact = GroundingArtifact(
        controller=ControllerRecord(
            gains={
                "elbow_joint": JointControllerRecord(
                    kp=2500.0, kd=120.0, residual_rms_rad=0.0, provenance=provenance
                )
            },
            latency_s=0.08,
        )
    )
    said: list[str] = []
    output = tmp_path / "artifact.yaml"
    write_grounding_outputs(
        GroundingRun(artifact=artifact), load_world(NOMINAL), output, 1.0, said.append
    )
    assert output.is_file()
    warnings = [line for line in said if line.startswith("warning: ")]
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: grounded controller.latency_s = 0.08: value +0.08 s")
    report = json.loads((tmp_path / "artifact.report.json").read_text())
    assert report["family_warnings"] == [warnings[0].removeprefix("warning: ")]
