"""Training on a device: the device setting, and no tensor left behind on the CPU.

The development machines have no GPU, so the CUDA path cannot run here. What can be checked
is that nothing in a training step depends on the CPU: the policy and a batch are moved to
torch's ``meta`` device (shapes only, no data) and every tensor an operation creates during
the loss's forward and backward pass must be there too. An augmentation that draws its
random numbers on the CPU (``torch.rand(n)`` without ``device=``) is caught even where
``meta`` tensors would accept it, as an index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest
import torch
from policy_fixtures import SEMANTICS, tiny_config
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.checkpoint import read_weights
from r2s2r_policy.data.chunks import ChunkDataset, collate_batch, compute_normalization
from r2s2r_policy.data.sources import InMemoryEpisodeSource
from r2s2r_policy.models import build_policy
from r2s2r_policy.training import train
from r2s2r_policy.training_config import TrainConfig
from r2s2r_policy.training_data import make_spec
from r2s2r_policy.training_device import batch_to_device, resolve_device
from r2s2r_testing.episodes import IMAGE_PX, TRACK_FIELDS
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten


class CpuTensorWatch(TorchFunctionMode):
    """Record every torch operation that returns a CPU tensor with more than one element."""

    def __init__(self) -> None:
        super().__init__()
        self.on_cpu: list[str] = []

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        for value in tree_flatten(result)[0]:
            if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0:
                self.on_cpu.append(getattr(func, "__name__", repr(func)))
        return result


def arm_source(episodes: int, frames: int = 10) -> InMemoryEpisodeSource:
    """Episodes with the robot's joint names, a tracked object and random images."""
    rng = np.random.default_rng(0)
    home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES], dtype=np.float32)
    data: list[dict[str, np.ndarray]] = []
    for _ in range(episodes):
        trajectory = home + np.cumsum(rng.normal(0, 0.02, (frames + 1, len(home))), axis=0)
        trajectory = trajectory.astype(np.float32)
        shape = (frames, IMAGE_PX, IMAGE_PX, 3)
        data.append(
            {
                "head_camera_rgb": rng.integers(0, 255, shape, dtype=np.uint8),
                "hand_camera_rgb": rng.integers(0, 255, shape, dtype=np.uint8),
                "joint_pos_rad": trajectory[:-1],
                "belt_speed_mps": np.full(frames, 0.1, dtype=np.float32),
                "object_track": rng.normal(0, 0.2, (frames, len(TRACK_FIELDS))).astype(np.float32),
                "actions": trajectory[1:],
            }
        )
    return InMemoryEpisodeSource(
        "real", data, ALL_JOINT_NAMES, ALL_JOINT_NAMES, control_rate_hz=10.0, semantics=SEMANTICS
    )


def training_config(**overrides: object) -> TrainConfig:
    """The tiny config with every training-time augmentation of the preset switched on."""
    config = tiny_config(**overrides)
    config.policy.palm_object_features = True
    config.policy.model.params.update(
        random_shift_px=2, photometric_jitter=0.4, state_noise_std=0.1
    )
    return config


def leaked_operations(policy: torch.nn.Module, batch: dict[str, torch.Tensor]) -> list[str]:
    """Operations creating CPU tensors in a training forward + backward on ``meta``."""
    policy = policy.to("meta").train()
    batch = {key: value.to("meta") for key, value in batch.items()}
    with CpuTensorWatch() as watch:
        policy(batch)["loss"].backward()
    return watch.on_cpu


def test_a_training_step_creates_no_tensor_off_the_policy_device() -> None:
    source = arm_source(2)
    config = training_config()
    spec = make_spec(config.policy, source, 10.0)
    dataset = ChunkDataset(source, spec)
    policy = build_policy(spec, compute_normalization([dataset], spec))
    batch = collate_batch(dataset.batch(np.arange(6)))
    assert leaked_operations(policy, batch) == []


def test_the_watch_catches_random_numbers_drawn_on_the_cpu() -> None:
    """The check above can fail: the random shift as it was before devices is caught."""
    images = torch.zeros(2, 4, 4, 3, device="meta")
    with CpuTensorWatch() as watch:
        offsets = torch.randint(0, 3, (2, 2))  # no device=: CPU
        runs = images.view(-1).unfold(0, 12, 3)
        runs.index_select(0, (offsets[:, 0] + 1).clamp_(0, 3))  # meta accepts a CPU index
    assert watch.on_cpu[:1] == ["randint"]


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    yield


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    yield


def test_auto_is_the_cpu_without_a_gpu_and_cuda_is_refused_with_the_torch_build(
    no_gpu: None,
) -> None:
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu", local_rank=3) == torch.device("cpu")
    with pytest.raises(ValueError, match=r"device 'cuda:0': this torch \(.*\) sees no GPU"):
        resolve_device("cuda:0")


def test_cuda_devices_follow_the_local_rank(two_gpus: None) -> None:
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="GPU 2 requested, 2 visible"):
        resolve_device("cuda", local_rank=2)


@pytest.mark.parametrize("value", ["gpu", "cuda:", "CUDA", "mps"])
def test_config_refuses_unknown_devices(value: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="device"):
        TrainConfig.model_validate({"device": value})


def test_training_on_cuda_without_a_gpu_stops_before_any_step(tmp_path: Path, no_gpu: None) -> None:
    config = training_config(device="cuda")
    with pytest.raises(ValueError, match="sees no GPU"):
        train(config, tmp_path, sources={"real": arm_source(2)}, weights={"real": 1.0})
    assert not (tmp_path / "checkpoints").exists()


def test_cpu_batches_are_not_copied() -> None:
    batch = {"x": torch.ones(2)}
    assert batch_to_device(batch, torch.device("cpu")) is batch


def test_explicit_cpu_trains_as_auto_on_a_machine_without_gpu(tmp_path: Path) -> None:
    """``auto`` here is the CPU path, bit for bit, and a run resumes under another setting."""
    source = {"real": arm_source(3)}
    results = {}
    for device in ("cpu", "auto"):
        config = training_config(device=device, steps=6, checkpoint_every_steps=3)
        results[device] = train(config, tmp_path / device, sources=source, weights={"real": 1.0})
    assert results["cpu"].losses == results["auto"].losses
    # Stop at step 3 on "cpu", resume under "auto": device is not a result-changing field.
    config = training_config(device="cpu", steps=6, checkpoint_every_steps=3)
    train(config, tmp_path / "resumed", sources=source, weights={"real": 1.0}, stop_at_step=3)
    resumed = train(
        config.model_copy(update={"device": "auto"}),
        tmp_path / "resumed",
        sources=source,
        weights={"real": 1.0},
    )
    assert resumed.start_step == 3
    assert resumed.losses == results["cpu"].losses[3:]
    assert resumed.checkpoint is not None
    weights = read_weights(resumed.checkpoint)
    assert all(tensor.device.type == "cpu" for tensor in weights.values())


def test_cli_refuses_cuda_without_a_gpu_in_one_line(tmp_path: Path) -> None:
    """``r2s2r train --device cuda`` on a machine without CUDA: an error naming the build."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from click.testing import CliRunner
    from r2s2r_policy.cli import main

    config = tmp_path / "train.yaml"
    config.write_text(json.dumps(tiny_config().model_dump(mode="json")))
    result = CliRunner().invoke(
        main,
        ["train", "--config", str(config), "--run-dir", str(tmp_path / "run"), "--device", "cuda"],
    )
    assert result.exit_code == 1, result.output
    assert "device 'cuda': this torch" in result.output and "sees no GPU" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "run").exists()
