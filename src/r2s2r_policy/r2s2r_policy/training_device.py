"""Where a training process runs: its torch device and, under torchrun, its process group."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
import torch.distributed as dist


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """Return the torch device a ``TrainConfig.device`` value names on this machine.

    ``auto`` is ``cuda:<local_rank>`` when this torch build sees a GPU, else ``cpu``; ``cuda``
    is ``cuda:<local_rank>`` (one GPU per torchrun process).

    Raises:
        ValueError: If CUDA is asked for and this torch has none, or the GPU index is out of
            range; the message says which torch build this is.

    """
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if name not in ("auto", "cuda") and not name.startswith("cuda:"):
        raise ValueError(f"device {name!r}: expected auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise ValueError(
            f"device {name!r}: this torch ({torch.__version__}, CUDA build "
            f"{torch.version.cuda or 'none'}) sees no GPU; use device: cpu or auto"
        )
    index = int(name.split(":", 1)[1]) if ":" in name else local_rank
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"device {name!r} (local rank {local_rank}): GPU {index} requested, "
            f"{torch.cuda.device_count()} visible"
        )
    return torch.device("cuda", index)


def batch_to_device(
    batch: dict[str, torch.Tensor], device: torch.device
) -> dict[str, torch.Tensor]:
    """Return the batch's tensors on ``device`` (on the CPU: the same dict, untouched)."""
    if device.type == "cpu":
        return batch
    return {key: value.to(device, non_blocking=True) for key, value in batch.items()}


def distributed_context(backend: str) -> tuple[int, int, bool]:
    """Return ``(rank, world_size, initialized_here)``, starting ``backend`` under torchrun."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return 0, 1, False
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), False
    dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size(), True


__all__: Sequence[str] = ["batch_to_device", "distributed_context", "resolve_device"]
