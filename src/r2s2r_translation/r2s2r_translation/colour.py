"""The baseline translator: a fitted colour and tone transfer (no training).

Fitted on the colour statistics of real frames and of simulated frames (unpaired): a linear
map on RGB that carries the sim frames' mean and covariance onto the real ones' (the
Monge-Kantorovich solution between two Gaussians, Pitie & Kokaram 2007), then one monotone
look-up table per channel that matches the histograms (the tone curve). It fixes global
colour, exposure and tone, and nothing local (noise, vignetting, texture): what a lab gets
without a network.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

_BINS = 256


def _sqrtm(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def _pixels(frames: NDArray[np.uint8], limit: int = 400_000) -> NDArray[np.float64]:
    pixels = frames.reshape(-1, 3).astype(np.float64) / 255.0
    if len(pixels) > limit:
        pixels = pixels[np.random.default_rng(0).choice(len(pixels), limit, replace=False)]
    return pixels


@dataclass(frozen=True)
class ColourTransfer:
    """A fitted transfer: ``lut[c][round(255 * (matrix @ (x - sim_mean) + real_mean))]``."""

    matrix: NDArray[np.float64]
    sim_mean: NDArray[np.float64]
    real_mean: NDArray[np.float64]
    luts: NDArray[np.uint8]  # (3, 256)

    def apply(self, frames: NDArray[np.uint8]) -> NDArray[np.uint8]:
        """Translate uint8 RGB frames ``(..., 3)``."""
        x = frames.astype(np.float32) / 255.0
        offset = (self.real_mean - self.matrix @ self.sim_mean).astype(np.float32)
        mapped = x @ self.matrix.T.astype(np.float32) + offset
        index = np.clip(np.rint(mapped * 255.0), 0, 255).astype(np.intp)
        out = np.empty(frames.shape, dtype=np.uint8)
        for channel in range(3):
            out[..., channel] = self.luts[channel][index[..., channel]]
        return out

    def arrays(self) -> dict[str, NDArray]:
        """Return the transfer as named arrays (for a checkpoint)."""
        return {
            "matrix": self.matrix,
            "sim_mean": self.sim_mean,
            "real_mean": self.real_mean,
            "luts": self.luts,
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, NDArray]) -> ColourTransfer:
        """Rebuild a transfer from :meth:`arrays`."""
        return cls(
            np.asarray(arrays["matrix"], np.float64),
            np.asarray(arrays["sim_mean"], np.float64),
            np.asarray(arrays["real_mean"], np.float64),
            np.asarray(arrays["luts"], np.uint8),
        )


def fit_colour_transfer(real: NDArray[np.uint8], sim: NDArray[np.uint8]) -> ColourTransfer:
    """Fit the transfer from sim frames to real frames (any sizes, uint8 RGB).

    Raises:
        ValueError: If either set is empty.

    """
    if real.size == 0 or sim.size == 0:
        raise ValueError("fit_colour_transfer: an empty set of frames")
    a, b = _pixels(sim), _pixels(real)
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    cov_a = np.cov(a.T) + 1e-6 * np.eye(3)
    cov_b = np.cov(b.T) + 1e-6 * np.eye(3)
    root_a = _sqrtm(cov_a)
    inverse_root_a = np.linalg.inv(root_a)
    matrix = inverse_root_a @ _sqrtm(root_a @ cov_b @ root_a) @ inverse_root_a
    mapped = (a - mean_a) @ matrix.T + mean_b
    luts = np.empty((3, _BINS), dtype=np.uint8)
    levels = np.arange(_BINS)
    for channel in range(3):
        source = np.clip(np.rint(mapped[:, channel] * 255.0), 0, 255)
        target = np.clip(np.rint(b[:, channel] * 255.0), 0, 255)
        source_cdf = np.cumsum(np.bincount(source.astype(np.intp), minlength=_BINS))
        target_cdf = np.cumsum(np.bincount(target.astype(np.intp), minlength=_BINS))
        source_cdf = source_cdf / source_cdf[-1]
        target_cdf = target_cdf / target_cdf[-1]
        luts[channel] = np.clip(np.rint(np.interp(source_cdf, target_cdf, levels)), 0, 255)
    return ColourTransfer(matrix, mean_a, mean_b, luts)
