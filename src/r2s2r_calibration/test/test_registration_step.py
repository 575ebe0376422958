"""The registration step of the grounding procedure on an in-process (nominal) cell."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2s2r_calibration.procedure import GroundingRun, ProcedureConfig, run_grounding
from r2s2r_calibration.sim_cell_client import SimCellClient
from r2s2r_sim.cell_runtime import SimCell
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.cell_identity import StaticSceneLimits, compare_static_depth, static_depth_grid
from r2s2r_world.world import apply_grounding, load_world

NOMINAL = Path(__file__).resolve().parents[3] / "config" / "world" / "nominal.yaml"


@pytest.fixture(scope="module")
def runs() -> tuple[GroundingRun, GroundingRun]:
    nominal = load_world(NOMINAL)
    cell = SimCell(MujocoBackend(), load_world(NOMINAL), nominal)
    try:
        client = SimCellClient(cell)
        default = run_grounding(client, nominal, ["registration"])
        strict = run_grounding(
            client,
            nominal,
            ["registration"],
            ProcedureConfig(registration_unobservable_ok={}, cell_name="lab-a"),
        )
    finally:
        cell.close()
    return default, strict


def test_belt_along_travel_is_held_and_recorded(runs: tuple[GroundingRun, GroundingRun]) -> None:
    default, _ = runs
    assert default.failures == {}
    belt = default.artifact.scene["belt"]
    # The conveyor is levelled (roll known); its ends are out of view (along-travel unobservable).
    assert belt.held_at_nominal == ["rotation about belt x (known)", "translation along belt x"]
    assert belt.observability > 1e-3
    # The cell is the nominal one: every element stays where the description puts it.
    for name, registration in default.registrations.items():
        assert np.linalg.norm(registration.T_correction[:3, 3]) < 0.003, name
        # Bins stand on the table: roll, pitch and height are known and held, nothing else.
        assert name == "belt" or default.artifact.scene[name].held_at_nominal == [
            f"rotation about {name} x (known)",
            f"rotation about {name} y (known)",
            f"translation along {name} z (known)",
        ]
    assert sorted(default.artifact.scene) == ["belt", "bin_0", "bin_1", "bin_2"]


def test_the_step_records_the_cells_identity(runs: tuple[GroundingRun, GroundingRun]) -> None:
    default, strict = runs
    assert default.artifact.cell is not None and default.artifact.cell.name is None
    assert strict.artifact.cell is not None and strict.artifact.cell.name == "lab-a"
    recorded = default.artifact.cell.grid()
    assert recorded is not None
    # The same cell observed again is the same cell; a cell whose head camera sits 3 cm
    # lower is another one.
    nominal = load_world(NOMINAL)
    limits = StaticSceneLimits()
    for shift_m, same in ((0.0, True), (0.03, False)):
        x, y, z = nominal.cameras.head.pose.xyz_m
        rpy = list(nominal.cameras.head.pose.rpy_rad)
        pose = {"xyz_m": [x, y, z - shift_m], "rpy_rad": rpy}
        world = apply_grounding(nominal, {"cameras": {"head": {"pose": pose}}})
        cell = SimCell(MujocoBackend(), world, nominal)
        try:
            _, depth = SimCellClient(cell).capture_depth()
        finally:
            cell.close()
        assert compare_static_depth(recorded, static_depth_grid(depth), limits).same is same


def test_a_refused_belt_fails_the_step_but_keeps_the_bins(
    runs: tuple[GroundingRun, GroundingRun],
) -> None:
    _, strict = runs
    message = strict.failures["registration"]
    assert "required element(s) ['belt'] refused" in message
    assert "translation along belt x" in message
    assert sorted(strict.artifact.scene) == ["bin_0", "bin_1", "bin_2"]


@pytest.mark.slow
def test_hand_camera_views_refine_moved_bins() -> None:
    """Registration then the ``bins`` step on a cell whose bins stand off the drawing.

    Slow (~12 s): both steps run end to end through a rendered simulated cell, every hand view.
    """
    nominal = load_world(NOMINAL)
    moved = {
        "bin_0": ((-0.394, -0.324, 0.75), 0.02),
        "bin_1": ((-0.405, 0.004, 0.75), -0.016),
        "bin_2": ((-0.396, 0.327, 0.75), 0.03),
    }
    truth = apply_grounding(
        nominal,
        {
            "bins": {
                name: {"pose": {"xyz_m": list(xyz), "rpy_rad": [0.0, 0.0, yaw]}}
                for name, (xyz, yaw) in moved.items()
            }
        },
    )
    cell = SimCell(MujocoBackend(), truth, nominal)
    messages: list[str] = []
    try:
        run = run_grounding(
            SimCellClient(cell), nominal, ["registration", "bins"], progress=messages.append
        )
    finally:
        cell.close()
    assert run.failures == {}, run.failures
    for name, (xyz, yaw) in moved.items():
        record = run.artifact.scene[name]
        assert "hand-camera rim edges" in record.provenance.solver
        pose = record.pose.matrix()
        assert np.linalg.norm(pose[:2, 3] - np.asarray(xyz[:2])) < 0.0015, name
        yaw_error = np.arctan2(pose[1, 0], pose[0, 0]) - yaw
        assert abs(np.degrees(yaw_error)) < 0.3, name
        assert pose[2, 3] == pytest.approx(xyz[2], abs=1e-6)  # on the table: height held
    assert sum(m.startswith("bins: bin_") for m in messages) == 3
