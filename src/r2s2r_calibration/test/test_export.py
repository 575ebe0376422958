"""Export of a grounding artifact to camera_calibration files and belt_speed parameters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from r2s2r_calibration.artifact import (
    BeltRecord,
    CameraRecord,
    DistortionValue,
    GroundingArtifact,
    IntrinsicsRecord,
    Provenance,
    save_artifact,
)
from r2s2r_calibration.errors import ArtifactError
from r2s2r_calibration.export import export_artifact, export_command
from r2s2r_common.camera_info import load_camera_calibration

PROVENANCE = Provenance(source="live", n_samples=12, sample_kind="views", solver="test")


def head_intrinsics() -> IntrinsicsRecord:
    return IntrinsicsRecord(
        width_px=128,
        height_px=128,
        fx_px=122.9,
        fy_px=122.6,
        cx_px=65.2,
        cy_px=61.9,
        distortion=DistortionValue(k1=-0.05, k2=0.01, p1=0.001, p2=-0.002, k3=0.0),
        std_px=(0.1, 0.1, 0.1, 0.1),
        reprojection_rms_px=0.2,
        provenance=PROVENANCE,
    )


def belt_record() -> BeltRecord:
    return BeltRecord(
        roller_radius_m=0.0306,
        roller_radius_std_m=1e-5,
        residual_rms_mps=1e-4,
        relative_residual=1e-3,
        provenance=PROVENANCE,
    )


def test_export_writes_camera_calibration_and_belt_parameters(tmp_path: Path) -> None:
    artifact = tmp_path / "artifact.yaml"
    save_artifact(
        GroundingArtifact(
            cameras={"head": CameraRecord(intrinsics=head_intrinsics())}, belt=belt_record()
        ),
        artifact,
    )
    written = export_artifact(artifact, tmp_path / "out")
    assert set(written) == {"head_camera", "belt_speed"}  # the hand camera was not grounded
    calibration = load_camera_calibration(written["head_camera"])
    assert calibration.camera_name == "head_camera"
    assert (calibration.image_width, calibration.image_height) == (128, 128)
    np.testing.assert_allclose(
        calibration.k, np.array([[122.9, 0, 65.2], [0, 122.6, 61.9], [0, 0, 1]])
    )
    np.testing.assert_allclose(calibration.d, [-0.05, 0.01, 0.001, -0.002, 0.0])
    np.testing.assert_allclose(calibration.p[:, :3], calibration.k)
    params = yaml.safe_load(written["belt_speed"].read_text())
    assert params["belt_speed"]["ros__parameters"]["encoder"]["roller_radius_m"] == 0.0306


def test_export_refuses_bad_or_empty_artifacts(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="not found"):
        export_artifact(tmp_path / "missing.yaml", tmp_path / "out")
    empty = tmp_path / "empty.yaml"
    save_artifact(GroundingArtifact(), empty)
    with pytest.raises(ArtifactError, match="no camera intrinsics and no belt model"):
        export_artifact(empty, tmp_path / "out")


def test_export_command_line(tmp_path: Path) -> None:
    artifact = tmp_path / "artifact.yaml"
    save_artifact(GroundingArtifact(belt=belt_record()), artifact)
    result = CliRunner().invoke(export_command, [str(artifact), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "belt_speed:" in result.output and (tmp_path / "o" / "belt_speed.yaml").is_file()
    bad = CliRunner().invoke(export_command, [str(tmp_path / "nope.yaml"), "--out", "o"])
    assert bad.exit_code == 1 and "not found" in bad.output
