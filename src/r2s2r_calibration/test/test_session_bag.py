"""Grounding sessions recorded to a bag and re-run from it, against an in-process cell."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2s2r_calibration.procedure import GroundingRun, ProcedureConfig, run_grounding
from r2s2r_calibration.session_bag import BagCellClient, RecordingCellClient, SessionBagError
from r2s2r_calibration.sim_cell_client import SimCellClient
from r2s2r_sim.cell_runtime import SimCell
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_world.world import WorldParams, apply_grounding, load_world

# Grounding runs recorded and replayed (1-3 s each): left out of scripts/test.sh --fast.
pytestmark = pytest.mark.slow

NOMINAL = Path(__file__).resolve().parents[3] / "config" / "world" / "nominal.yaml"
STEPS = ["registration", "bins", "sysid"]
CONFIG = ProcedureConfig(sysid_joints=["wrist_2_joint"])
Recorded = tuple[WorldParams, GroundingRun, Path]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    nominal = load_world(NOMINAL)
    truth = apply_grounding(
        nominal,
        {
            "controller": {"latency_s": 0.012, "gains": {"wrist_2_joint": {"kp": 560.0}}},
            "bins": {"bin_1": {"pose": {"xyz_m": [-0.405, 0.004, 0.75], "rpy_rad": [0, 0, 0.02]}}},
        },
    )
    bag = tmp_path_factory.mktemp("session") / "ground_bag"
    cell = SimCell(MujocoBackend(), truth, nominal)
    try:
        client = RecordingCellClient(SimCellClient(cell), bag)
        live = run_grounding(client, nominal, STEPS, CONFIG)
        client.close()
    finally:
        cell.close()
    return nominal, live, bag


def test_a_recorded_session_replays_to_the_same_artifact(recorded: Recorded) -> None:
    nominal, live, bag = recorded
    assert live.failures == {}
    replay = BagCellClient(bag)
    assert replay.steps == STEPS
    again = run_grounding(replay, nominal, STEPS, CONFIG)
    assert again.failures == {}
    assert again.artifact.controller is not None and live.artifact.controller is not None
    assert again.artifact.controller.latency_s == pytest.approx(
        live.artifact.controller.latency_s, abs=1e-6
    )
    kp = again.artifact.controller.gains["wrist_2_joint"].kp
    assert kp == pytest.approx(live.artifact.controller.gains["wrist_2_joint"].kp, rel=1e-6)
    for name in ("belt", "bin_0", "bin_1", "bin_2"):
        np.testing.assert_allclose(
            again.artifact.scene[name].pose.matrix(), live.artifact.scene[name].pose.matrix()
        )
    assert again.artifact.scene["bin_1"].provenance.source == str(bag)


def test_one_step_runs_alone_from_the_bag(recorded: Recorded) -> None:
    nominal, live, bag = recorded
    sysid = run_grounding(BagCellClient(bag), nominal, ["sysid"], CONFIG)
    assert sysid.failures == {}
    assert sysid.artifact.controller is not None and live.artifact.controller is not None
    assert sysid.artifact.controller.latency_s == pytest.approx(0.012, abs=5e-5)
    # The bins views are planned from the registration: with it, bins re-runs exactly.
    both = run_grounding(BagCellClient(bag), nominal, ["registration", "bins"], CONFIG)
    assert both.failures == {}
    np.testing.assert_allclose(
        both.artifact.scene["bin_1"].pose.matrix(), live.artifact.scene["bin_1"].pose.matrix()
    )
    # Alone it would plan other views than the recorded ones: refused, saying so.
    alone = run_grounding(BagCellClient(bag), nominal, ["bins"], CONFIG)
    assert "differ from the recorded session" in alone.failures["bins"]


def test_a_step_the_bag_does_not_hold_or_a_different_procedure_is_refused(
    recorded: Recorded,
) -> None:
    nominal, _, bag = recorded
    missing = run_grounding(BagCellClient(bag), nominal, ["belt"], CONFIG)
    assert "has no step 'belt'" in missing.failures["belt"]
    other = ProcedureConfig(sysid_joints=["wrist_2_joint", "elbow_joint"])
    differs = run_grounding(BagCellClient(bag), nominal, ["sysid"], other)
    assert "differ from the recorded session" in differs.failures["sysid"] or (
        "holds fewer messages" in differs.failures["sysid"]
    )


def test_not_a_session_bag(tmp_path: Path) -> None:
    with pytest.raises(SessionBagError, match=r"metadata\.yaml"):
        BagCellClient(tmp_path)
    with pytest.raises(SessionBagError, match="exists"):
        RecordingCellClient(SimCellClient.__new__(SimCellClient), tmp_path)


def test_ground_cli_runs_from_the_bag(recorded: Recorded, tmp_path: Path) -> None:
    from click.testing import CliRunner
    from r2s2r_calibration.artifact import load_artifact
    from r2s2r_calibration.cli import ground_command

    _, live, bag = recorded
    output = tmp_path / "from_bag.yaml"
    result = CliRunner().invoke(
        ground_command,
        ["--output", str(output), "--steps", "registration", "--from-bag", str(bag)],
    )
    assert result.exit_code == 0, result.output
    assert "steps ['registration']" in result.output
    belt = load_artifact(output).scene["belt"].pose.matrix()
    np.testing.assert_allclose(belt, live.artifact.scene["belt"].pose.matrix())
    # The CLI's sysid identifies every joint; the session identified one: refused, saying so.
    other = CliRunner().invoke(
        ground_command, ["--output", str(output), "--steps", "sysid", "--from-bag", str(bag)]
    )
    assert other.exit_code == 1 and "differ from the recorded session" in other.output
    refused = CliRunner().invoke(
        ground_command, ["--output", str(output), "--from-bag", str(tmp_path / "nothing")]
    )
    assert refused.exit_code != 0 and "metadata.yaml" in refused.output


def test_bins_all_refused_keep_their_registered_poses(recorded: Recorded) -> None:
    """A camera whose rim edges no fit accepts (strong MJPEG) leaves the registration's poses."""
    nominal, _, bag = recorded
    registered = run_grounding(BagCellClient(bag), nominal, ["registration"], CONFIG)
    strict_fit = CONFIG.bin_views.model_copy(
        update={"max_rms_m": 1e-7, "soft_edge_max_rms_m": 1e-7}
    )
    messages: list[str] = []
    kept = run_grounding(
        BagCellClient(bag),
        nominal,
        ["registration", "bins"],
        CONFIG.model_copy(update={"bin_views": strict_fit}),
        messages.append,
    )
    assert kept.failures == {}
    assert any("no bin could be refined" in line and "WARNING" in line for line in messages)
    for name in nominal.bins:
        record = kept.artifact.scene[name]
        assert record.refinement_refused is not None and "RMS" in record.refinement_refused
        np.testing.assert_allclose(
            record.pose.matrix(), registered.artifact.scene[name].pose.matrix()
        )
    required = strict_fit.model_copy(update={"require_refinement": True})
    failed = run_grounding(
        BagCellClient(bag),
        nominal,
        ["registration", "bins"],
        CONFIG.model_copy(update={"bin_views": required}),
    )
    assert "no bin could be refined" in failed.failures["bins"]
    assert "require_refinement = True" in failed.failures["bins"]
