"""The structure-to-real network: a small U-Net light enough to translate 500+ frames/s on a CPU.

Three scales (full, 1/2, 1/4); the full-resolution path is thin (most of the work is at
1/2 and 1/4), skips are added, not concatenated, and the output is RGB in [0, 1]. About 36 M
multiply-adds per 64 x 64 frame at width 12.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional


def _conv(inputs: int, outputs: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1), nn.LeakyReLU(0.1))


def channels_last(network: StructureToReal) -> StructureToReal:
    """Return the network in channels-last memory format (about 2x faster convolutions on CPU)."""
    return network.to(memory_format=torch.channels_last)  # type: ignore[call-overload,no-any-return]


class StructureToReal(nn.Module):
    """Map structure ``(N, C, H, W)`` (H, W multiples of 4) to an RGB frame ``(N, 3, H, W)``.

    Args:
        in_channels: Structure channels (:data:`r2s2r_translation.structure.STRUCTURE_CHANNELS`).
        width: Channels at full resolution (x2 at 1/2, x4 at 1/4).

    """

    def __init__(self, in_channels: int, width: int = 12) -> None:
        super().__init__()
        self.at_full = _conv(in_channels, width)
        self.at_half = nn.Sequential(_conv(width, 2 * width, 2), _conv(2 * width, 2 * width))
        self.at_quarter = nn.Sequential(
            _conv(2 * width, 4 * width, 2), _conv(4 * width, 4 * width), _conv(4 * width, 4 * width)
        )
        self.up_half = nn.Conv2d(4 * width, 2 * width, 1)
        self.mix_half = _conv(2 * width, 2 * width)
        self.up_full = nn.Conv2d(2 * width, width, 1)
        self.mix_full = _conv(width, width)
        self.rgb = nn.Conv2d(width, 3, 1)

    def forward(self, structure: torch.Tensor) -> torch.Tensor:
        """Return RGB in [0, 1]."""
        full = self.at_full(structure)
        half = self.at_half(full)
        quarter = self.at_quarter(half)
        up = functional.interpolate(quarter, scale_factor=2.0, mode="bilinear", align_corners=False)
        half = self.mix_half(self.up_half(up) + half)
        up = functional.interpolate(half, scale_factor=2.0, mode="bilinear", align_corners=False)
        full = self.mix_full(self.up_full(up) + full)
        return torch.sigmoid(self.rgb(full))
