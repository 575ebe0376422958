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
hundreds of samples per second (see ``bench/bench_policy.py``).
"""

from __future__ import annotations

from typing import Literal, cast

import torch
from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel
from torch import nn

from r2s2r_dataset import ACTIONS_KEY

from ..normalization import NormalizationStats
from ..spec import ACTION_MASK_KEY, PolicySpec
from .base import Batch, BatchShard, Policy, draw_rows, masked_chunk_loss


class ConvKeypointParams(ConfigModel):
    """Hyper-parameters of :class:`ConvKeypointPolicy`."""

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
    shared_encoder: bool = Field(default=False, description="One encoder for every camera.")
    hidden_dims: list[int] = Field(
        default_factory=lambda: [256, 256], min_length=1, description="MLP hidden widths."
    )
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="MLP dropout probability.")
    random_shift_px: int = Field(
        default=4, ge=0, le=32, description="Max random image shift in training (0 = off)."
    )
    photometric_jitter: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Training augmentation: each image's brightness and contrast scaled by "
        "independent factors drawn from U[1 - j, 1 + j] (0 = off).",
    )
    image_standardization: bool = Field(
        default=False,
        description="Normalise each image by its own mean and standard deviation (over all "
        "pixels and channels) before the encoder, in training and inference: the encoder sees "
        "the same input whatever the global gain and offset of the image (dimmer or brighter "
        "light, exposure), as a camera's auto-exposure would give it.",
    )
    state_noise_std: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Gaussian noise added in training to the measured low-dimensional inputs "
        "(joints, belt speed, tracked object), in units of each one's normalisation scale; "
        "derived inputs (palm/object geometry) follow the noisy values (robustness to the "
        "small state errors a closed loop makes; 0 = off).",
    )
    loss: Literal["l1", "l2"] = Field(default="l1", description="Chunk regression loss.")

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


class ImageEncoder(nn.Module):
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


def images_to_float(
    images: torch.Tensor, jitter: float = 0.0, shard: BatchShard | None = None
) -> torch.Tensor:
    """uint8 ``(B, H, W, 3)`` → float ``(B, 3, H, W)`` in [-0.5, 0.5], optionally jittered.

    With ``jitter`` > 0 each image's brightness and contrast are scaled by factors from
    ``U[1 - jitter, 1 + jitter]`` (brightness first, then contrast about the image mean,
    clipped to the valid range), drawn from the global torch RNG as ``rand(2, B)`` (under DDP
    this process's columns of a draw for the global batch, :class:`BatchShard`). Both
    scalings are folded into one multiply-add on the raw pixels, and the result keeps the
    channels-last memory of the input: the unfused form (normalise, scale, subtract the
    mean, scale, add, clip, shift, each over the whole float batch) cost a quarter of a
    training step at 128 px, and a contiguous NCHW copy slows the convolutions.
    """
    floats = images.permute(0, 3, 1, 2).float()
    if jitter <= 0.0:
        return floats.mul_(1.0 / 255.0).sub_(0.5)
    batch = images.shape[0]
    draws = draw_rows(
        shard,
        batch,
        lambda n, generator: torch.rand(2, n, 1, 1, 1, device=images.device, generator=generator),
        dim=1,
    )
    factors = 1.0 + jitter * (2.0 * draws - 1.0)
    brightness, contrast = factors[0], factors[1]
    mean = floats.mean(dim=(1, 2, 3), keepdim=True) * (brightness / 255.0)
    # clip((x b / 255 - mean) c + mean) - 0.5 = clip(x (b c / 255) + mean (1 - c) - 0.5)
    scale = brightness * contrast / 255.0
    offset = mean * (1.0 - contrast) - 0.5
    return floats.mul_(scale).add_(offset).clamp_(-0.5, 0.5)


STANDARDIZATION_MIN_STD = 0.01
"""Floor of an image's standard deviation in :func:`standardize_images` (2.55 grey levels): a
uniform image stays near zero instead of amplifying its noise without bound."""


def standardize_images(images: torch.Tensor) -> torch.Tensor:
    """Each image of ``(B, C, H, W)`` minus its mean, over its standard deviation.

    Both over all pixels and channels of the image (colour ratios are kept), the deviation
    floored at :data:`STANDARDIZATION_MIN_STD`. Invariant to ``a x + b`` for ``a`` > 0 per
    image, up to the floor and the clipping of the camera's 8 bits. Keeps the memory format.
    """
    mean = images.mean(dim=(1, 2, 3), keepdim=True)
    std = images.std(dim=(1, 2, 3), keepdim=True).clamp_(min=STANDARDIZATION_MIN_STD)
    return (images - mean).div_(std)


def random_shift(
    images: torch.Tensor, pad_px: int, shard: BatchShard | None = None
) -> torch.Tensor:
    """Shift each image by a random integer offset in ``[-pad_px, pad_px]`` (edge padding).

    Images are ``(B, H, W, C)`` (channels last, any dtype: the trainer shifts the uint8
    pixels, a quarter of the bytes of floats). Uses the global torch RNG (seeded per training
    step by the trainer), one ``randint(B, 2)`` draw of (row, column) offsets (under DDP this
    process's rows of a draw for the global batch, :class:`BatchShard`).
    """
    batch, height, width, channels = images.shape
    device = images.device
    offsets = (
        draw_rows(
            shard,
            batch,
            lambda n, generator: torch.randint(
                0, 2 * pad_px + 1, (n, 2), device=device, generator=generator
            ),
        )
        - pad_px
    )
    # Columns are edge-padded by three slice copies; then every output row is one contiguous
    # run of ``width`` pixels of the padded image (its row clamped, its start column shifted),
    # gathered at once from a strided view of all runs. The gather moves whole rows: a gather
    # of single pixels (clamping rows and columns as indices) cost twice this.
    padded_width = width + 2 * pad_px
    padded = images.new_empty((batch, height, padded_width, channels))
    padded[:, :, pad_px : pad_px + width] = images
    padded[:, :, :pad_px] = images[:, :, :1]
    padded[:, :, pad_px + width :] = images[:, :, width - 1 :]
    rows = (offsets[:, 0:1] + torch.arange(height, device=device)).clamp_(0, height - 1)
    first_row = torch.arange(batch, device=device).view(batch, 1) * height
    starts = (first_row + rows) * padded_width + (offsets[:, 1:2] + pad_px)
    runs = padded.view(-1).unfold(0, width * channels, channels)
    return runs.index_select(0, starts.view(-1)).view(batch, height, width, channels)


class ConvKeypointPolicy(Policy):
    """Spatial-softmax conv encoder per camera + MLP chunk head (registered as ``conv_keypoint``).

    Args:
        spec: Policy spec.
        stats: Normalisation statistics.

    """

    Params = ConvKeypointParams

    def __init__(self, spec: PolicySpec, stats: NormalizationStats) -> None:
        super().__init__(spec, stats)
        params = cast(ConvKeypointParams, self.parse_params(spec.model.params))
        self.params = params
        sizes = {(image.height_px, image.width_px) for image in spec.images}
        if params.shared_encoder and len(sizes) > 1:
            raise ValueError(f"shared_encoder needs equal image sizes, spec has {sorted(sizes)}")
        self.encoders = nn.ModuleDict()
        for image in spec.images:
            if params.shared_encoder and self.encoders:
                continue
            self.encoders[image.key] = ImageEncoder(params, image.height_px, image.width_px)
        # Every camera contributes (x, y) per keypoint, shared encoder or not.
        features = 2 * params.num_keypoints * len(spec.images) + spec.state_dim
        layers: list[nn.Module] = []
        width_in = features
        for width in params.hidden_dims:
            layers += [nn.Linear(width_in, width), nn.ReLU(inplace=True)]
            if params.dropout > 0:
                layers.append(nn.Dropout(params.dropout))
            width_in = width
        layers.append(nn.Linear(width_in, spec.chunk_length * self.output_dim))
        self.head = nn.Sequential(*layers)

    def _prepare(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 ``(B, H, W, 3)`` → float ``(B, 3, H, W)``, augmented in training.

        In [-0.5, 0.5], or standardised per image with ``image_standardization``.
        """
        if not self.training:
            floats = images_to_float(images)
        else:
            if self.params.random_shift_px > 0:
                images = random_shift(images, self.params.random_shift_px, self.batch_shard)
            floats = images_to_float(images, self.params.photometric_jitter, self.batch_shard)
        return standardize_images(floats) if self.params.image_standardization else floats

    def predict_normalized(self, batch: Batch) -> torch.Tensor:
        """Normalised action chunk ``(B, H, A)``."""
        return self.predict_outputs(batch)[0]

    @property
    def latent_dim(self) -> int:
        """Width of :meth:`embed`: every camera's keypoints, then the normalised state."""
        return 2 * self.params.num_keypoints * len(self.spec.images) + self.spec.state_dim

    def embed(self, batch: Batch) -> torch.Tensor:
        """Return what the head reads: each camera's keypoints, then the normalised state."""
        keys = self.spec.image_keys
        if self.params.shared_encoder:
            encoder = next(iter(self.encoders.values()))
            stacked = torch.cat([self._prepare(batch[key]) for key in keys], dim=0)
            points = encoder(stacked).chunk(len(keys), dim=0)
            features = list(points)
        else:
            features = [self.encoders[key](self._prepare(batch[key])) for key in keys]
        noise_std = self.params.state_noise_std if self.training else 0.0
        features.append(self.normalized_state(batch, noise_std))
        return torch.cat(features, dim=-1)

    def outputs_from_latent(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Normalised action chunk ``(B, H, A)`` and reach offsets (or None) from :meth:`embed`."""
        out = self.head(latent).reshape(-1, self.spec.chunk_length, self.output_dim)
        actions = out[..., : self.spec.action_dim]
        return actions, (out[..., self.spec.action_dim :] if self.reach is not None else None)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Loss of a batch: ``loss`` (L1/L2 in normalised units) and ``l1_rad`` (for logs).

        With the object-relative reach, ``reach_loss`` (normalised offsets) is added to
        ``loss`` with weight 1.
        """
        predicted, offsets = self.predict_outputs(batch)
        target = self.normalize_actions(batch[ACTIONS_KEY].float())
        mask = batch[ACTION_MASK_KEY]
        loss = masked_chunk_loss(predicted, target, mask, self.params.loss, self.batch_shard)
        losses: dict[str, torch.Tensor] = {}
        if offsets is not None:
            reach = self.reach_loss(offsets, batch, self.params.loss)
            losses["reach_loss"] = reach.detach()
            loss = loss + reach
        with torch.no_grad():
            l1_rad = masked_chunk_loss(
                self.unnormalize_actions(predicted), batch[ACTIONS_KEY].float(), mask, "l1"
            )
        return {"loss": loss, "l1_rad": l1_rad, **losses}
