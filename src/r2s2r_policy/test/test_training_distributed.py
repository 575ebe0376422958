"""Two processes under ``torchrun`` train the policy one process trains (issue 38).

The shipped training config (``config/policy/cotrain.yaml``: random shifts, photometric
jitter, state noise, palm features; here with the object-relative reach too) at 32 px on two
synthesized robot datasets, trained three ways from the same ``train_config.yaml``: in one
process, by ``torchrun --standalone --nproc_per_node 2``, and by two ``torchrun --nnodes 2
--nproc_per_node 1`` commands started separately with a c10d rendezvous on 127.0.0.1, as two
machines would be. Every step's loss (the global batch's) agrees to float rounding, and so do
the final weights.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_policy.checkpoint import latest_checkpoint
from r2s2r_testing.episodes import write_robot_dataset
from safetensors.numpy import load_file

pytestmark = pytest.mark.graph

REPO = Path(__file__).resolve().parents[3]
STEPS = 6
TIMEOUT_S = 240.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _train_config(folder: Path) -> Path:
    config = yaml.safe_load((REPO / "config" / "policy" / "cotrain.yaml").read_text())
    config["real_dataset"] = str(write_robot_dataset(folder / "real.hdf5", "real", 0, 3))
    config["sim_dataset"] = str(write_robot_dataset(folder / "sim.hdf5", "sim", 1, 3))
    config["policy"]["image_height_px"] = config["policy"]["image_width_px"] = 32
    config["policy"]["object_relative_reach"] = True
    config.update(
        batch_size=8,
        steps=STEPS,
        warmup_steps=2,
        checkpoint_every_steps=STEPS,
        num_threads=1,
        progress_bar=False,
        device="cpu",
    )
    path = folder / "train_config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _train_args(config: Path, run_dir: Path) -> list[str]:
    return ["-m", "r2s2r_policy.cli", "train", "--config", str(config), "--run-dir", str(run_dir),
            "--losses-out", str(run_dir / "losses.json")]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _finish(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        try:
            _, stderr = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            raise
        assert process.returncode == 0, stderr[-3000:]


def _losses(run_dir: Path) -> list[float]:
    record = json.loads((run_dir / "losses.json").read_text())
    assert record["start_step"] == 0 and len(record["losses"]) == STEPS
    return [float(loss) for loss in record["losses"]]


def _weights(run_dir: Path) -> dict[str, np.ndarray]:
    checkpoint = latest_checkpoint(run_dir)
    assert checkpoint is not None and checkpoint.name == f"step_{STEPS:08d}"
    return load_file(str(checkpoint / "model.safetensors"))


@pytest.mark.slow
def test_two_processes_train_the_one_process_policy(tmp_path: Path) -> None:
    config = _train_config(tmp_path)
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    local = subprocess.Popen(
        [sys.executable, *_train_args(config, tmp_path / "local")],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _finish([local])
    standalone = subprocess.Popen(
        [*torchrun, "--standalone", "--nproc_per_node", "2",
         *_train_args(config, tmp_path / "standalone")],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _finish([standalone])
    endpoint = f"127.0.0.1:{_free_port()}"
    node_command = [
        *torchrun, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
        "--rdzv_endpoint", endpoint, "--rdzv_id", "r2s2r-test",
        *_train_args(config, tmp_path / "nnodes"),
    ]  # fmt: skip
    nodes = [
        subprocess.Popen(
            node_command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    _finish(nodes)

    one = _losses(tmp_path / "local")
    assert len(set(one)) == STEPS  # the steps differ: a real run, not a constant
    reference = _weights(tmp_path / "local")
    for name in ("standalone", "nnodes"):
        two = _losses(tmp_path / name)
        assert two == pytest.approx(one, rel=1e-5, abs=1e-6), name
        assert json.loads((tmp_path / name / "losses.json").read_text())["world_size"] == 2
        weights = _weights(tmp_path / name)
        for key, value in reference.items():
            np.testing.assert_allclose(weights[key], value, rtol=1e-4, atol=1e-5, err_msg=key)


def test_odd_global_batch_is_refused(tmp_path: Path) -> None:
    config = _train_config(tmp_path)
    data = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**data, "batch_size": 7}))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         *_train_args(config, tmp_path / "run")],
        env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "batch_size = 7: expected a multiple of the 2 processes" in done.stderr
