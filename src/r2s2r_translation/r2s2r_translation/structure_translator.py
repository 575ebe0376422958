"""The CRAFT-inspired structure-to-real translator: trained on real frames only.

Training is paired and self-supervised: the input is the structure of a real frame
(:func:`~r2s2r_translation.structure.structure_features`), the target is that real frame. No
simulated frame is seen in training. At use, the structure of a *rendered* frame goes in, and
the frame comes out with the real camera's look: its colour response, tone, vignetting and
the look of its surfaces, as the network learnt them from the real frames.

Each domain is standardised with its own statistics (:class:`~.structure.StructureStats`: the
real training frames in training; the simulated dataset at use), so a global difference of
look between the domains (gains, gamma) does not reach the network.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from numpy.typing import NDArray
from pydantic import Field
from r2s2r_common.config import ConfigModel

from .network import StructureToReal, channels_last
from .structure import (
    STRUCTURE_CHANNELS,
    StructureStats,
    structure_features,
    structure_statistics,
)


class StructureTrainConfig(ConfigModel):
    """How a structure-to-real translator is trained (chosen on held-out real frames)."""

    steps: int = Field(default=3000, ge=1, le=1_000_000, description="Optimiser steps.")
    batch_size: int = Field(default=32, ge=1, le=4096, description="Frames per step.")
    learning_rate: float = Field(default=2e-3, gt=0.0, le=1.0, description="Adam, cosine decay.")
    width: int = Field(default=12, ge=4, le=128, description="Network width at full resolution.")
    seed: int = Field(default=0, ge=0, description="Initialisation and batch order.")
    num_threads: int = Field(default=0, ge=0, le=256, description="torch threads (0: default).")
    eval_every: int = Field(default=250, ge=1, description="Held-out L1 every this many steps.")


@dataclass
class TrainingLog:
    """What training measured: held-out L1 (in [0, 1] units) by step, and the wall time."""

    steps: list[int] = field(default_factory=list)
    holdout_l1: list[float] = field(default_factory=list)
    train_l1: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    stats: StructureStats | None = None


def _as_input(structure: NDArray[np.float32]) -> torch.Tensor:
    return torch.from_numpy(structure).contiguous(memory_format=torch.channels_last)


def _as_target(frames: NDArray[np.uint8]) -> torch.Tensor:
    return torch.from_numpy(frames).permute(0, 3, 1, 2).float().div(255.0)


def train_structure_translator(
    train_frames: NDArray[np.uint8],
    holdout_frames: NDArray[np.uint8],
    config: StructureTrainConfig,
    progress: Callable[[int, str], None] | None = None,
) -> tuple[StructureToReal, TrainingLog]:
    """Train on real frames ``(N, S, S, 3)`` (S a multiple of 4); score on held-out ones.

    Returns:
        The network (eval mode, channels-last) and the log.

    Raises:
        ValueError: Frames of another layout, a size not a multiple of 4, or no frames.

    """
    for name, frames in (("training", train_frames), ("held-out", holdout_frames)):
        if frames.ndim != 4 or frames.shape[3] != 3 or len(frames) == 0:
            raise ValueError(f"{name} frames: expected (N, S, S, 3), got {frames.shape}")
        if frames.shape[1] % 4 or frames.shape[2] % 4:
            raise ValueError(f"{name} frames: {frames.shape[1:3]} px: expected multiples of 4")
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    network = channels_last(StructureToReal(STRUCTURE_CHANNELS, config.width))
    optimizer = torch.optim.Adam(network.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step, config.steps) / config.steps)),
    )
    stats = structure_statistics(train_frames[:: max(1, len(train_frames) // 2000)])
    holdout_input = _as_input(structure_features(holdout_frames, stats))
    holdout_target = _as_target(holdout_frames)
    log = TrainingLog()
    started = time.monotonic()
    running: list[float] = []
    for step in range(1, config.steps + 1):
        network.train()
        batch = train_frames[rng.integers(0, len(train_frames), config.batch_size)]
        inputs = _as_input(structure_features(batch, stats))
        loss = torch.nn.functional.l1_loss(network(inputs), _as_target(batch))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        running.append(float(loss.detach()))
        if step % config.eval_every == 0 or step == config.steps:
            network.eval()
            with torch.inference_mode():
                held = float(torch.nn.functional.l1_loss(network(holdout_input), holdout_target))
            log.steps.append(step)
            log.holdout_l1.append(held)
            log.train_l1.append(float(np.mean(running)))
            running = []
            if progress is not None:
                progress(step, f"held-out L1 {held:.4f}")
    log.wall_s = time.monotonic() - started
    log.stats = stats
    network.eval()
    return network, log


def translate_frames(
    network: StructureToReal,
    frames: NDArray[np.uint8],
    stats: StructureStats | None = None,
    batch_size: int = 256,
) -> NDArray[np.uint8]:
    """Translate rendered frames ``(N, S, S, 3)`` to the real camera's look (uint8).

    Args:
        network: The trained network.
        frames: Rendered frames at the working size.
        stats: The simulated domain's statistics (None: of ``frames``).
        batch_size: Frames per forward pass.

    """
    out = np.empty_like(frames)
    domain = stats or structure_statistics(frames)
    network.eval()
    with torch.inference_mode():
        for start in range(0, len(frames), batch_size):
            chunk = frames[start : start + batch_size]
            rgb = network(_as_input(structure_features(chunk, domain)))
            out[start : start + len(chunk)] = (
                rgb.mul(255.0).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
            )
    return out
