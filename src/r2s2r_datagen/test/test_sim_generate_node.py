import subprocess
import sys
from pathlib import Path

import pytest
from datagen_support import REPO
from r2s2r_testing.generation import OVERRIDES

from r2s2r_dataset import dataset_info


@pytest.mark.graph
def test_sim_generate_node_runs_a_tiny_job_and_exits_0(
    tmp_path: Path, configurations_file: Path
) -> None:
    run_dir = tmp_path / "run"
    params = [
        f"configurations_path:={configurations_file}",
        "configurations:=[nominal_planner]",
        "episodes_per_configuration:=2",
        "workers:=1",
        f"output_dir:={run_dir}",
        f"generator_overrides:=['{OVERRIDES[0]}']",
        "progress:=false",
    ]
    args = [sys.executable, "-m", "r2s2r_datagen.nodes.sim_generate_node", "--ros-args",
            "--params-file", str(REPO / "config" / "nodes" / "sim_generate.yaml")]  # fmt: skip
    for param in params:
        args += ["-p", param]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    info = dataset_info(run_dir / "datasets" / "nominal_planner.hdf5")
    assert info.episodes == 2 and info.per_source == {"sim/planner": 2}
    assert "nominal_planner" in result.stdout


@pytest.mark.graph
def test_sim_generate_node_fails_on_bad_parameters(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "r2s2r_datagen.nodes.sim_generate_node", "--ros-args",
            "-p", "workers:=0", "-p", f"output_dir:={tmp_path}"]  # fmt: skip
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "workers" in result.stderr
