"""Small conv encoder + spatial-softmax keypoints + MLP chunk head, sized for CPU.

Per camera: a few strided convolutions with GroupNorm and ReLU, then a 1×1 convolution to
``num_keypoints`` feature maps whose spatial softmax gives expected (x, y) image coordinates
(Levine et al. 2016, as robomimic and Diffusion Policy use). Keypoints of every camera and the
normalised state (joint positions, belt speed) feed an MLP that outputs the whole normalised
action chunk at once (action chunking, as ACT). Training uses random-shift image augmentation
(DrQ), optional Gaussian noise on the measured state (derived inputs follow it), and an L1
(default) or L2 loss over unpadded chunk steps.

Why this size: a ResNet-18 encoder costs ~20 ms per inference for two 128×128 images on this
CPU and ~1.8 s per training step at batch 32; this encoder costs a few ms and trains at
hundreds of samples per second (see ``bench/bench_policy.py``). The head, augmentations and
loss are :class:`~.chunk_policy.ImageChunkPolicy`'s (the ImageNet encoder of
:mod:`.efficientnet_lite` shares them); the image helpers live in :mod:`.images` (re-exported).
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator
from torch import nn

from ..spec import ImageSpec
from .chunk_policy import ChunkPolicyParams, ImageChunkPolicy, ImageFeatureEncoder
from .images import (
    STANDARDIZATION_MIN_STD,
    images_to_float,
    random_shift,
    standardize_images,
)

__all__ = [
    "STANDARDIZATION_MIN_STD",
    "ConvKeypointParams",
    "ConvKeypointPolicy",
    "ImageEncoder",
    "SpatialSoftmax",
    "images_to_float",
    "random_shift",
    "standardize_images",
]


class ConvKeypointParams(ChunkPolicyParams):
    """Hyper-parameters of :class:`ConvKeypointPolicy` (head and augmentations: the base's)."""

    conv_channels: list[int] = Field(
        default_factory=lambda: [16, 32, 32], min_length=1, description="Channels per conv."
    )
    conv_kernels: list[int] = Field(
        default_factory=lambda: [8, 3, 3], min_length=1, description="Kernel size per conv."
    )
    conv_strides: list[int] = Field(
        default_factory=lambda: [4, 2, 1], min_length=1, description="Stride per conv."
    )
    groupnorm_groups: int = Field(default=8, ge=1, le=64, description="GroupNorm groups.")
    num_keypoints: int = Field(default=32, ge=1, le=512, description="Keypoints per camera.")

    @model_validator(mode="after")
    def _same_lengths(self) -> ConvKeypointParams:
        lengths = {len(self.conv_channels), len(self.conv_kernels), len(self.conv_strides)}
        if len(lengths) != 1:
            raise ValueError(
                "conv_channels, conv_kernels and conv_strides must have the same length, got "
                f"{len(self.conv_channels)}, {len(self.conv_kernels)}, {len(self.conv_strides)}"
            )
        for channels in self.conv_channels:
            if channels % self.groupnorm_groups:
                raise ValueError(
                    f"conv_channels {channels} not divisible by groupnorm_groups "
                    f"{self.groupnorm_groups}"
                )
        return self


class SpatialSoftmax(nn.Module):
    """Feature maps ``(B, K, h, w)`` → expected keypoint coordinates ``(B, 2K)`` in [-1, 1].

    Args:
        height: Feature map height.
        width: Feature map width.

    """

    grid: torch.Tensor

    def __init__(self, height: int, width: int) -> None:
        super().__init__()
        ys, xs = torch.meshgrid(
            torch.linspace(-1.0, 1.0, height), torch.linspace(-1.0, 1.0, width), indexing="ij"
        )
        self.register_buffer("grid", torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1))
        self.log_temperature = nn.Parameter(torch.zeros(1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Return ``(B, 2K)`` keypoints (x, y per map)."""
        batch, maps = features.shape[:2]
        flat = features.reshape(batch * maps, -1) / self.log_temperature.exp()
        attention = torch.softmax(flat, dim=-1)
        return (attention @ self.grid).reshape(batch, maps * 2)


class ImageEncoder(ImageFeatureEncoder):
    """Strided convs + GroupNorm + ReLU, 1×1 conv to keypoint maps, spatial softmax.

    Args:
        params: Hyper-parameters.
        height_px: Input height.
        width_px: Input width.

    """

    def __init__(self, params: ConvKeypointParams, height_px: int, width_px: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels_in = 3
        height, width = height_px, width_px
        for channels, kernel, stride in zip(
            params.conv_channels, params.conv_kernels, params.conv_strides, strict=True
        ):
            # "Same"-style padding so a stride-s conv maps H to H / s for even sizes.
            padding = max(kernel - stride + 1, 0) // 2
            layers += [
                nn.Conv2d(channels_in, channels, kernel, stride=stride, padding=padding),
                nn.GroupNorm(params.groupnorm_groups, channels),
                nn.ReLU(inplace=True),
            ]
            height = (height + 2 * padding - kernel) // stride + 1
            width = (width + 2 * padding - kernel) // stride + 1
            channels_in = channels
        if height < 2 or width < 2:
            raise ValueError(
                f"image {height_px}x{width_px} px: feature map {height}x{width} after the "
                "convs is too small; use fewer or smaller strides"
            )
        layers.append(nn.Conv2d(channels_in, params.num_keypoints, 1))
        self.convs = nn.Sequential(*layers)
        self.keypoints = SpatialSoftmax(height, width)
        self.output_dim = 2 * params.num_keypoints

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Float images ``(B, 3, H, W)`` in [-0.5, 0.5] → keypoints ``(B, 2K)``."""
        return self.keypoints(self.convs(images))


class ConvKeypointPolicy(ImageChunkPolicy):
    """Spatial-softmax conv encoder per camera + MLP chunk head (registered as ``conv_keypoint``).

    Args:
        spec: Policy spec.
        stats: Normalisation statistics.

    """

    Params = ConvKeypointParams
    params: ConvKeypointParams

    def build_encoder(self, image: ImageSpec) -> ImageEncoder:
        """Return a keypoint encoder for the size of ``image``."""
        return ImageEncoder(self.params, image.height_px, image.width_px)
