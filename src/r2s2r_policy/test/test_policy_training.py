import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from policy_fixtures import make_source, tiny_config, tiny_options
from r2s2r_policy.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from r2s2r_policy.data.sources import HDF5EpisodeSource
from r2s2r_policy.training import ResumeError, train
from r2s2r_testing.episodes import write_hdf5
from safetensors.numpy import load_file


def sources() -> tuple[dict, dict]:
    return (
        {"real": make_source("real", [0, 1]), "sim": make_source("sim", [5, 6, 7])},
        {"real": 0.5, "sim": 0.5},
    )


def test_resume_gives_the_same_result_as_an_uninterrupted_run(tmp_path: Path) -> None:
    config = tiny_config(
        steps=10,
        checkpoint_every_steps=5,
        policy=tiny_options(random_shift_px=2, hidden_dims=[64], dropout=0.1).model_dump(),
    )
    src, weights = sources()
    full = train(config, tmp_path / "full", sources=src, weights=weights)
    first = train(config, tmp_path / "split", sources=src, weights=weights, stop_at_step=6)
    assert first.step == 6
    assert [p.name for p in list_checkpoints(tmp_path / "split")] == [
        "step_00000005",
        "step_00000006",
    ]
    second = train(config, tmp_path / "split", sources=src, weights=weights)
    assert second.start_step == 6 and second.step == 10
    assert first.losses + second.losses == pytest.approx(full.losses, abs=1e-6)
    a = load_file(str(tmp_path / "full/checkpoints/step_00000010/model.safetensors"))
    b = load_file(str(tmp_path / "split/checkpoints/step_00000010/model.safetensors"))
    for key in a:
        np.testing.assert_allclose(a[key], b[key], atol=1e-6)
    # A changed config must not silently continue an old run.
    with pytest.raises(ResumeError, match="sim_ratio"):
        train(
            tiny_config(steps=12, sim_ratio=0.2), tmp_path / "split", sources=src, weights=weights
        )


def test_a_run_stopped_after_its_last_checkpoint_resumes_to_the_same_result(
    tmp_path: Path,
) -> None:
    # Stopped after step 6's validation and checkpoint, and after the final checkpoint (before
    # its caller recorded it): the resumed run's curve, loss and checkpoint are the full run's.
    config = tiny_config(
        steps=10, checkpoint_every_steps=3, validation_fraction=0.4, validate_every_steps=3
    )
    src, weights = sources()
    full = train(config, tmp_path / "full", sources=src, weights=weights)
    train(config, tmp_path / "split", sources=src, weights=weights, stop_at_step=6)
    curve = tmp_path / "split" / "validation.jsonl"
    with curve.open("a") as stream:  # scored at step 7 by a run stopped before its checkpoint
        stream.write(json.dumps({"step": 7.0, "real": 9.9}) + "\n")
    resumed = train(config, tmp_path / "split", sources=src, weights=weights)
    assert resumed.start_step == 6
    assert [e["step"] for e in full.validation] == [3.0, 6.0, 9.0, 10.0]
    expected = [pytest.approx(entry) for entry in full.validation]
    assert resumed.validation == expected
    assert [json.loads(line) for line in curve.read_text().splitlines()] == expected
    again = train(config, tmp_path / "split", sources=src, weights=weights)
    assert (again.start_step, again.step, again.losses) == (10, 10, [])
    assert again.checkpoint == tmp_path / "split" / "checkpoints" / "step_00000010"
    assert again.final_loss == pytest.approx(full.final_loss) and full.final_loss is not None
    assert again.validation == expected


def test_weight_average_checkpoints_the_average_and_resumes_exactly(tmp_path: Path) -> None:
    import torch
    from r2s2r_policy.checkpoint import load_training_state
    from r2s2r_policy.training import WeightAverage

    config = tiny_config(steps=8, checkpoint_every_steps=4, ema_decay=0.5)
    src, weights = sources()
    full = train(config, tmp_path / "full", sources=src, weights=weights)
    first = train(config, tmp_path / "split", sources=src, weights=weights, stop_at_step=4)
    second = train(config, tmp_path / "split", sources=src, weights=weights)
    assert first.losses + second.losses == pytest.approx(full.losses, abs=1e-6)
    final = tmp_path / "full/checkpoints/step_00000008"
    averaged = load_file(str(final / "model.safetensors"))
    resumed = load_file(str(tmp_path / "split/checkpoints/step_00000008/model.safetensors"))
    raw = load_training_state(final)["raw_model"]
    moved = 0
    for key, value in averaged.items():
        np.testing.assert_allclose(value, resumed[key], atol=1e-6)
        moved += not np.allclose(value, raw[key].numpy())
    assert moved > 0  # the checkpoint holds the average, not the last raw weights
    # The average itself: decay min(0.5, (1 + step) / (10 + step)) towards each new weight.
    layer = torch.nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.fill_(0.0)
    average = WeightAverage(layer, 0.5)  # type: ignore[arg-type]
    with torch.no_grad():
        layer.weight.fill_(1.0)
    average.update(layer, 1)  # decay 2/11
    assert float(average.policy.weight[0, 0]) == pytest.approx(9 / 11)
    average.update(layer, 100)  # decay 0.5, towards 1 again
    assert float(average.policy.weight[0, 0]) == pytest.approx(1 - 0.5 * 2 / 11)
    # A run started without the average cannot resume with it.
    with pytest.raises(ResumeError, match="ema_decay"):
        train(tiny_config(steps=10, checkpoint_every_steps=4), tmp_path / "split", src, weights)


def test_hdf5_adapter_feeds_training(tmp_path: Path) -> None:
    real = HDF5EpisodeSource(write_hdf5(tmp_path / "real.hdf5", "real", [0, 1]))
    assert real.name == "real" and real.num_episodes() == 2 and real.control_rate_hz == 10.0
    assert real.frame_features()["head_camera_rgb"] == ((32, 32, 3), "uint8")
    result = train(
        tiny_config(steps=4, checkpoint_every_steps=4),
        tmp_path / "run",
        sources={"real": real},
        weights={"real": 1.0},
    )
    loaded = load_checkpoint(result.checkpoint)
    assert loaded.config.spec.joint_names == real.joint_names
    assert loaded.config.training["sources"]["real"]["samples"] == 24


TORCHRUN_TIMEOUT_S = 240
"""Two ranks of 4 tiny steps: ~5 s on an idle 2-core machine, past 60 s with its cores busy."""


@pytest.mark.graph
@pytest.mark.slow
def test_torchrun_two_ranks_gloo(tmp_path: Path) -> None:
    write_hdf5(tmp_path / "real.hdf5", "real", [0, 1])
    write_hdf5(tmp_path / "sim.hdf5", "sim", [5, 6])
    config = tiny_config(
        steps=4,
        checkpoint_every_steps=2,
        real_dataset=str(tmp_path / "real.hdf5"),
        sim_dataset=str(tmp_path / "sim.hdf5"),
        sim_ratio=0.5,
    )
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--standalone",
            "-m",
            "r2s2r_policy.cli",
            "train",
            "--config",
            str(tmp_path / "train.yaml"),
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=TORCHRUN_TIMEOUT_S,
        env=env,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    summaries = {}
    for line in completed.stdout.splitlines():
        if line.startswith("rank ") and " finished " in line:
            summary = json.loads(line.split(" finished ", 1)[1])
            summaries[summary["rank"]] = summary
    assert sorted(summaries) == [0, 1]
    assert all(s["world_size"] == 2 and s["steps"] == [0, 4] for s in summaries.values())
    assert summaries[0]["checkpoint"] is not None and summaries[1]["checkpoint"] is None
    checkpoint = latest_checkpoint(tmp_path / "run")
    assert checkpoint is not None and checkpoint.name == "step_00000004"
    meta = yaml.safe_load((checkpoint / "config.yaml").read_text())["training"]
    assert meta["written_by_rank"] == 0 and meta["world_size"] == 2
    leftovers = [p.name for p in (tmp_path / "run/checkpoints").iterdir()]
    assert sorted(leftovers) == ["step_00000002", "step_00000004"]
