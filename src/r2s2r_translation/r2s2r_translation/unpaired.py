"""An unpaired sim-to-real translator in the manner of CUT / FastCUT (Park et al. 2020).

The comparison the paper's translators are held against: no pairing and no structure
representation; a generator maps a rendered frame to a frame a discriminator cannot tell from
real ones (least-squares GAN), while a patchwise contrastive loss (PatchNCE) keeps each output
patch closer to the input patch at the same place than to other patches of the frame (what
keeps the content). FastCUT's settings: PatchNCE on the input domain only, weight 10.

Both networks are small (the generator is :class:`~.network.StructureToReal` on RGB input), so
it trains on a CPU at the policies' 64 px.
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
from torch import nn
from torch.nn import functional

from .network import StructureToReal, channels_last


class UnpairedTrainConfig(ConfigModel):
    """How the unpaired (CUT-style) translator is trained."""

    steps: int = Field(default=3000, ge=1, le=1_000_000, description="Optimiser steps.")
    batch_size: int = Field(default=16, ge=1, le=4096, description="Frames per domain per step.")
    learning_rate: float = Field(default=2e-4, gt=0.0, le=1.0, description="Adam, both nets.")
    width: int = Field(default=12, ge=4, le=128, description="Generator width.")
    nce_weight: float = Field(default=10.0, ge=0.0, description="PatchNCE weight (FastCUT: 10).")
    nce_patches: int = Field(default=64, ge=2, le=4096, description="Patches per frame and layer.")
    nce_temperature: float = Field(default=0.07, gt=0.0, description="PatchNCE temperature.")
    seed: int = Field(default=0, ge=0, description="Initialisation and batch order.")
    eval_every: int = Field(default=250, ge=1, description="Losses logged every this many steps.")


class PatchDiscriminator(nn.Module):
    """A small PatchGAN: a real/fake logit per overlapping patch."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, width, 4, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, 2 * width, 4, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * width, 1, 3, padding=1),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """Return patch logits."""
        return self.layers(frames)  # type: ignore[no-any-return]


def _encoder_features(generator: StructureToReal, frames: torch.Tensor) -> list[torch.Tensor]:
    full = generator.at_full(frames)
    half = generator.at_half(full)
    return [half, generator.at_quarter(half)]


class PatchNCE(nn.Module):
    """PatchNCE on the generator's encoder layers (1/2 and 1/4 resolution)."""

    def __init__(self, width: int, patches: int, temperature: float, dim: int = 64) -> None:
        super().__init__()
        self.heads = nn.ModuleList(
            nn.Sequential(nn.Linear(c, dim), nn.ReLU(), nn.Linear(dim, dim))
            for c in (2 * width, 4 * width)
        )
        self.patches = patches
        self.temperature = temperature

    def forward(
        self, source: list[torch.Tensor], output: list[torch.Tensor], generator: torch.Generator
    ) -> torch.Tensor:
        """Return the mean PatchNCE loss over layers."""
        losses = []
        for head, f_in, f_out in zip(self.heads, source, output, strict=True):
            n, _, h, w = f_in.shape
            count = min(self.patches, h * w)
            where = torch.randperm(h * w, generator=generator)[:count]
            keys = head(f_in.flatten(2)[:, :, where].permute(0, 2, 1))  # (N, P, D)
            queries = head(f_out.flatten(2)[:, :, where].permute(0, 2, 1))
            keys = functional.normalize(keys, dim=2).detach()
            queries = functional.normalize(queries, dim=2)
            logits = torch.bmm(queries, keys.transpose(1, 2)) / self.temperature  # (N, P, P)
            target = torch.arange(count).expand(n, count)
            losses.append(
                functional.cross_entropy(logits.reshape(n * count, count), target.reshape(-1))
            )
        return torch.stack(losses).mean()


@dataclass
class UnpairedLog:
    """Losses by step and the wall time."""

    steps: list[int] = field(default_factory=list)
    generator_loss: list[float] = field(default_factory=list)
    discriminator_loss: list[float] = field(default_factory=list)
    nce_loss: list[float] = field(default_factory=list)
    wall_s: float = 0.0


def _tensor(frames: NDArray[np.uint8]) -> torch.Tensor:
    return torch.from_numpy(frames).permute(0, 3, 1, 2).float().div(255.0)


def train_unpaired_translator(
    sim_frames: NDArray[np.uint8],
    real_frames: NDArray[np.uint8],
    config: UnpairedTrainConfig,
    progress: Callable[[int, str], None] | None = None,
) -> tuple[StructureToReal, UnpairedLog]:
    """Train the generator sim → real on unpaired frames ``(N, S, S, 3)`` (S a multiple of 4).

    Returns:
        The generator (eval mode, channels-last) and the log.

    Raises:
        ValueError: Empty sets, other layouts or sizes, or the two sets' sizes differ.

    """
    for name, frames in (("sim", sim_frames), ("real", real_frames)):
        if frames.ndim != 4 or frames.shape[3] != 3 or len(frames) == 0:
            raise ValueError(f"{name} frames: expected (N, S, S, 3), got {frames.shape}")
    if sim_frames.shape[1:] != real_frames.shape[1:] or sim_frames.shape[1] % 4:
        raise ValueError(
            f"sim {sim_frames.shape[1:3]} and real {real_frames.shape[1:3]} px: expected one "
            "size, a multiple of 4"
        )
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    patch_rng = torch.Generator().manual_seed(config.seed)
    generator = channels_last(StructureToReal(3, config.width))
    discriminator = PatchDiscriminator()
    nce = PatchNCE(config.width, config.nce_patches, config.nce_temperature)
    optimise_g = torch.optim.Adam(
        [*generator.parameters(), *nce.parameters()], lr=config.learning_rate, betas=(0.5, 0.999)
    )
    optimise_d = torch.optim.Adam(
        discriminator.parameters(), lr=config.learning_rate, betas=(0.5, 0.999)
    )

    def decay(step: int) -> float:
        return 0.5 * (1.0 + math.cos(math.pi * min(step, config.steps) / config.steps))

    schedules = [torch.optim.lr_scheduler.LambdaLR(o, decay) for o in (optimise_g, optimise_d)]
    log = UnpairedLog()
    started = time.monotonic()
    sums = np.zeros(3)
    for step in range(1, config.steps + 1):
        generator.train()
        sim = _tensor(sim_frames[rng.integers(0, len(sim_frames), config.batch_size)])
        real = _tensor(real_frames[rng.integers(0, len(real_frames), config.batch_size)])
        fake = generator(sim)
        # Discriminator: real -> 1, fake -> 0 (least squares).
        optimise_d.zero_grad(set_to_none=True)
        loss_d = 0.5 * (
            (discriminator(real) - 1.0).pow(2).mean() + discriminator(fake.detach()).pow(2).mean()
        )
        loss_d.backward()
        optimise_d.step()
        # Generator: fool the discriminator, keep each patch's content (PatchNCE).
        optimise_g.zero_grad(set_to_none=True)
        adversarial = (discriminator(fake) - 1.0).pow(2).mean()
        loss_nce = nce(
            _encoder_features(generator, sim), _encoder_features(generator, fake), patch_rng
        )
        loss_g = adversarial + config.nce_weight * loss_nce
        loss_g.backward()
        optimise_g.step()
        for schedule in schedules:
            schedule.step()
        sums += [float(adversarial.detach()), float(loss_d.detach()), float(loss_nce.detach())]
        if step % config.eval_every == 0 or step == config.steps:
            count = config.eval_every if step % config.eval_every == 0 else step % config.eval_every
            g, d, n = sums / count
            log.steps.append(step)
            log.generator_loss.append(float(g))
            log.discriminator_loss.append(float(d))
            log.nce_loss.append(float(n))
            sums[:] = 0.0
            if progress is not None:
                progress(step, f"G {g:.3f} D {d:.3f} NCE {n:.3f}")
    log.wall_s = time.monotonic() - started
    generator.eval()
    return generator, log


def translate_unpaired(
    generator: StructureToReal, frames: NDArray[np.uint8], batch_size: int = 256
) -> NDArray[np.uint8]:
    """Translate rendered frames ``(N, S, S, 3)`` with a trained generator (uint8)."""
    out = np.empty_like(frames)
    with torch.inference_mode():
        for start in range(0, len(frames), batch_size):
            chunk = _tensor(frames[start : start + batch_size]).contiguous(
                memory_format=torch.channels_last
            )
            rgb = generator(chunk)
            out[start : start + len(chunk)] = (
                rgb.mul(255.0).round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
            )
    return out
