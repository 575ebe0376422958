"""Camera images into a model: uint8 to float, training augmentations, standardisation.

Shared by the image-chunk policies (:mod:`.chunk_policy`): every encoder reads the floats
:func:`images_to_float` makes (``[-0.5, 0.5]``, channels first, channels-last memory), shifted
by :func:`random_shift` and jittered in training, optionally :func:`standardize_images`.
"""

from __future__ import annotations

import torch

from .base import BatchShard, draw_rows


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
