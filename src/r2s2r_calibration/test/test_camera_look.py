"""The camera's white balance from the board's white squares, with known answers: the twin's
cameras with a white balance (and the rest of a real look) give it back within a few percent;
a camera without one is neutral and changes nothing of the grounded world."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from r2s2r_calibration.camera_look import NOT_MEASURED, estimate_white_balance
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.intrinsics import ChessboardConfig
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig
from r2s2r_calibration.sim_cell_client import SimCellClient
from r2s2r_calibration.steps.board import run_head_intrinsics
from r2s2r_sim.board import OperatorBoardConfig, board_scene_extra
from r2s2r_sim.cell_runtime import SimCell
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.grounding import GroundingArtifact, derive_world_overrides
from r2s2r_world.world import apply_grounding, load_world

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
LOOK = {"white_balance_rgb": [1.12, 1.0, 0.85], "shot_noise": 0.01, "jpeg_quality": 85}


def grounded_head(look: dict[str, object] | None) -> tuple[dict[str, object], object]:
    nominal = load_world(NOMINAL)
    truth = apply_grounding(nominal, {"cameras": {"head": {"appearance": look}}} if look else {})
    board = OperatorBoardConfig()
    cell = SimCell(
        MujocoBackend(scene_extras=[board_scene_extra(board)]), truth, nominal, board=board
    )
    run = GroundingRun(artifact=GroundingArtifact())
    config = ProcedureConfig()
    try:
        run_head_intrinsics(SimCellClient(cell), config, config.board_steps, run, lambda _: None)
    finally:
        cell.close()
    return derive_world_overrides(run.artifact)["cameras"]["head"], run.artifact.cameras["head"]


def test_a_cameras_white_balance_is_measured_and_given_to_the_grounded_world() -> None:
    overrides, record = grounded_head(LOOK)
    red, green, blue = overrides["appearance"]["white_balance_rgb"]
    assert green == 1.0
    assert red == pytest.approx(1.12, abs=0.03) and blue == pytest.approx(0.85, abs=0.03)
    assert record.look.applied and record.look.samples > 100
    assert record.look.not_measured == list(NOT_MEASURED)


def test_a_measured_white_balance_survives_the_artifact_file(tmp_path: Path) -> None:
    """Written, read back and applied: the grounded world's camera has the measured gains."""
    from r2s2r_calibration.artifact import load_artifact, save_artifact
    from r2s2r_world.grounding import load_cell_world

    overrides, record = grounded_head(LOOK)
    path = tmp_path / "artifact.yaml"
    save_artifact(GroundingArtifact(cameras={"head": record}), path)
    assert load_artifact(path).cameras["head"].look == record.look
    world = load_cell_world(NOMINAL, path)
    gains = overrides["appearance"]["white_balance_rgb"]
    assert world.cameras.head.appearance.white_balance_rgb == pytest.approx(tuple(gains))


def test_a_neutral_camera_leaves_the_grounded_world_as_it_was() -> None:
    overrides, record = grounded_head(None)
    assert "appearance" not in overrides
    assert not record.look.applied
    assert record.look.white_balance_rgb == pytest.approx((1.0, 1.0, 1.0), abs=0.01)


def test_grey_views_or_too_few_squares_are_refused() -> None:
    board = ChessboardConfig()
    pose = np.eye(4)
    pose[2, 3] = 0.5
    K = np.array([[120.0, 0.0, 63.5], [0.0, 120.0, 63.5], [0.0, 0.0, 1.0]])
    with pytest.raises(CalibrationError, match="colour"):
        estimate_white_balance(board, [np.zeros((128, 128), np.uint8)], [pose], K, np.zeros(5))
    with pytest.raises(CalibrationError, match="usable white squares"):
        estimate_white_balance(board, [np.zeros((128, 128, 3), np.uint8)], [pose], K, np.zeros(5))
