"""What a frame shows, not how a camera renders it: the structure a translator reads.

CRAFT conditions its video model on edges of the simulated video; here the structure is four
channels per pixel, each invariant to what a camera does to every pixel alike:

- per channel, the smoothed intensity equalised with its *domain's* histogram (the real
  frames a translator trains on; the simulated dataset it translates): a pixel's quantile
  among its domain's pixels. Any monotone per-channel response (exposure, white balance,
  gamma and tone curve, black level) leaves it unchanged, while frames of one domain keep
  their differences (equalising each frame by itself would lose what colour a thing is when
  the rest of the frame changes);
- the gradient magnitude of the equalised luma (the edges).

A small Gaussian smooths the frame first, so sensor noise and codec blocks do not pass as
structure. A rendered frame and a real frame of the same state give close structures; a
translator trained to map a real frame's structure back to that frame (self-supervised, real
frames only) then gives a sim frame the real camera's look.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

STRUCTURE_CHANNELS = 4
"""Channels of :func:`structure_features`: standardised log R, G, B, edges."""
SMOOTH_SIGMA_PX = 0.8
"""Gaussian smoothing before the features, in pixels of the working size."""


@dataclass(frozen=True)
class StructureStats:
    """A domain's per-channel cumulative histogram of smoothed intensity, (3, 256) in [0, 1]."""

    cdf: NDArray[np.float32]

    def digest(self) -> str:
        """SHA-256 of the table (what a translated dataset records)."""
        return hashlib.sha256(np.ascontiguousarray(self.cdf, np.float32).tobytes()).hexdigest()


def _check(frames: NDArray[np.uint8]) -> None:
    if frames.ndim != 4 or frames.shape[3] != 3 or frames.dtype != np.uint8 or len(frames) == 0:
        raise ValueError(f"expected uint8 (N, H, W, 3) frames, got {frames.dtype} {frames.shape}")


def _smooth(frame: NDArray[np.uint8]) -> NDArray[np.uint8]:
    return np.asarray(cv2.GaussianBlur(frame, (0, 0), SMOOTH_SIGMA_PX), dtype=np.uint8)


def structure_statistics(frames: NDArray[np.uint8]) -> StructureStats:
    """Return the domain statistics of uint8 RGB frames ``(N, H, W, 3)``."""
    _check(frames)
    smooth = np.stack([_smooth(frame) for frame in frames]).reshape(-1, 3)
    cdf = np.empty((3, 256), dtype=np.float32)
    for channel in range(3):
        counts = np.bincount(smooth[:, channel], minlength=256).astype(np.float64)
        # Mid-rank quantiles: a level's pixels sit at the middle of their share.
        cdf[channel] = (np.cumsum(counts) - 0.5 * counts) / counts.sum()
    return StructureStats(cdf)


def structure_features(
    frames: NDArray[np.uint8], stats: StructureStats | None = None
) -> NDArray[np.float32]:
    """Return the structure of uint8 RGB frames ``(N, H, W, 3)`` as float32 ``(N, 4, H, W)``.

    Args:
        frames: The frames.
        stats: Their domain's statistics (:func:`structure_statistics`); None: of ``frames``.

    Raises:
        ValueError: If the frames are not uint8 ``(N, H, W, 3)``.

    """
    _check(frames)
    cdf = (stats or structure_statistics(frames)).cdf
    n, h, w, _ = frames.shape
    out = np.empty((n, STRUCTURE_CHANNELS, h, w), dtype=np.float32)
    for index, frame in enumerate(frames):
        smooth = _smooth(frame)
        for channel in range(3):
            out[index, channel] = cdf[channel][smooth[..., channel]] * 2.0 - 1.0
        luma = out[index, :3].mean(axis=0)
        gx = cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3)
        gy = cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3)
        out[index, 3] = np.sqrt(gx * gx + gy * gy)
    return out
