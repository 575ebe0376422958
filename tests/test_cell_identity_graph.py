"""A grounding artifact of another cell is refused by the launched graph, in one line.

``real_deploy`` on the default twin, given the default twin's grounding (its poses are right)
but recording another cell: the perturbed twin's static scene, or another cell's name. The
graph's ``cell_state_publisher`` compares what the artifact records with the running cell
(:mod:`r2s2r_world.cell_identity`) and ends the graph with exit code 2 and the reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from r2s2r_calibration.sim_cell_client import SimCellClient
from r2s2r_sim.backend_config import SimBackendConfig, make_mujoco_backend
from r2s2r_sim.cell_runtime import SimCell
from r2s2r_world.cell_identity import CellIdentity, identity_from_depth
from r2s2r_world.world import load_world

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config"
ARTIFACT = REPO / "tests" / "data" / "grounding_default_twin.yaml"


def _cell_of_twin(twin: Path, name: str | None) -> CellIdentity:
    """The identity grounding records on ``twin``: its head depth with the arm at home."""
    nominal = load_world(CONFIG / "world" / "nominal.yaml")
    cell = SimCell(make_mujoco_backend(SimBackendConfig()), load_world(twin), nominal)
    try:
        stamp, depth = SimCellClient(cell).capture_depth()
    finally:
        cell.close()
    return identity_from_depth(depth, stamp, name)


def _artifact_with(cell: CellIdentity, path: Path) -> Path:
    data = yaml.safe_load(ARTIFACT.read_text())
    data["cell"] = cell.model_dump(mode="json")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _launch(tmp_path: Path, arguments: list[str], timeout_s: float) -> tuple[int | None, str]:
    """Run ``r2s2r launch real_deploy`` until it ends (or ``timeout_s``); its code and output."""
    from r2s2r_common.ros_domain import claim_domain
    from r2s2r_testing.cell_probe import source_share_overlay

    prefix = source_share_overlay(tmp_path / "prefix", REPO)
    claim = claim_domain()
    env = {
        **os.environ,
        "ROS_DOMAIN_ID": str(claim.domain_id),
        "AMENT_PREFIX_PATH": f"{prefix}{os.pathsep}{os.environ['AMENT_PREFIX_PATH']}",
    }
    log_path = tmp_path / f"launch_{len(list(tmp_path.glob('launch_*')))}.log"
    with log_path.open("w") as log:
        launch = subprocess.Popen(
            [sys.executable, "-m", "r2s2r.cli", "launch", "real_deploy", *arguments,
             "--no-progress", "--log-dir", str(tmp_path / "logs")],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            code: int | None = launch.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(launch.pid, signal.SIGINT)
            launch.wait(90)
        finally:
            claim.release()
    return code, log_path.read_text()


@pytest.mark.graph
@pytest.mark.slow
def test_real_deploy_refuses_the_artifact_of_another_cell(tmp_path: Path) -> None:
    pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build")
    other = _artifact_with(
        _cell_of_twin(CONFIG / "twin" / "perturbed.yaml", None), tmp_path / "o.yaml"
    )
    code, output = _launch(tmp_path, [f"grounding_artifact:={other}"], 150.0)
    assert code not in (None, 0), output[-3000:]
    refusal = [line for line in output.splitlines() if "grounds another cell" in line]
    assert refusal, output[-3000:]
    assert "median" in refusal[0] and str(other) in refusal[0]

    named = _artifact_with(
        _cell_of_twin(CONFIG / "twin" / "default.yaml", "lab-a"), tmp_path / "n.yaml"
    )
    code, output = _launch(tmp_path, [f"grounding_artifact:={named}", "cell_name:=lab-b"], 150.0)
    assert code not in (None, 0), output[-3000:]
    assert "grounds cell 'lab-a', but this is cell 'lab-b'" in output, output[-3000:]
