"""Image encoder per camera + MLP action-chunk head: the policy shape every image model shares.

:class:`ImageChunkPolicy` owns everything but the image encoder: the augmentations of the
camera images (random shift, photometric jitter, optional per-image standardisation,
:mod:`.images`), the normalised state (joints, belt speed, tracked object, palm geometry;
:meth:`~.base.Policy.normalized_state`, with optional training noise), the latent (each
camera's features, then the state), the MLP that outputs the whole normalised action chunk at
once (action chunking, as ACT), and the L1/L2 loss over unpadded chunk steps. A model type
subclasses it with its own ``Params`` (a :class:`ChunkPolicyParams`) and
:meth:`ImageChunkPolicy.build_encoder`: the spatial-softmax keypoints of
:mod:`.conv_keypoint`, the ImageNet EfficientNet-Lite0 trunk of :mod:`.efficientnet_lite`.
"""

from __future__ import annotations

import abc
from typing import Literal, cast

import torch
from pydantic import Field
from r2s2r_common.config import ConfigModel
from torch import nn

from r2s2r_dataset import ACTIONS_KEY

from ..normalization import NormalizationStats
from ..spec import ACTION_MASK_KEY, ImageSpec, PolicySpec
from .base import Batch, Policy, masked_chunk_loss
from .images import images_to_float, random_shift, standardize_images


class ChunkPolicyParams(ConfigModel):
    """Hyper-parameters every :class:`ImageChunkPolicy` has: head, augmentation, loss."""

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


class ImageFeatureEncoder(nn.Module):
    """One camera's encoder: float images ``(B, 3, H, W)`` → features ``(B, output_dim)``."""

    output_dim: int


def chunk_head(inputs: int, hidden_dims: list[int], dropout: float, outputs: int) -> nn.Sequential:
    """Return the MLP from the latent to the flat chunk: Linear + ReLU (+ Dropout) per width."""
    layers: list[nn.Module] = []
    width_in = inputs
    for width in hidden_dims:
        layers += [nn.Linear(width_in, width), nn.ReLU(inplace=True)]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width_in = width
    layers.append(nn.Linear(width_in, outputs))
    return nn.Sequential(*layers)


class ImageChunkPolicy(Policy):
    """An encoder per camera (or one shared) + MLP chunk head (module docstring).

    Builds the encoders (:meth:`build_encoder`, in the spec's camera order) before the head,
    so the initial weights drawn from a seed do not depend on the subclass's other modules.

    Args:
        spec: Policy spec.
        stats: Normalisation statistics.

    Raises:
        ValueError: ``shared_encoder`` with cameras of different sizes.
        r2s2r_common.config.ConfigError: Invalid ``spec.model.params``.

    """

    params: ChunkPolicyParams

    def __init__(self, spec: PolicySpec, stats: NormalizationStats) -> None:
        super().__init__(spec, stats)
        self.params = cast(ChunkPolicyParams, self.parse_params(spec.model.params))
        sizes = {(image.height_px, image.width_px) for image in spec.images}
        if self.params.shared_encoder and len(sizes) > 1:
            raise ValueError(f"shared_encoder needs equal image sizes, spec has {sorted(sizes)}")
        self.encoders = nn.ModuleDict()
        for image in spec.images:
            if self.params.shared_encoder and self.encoders:
                continue
            self.encoders[image.key] = self.build_encoder(image)
        self.head = chunk_head(
            self.image_features_dim + spec.state_dim,
            self.params.hidden_dims,
            self.params.dropout,
            spec.chunk_length * self.output_dim,
        )

    @abc.abstractmethod
    def build_encoder(self, image: ImageSpec) -> ImageFeatureEncoder:
        """Return the encoder of one camera (of every camera with ``shared_encoder``).

        Called from ``__init__`` after ``self.params`` is set.
        """

    def encoder_of(self, key: str) -> ImageFeatureEncoder:
        """Return the encoder that reads camera ``key``."""
        if self.params.shared_encoder:
            return cast(ImageFeatureEncoder, next(iter(self.encoders.values())))
        return cast(ImageFeatureEncoder, self.encoders[key])

    @property
    def image_features_dim(self) -> int:
        """Width of every camera's features together (the latent before the state)."""
        return sum(self.encoder_of(key).output_dim for key in self.spec.image_keys)

    def prepare_images(self, images: torch.Tensor) -> torch.Tensor:
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
        """Width of :meth:`embed`: every camera's features, then the normalised state."""
        return self.image_features_dim + self.spec.state_dim

    def embed(self, batch: Batch) -> torch.Tensor:
        """Return what the head reads: each camera's features, then the normalised state."""
        keys = self.spec.image_keys
        if self.params.shared_encoder:
            encoder = self.encoder_of(keys[0])
            stacked = torch.cat([self.prepare_images(batch[key]) for key in keys], dim=0)
            features = list(encoder(stacked).chunk(len(keys), dim=0))
        else:
            features = [self.encoders[key](self.prepare_images(batch[key])) for key in keys]
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
