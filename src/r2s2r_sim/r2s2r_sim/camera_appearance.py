"""A real camera's look on a rendered frame: exposure, colour, noise, tone curve, codec.

A renderer gives a clean display-referred image. A real camera integrates light over its
exposure, loses light towards the corners, meters its exposure, balances white, mixes colour
channels through its colour filters, adds shot and read noise, applies a tone curve and, over
USB at these rates, compresses every frame as JPEG. None of that is removed by calibration.
:func:`apply_appearance` applies those steps, in that order, on linear light (the render
decoded with gamma 2.2), as :class:`r2s2r_world.world.CameraAppearance` sets them; the
identity appearance returns the input itself, so worlds that name none render as before.

Noise is drawn from ``noise_seed``: the backends derive it from the episode seed, the camera
and the simulated time, so the same frame of the same episode gets the same noise.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np
from numpy.typing import NDArray
from r2s2r_world.world import CameraAppearance, CameraParams

from r2s2r_sim.camera_model import blur

RENDER_GAMMA = 2.2
"""The gamma the render is decoded with to linear light (and encoded with at gamma 2.2)."""
LUMA_RGB = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)
"""Rec. 709 luma weights on linear RGB (what auto-exposure meters)."""

_TO_LINEAR = ((np.arange(256, dtype=np.float64) / 255.0) ** RENDER_GAMMA).astype(np.float32)


def colour_matrix(appearance: CameraAppearance) -> NDArray[np.float32]:
    """Return the 3x3 matrix on linear RGB: crosstalk after white balance (rows act on a pixel)."""
    c = appearance.crosstalk
    mix = np.full((3, 3), c / 2.0) + np.eye(3) * (1.0 - c - c / 2.0)
    return (mix @ np.diag(appearance.white_balance_rgb)).astype(np.float32)


@functools.lru_cache(maxsize=16)
def vignette_map(height_px: int, width_px: int, strength: float) -> NDArray[np.float32]:
    """Relative illumination ``1 - strength * (r / r_corner)**2`` per pixel, (H, W, 1)."""
    v, u = np.mgrid[0:height_px, 0:width_px].astype(np.float64)
    cy, cx = (height_px - 1) / 2.0, (width_px - 1) / 2.0
    r2 = ((u - cx) ** 2 + (v - cy) ** 2) / (cx**2 + cy**2)
    return (1.0 - strength * r2).astype(np.float32)[..., None]


def _motion_kernel(length_px: float) -> NDArray[np.float32]:
    """Return a horizontal box of ``length_px`` (fractional ends weighted), normalised."""
    whole = int(np.floor(length_px))
    taps = whole + 1 if whole % 2 == 0 else whole + 2
    kernel = np.zeros(taps, dtype=np.float64)
    centre = taps // 2
    half = length_px / 2.0
    for index in range(taps):
        offset = abs(index - centre)
        kernel[index] = np.clip(half + 0.5 - offset, 0.0, 1.0)
    kernel /= kernel.sum()
    return kernel.astype(np.float32)[None, :]


def jpeg_round_trip(image: NDArray[np.uint8], quality: int) -> NDArray[np.uint8]:
    """Encode an RGB image as JPEG at ``quality`` and decode it (what MJPEG transport does)."""
    ok, encoded = cv2.imencode(
        ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    )
    if not ok:
        raise RuntimeError("cv2.imencode failed to encode a JPEG frame")
    decoded = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
    if decoded is None:
        raise RuntimeError("cv2.imdecode failed to decode a JPEG frame")
    return np.ascontiguousarray(cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB), dtype=np.uint8)


def apply_appearance(
    image: NDArray[np.uint8], appearance: CameraAppearance, noise_seed: int
) -> NDArray[np.uint8]:
    """Give a rendered RGB frame (H, W, 3) a real camera's look.

    Args:
        image: The render, warped and blurred (uint8 RGB).
        appearance: The camera's appearance; the identity returns ``image`` itself.
        noise_seed: Seed of this frame's noise (``numpy.random.default_rng``).

    Returns:
        The frame the camera delivers, uint8 RGB of the same size.

    Raises:
        ValueError: If the image is not (H, W, 3) uint8.

    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 3) uint8 RGB image, got {image.shape} {image.dtype}")
    if appearance.is_identity():
        return image
    linear = _TO_LINEAR[image]
    if appearance.motion_blur_px > 0.0:
        kernel = _motion_kernel(appearance.motion_blur_px)
        blurred = cv2.filter2D(linear, -1, kernel, borderType=cv2.BORDER_REPLICATE)
        linear = np.asarray(blurred, dtype=np.float32)
    if appearance.vignetting > 0.0:
        linear = linear * vignette_map(image.shape[0], image.shape[1], appearance.vignetting)
    gain = 2.0**appearance.exposure_ev
    if appearance.auto_exposure > 0.0:
        mean_luma = max(float(np.mean(linear @ LUMA_RGB)) * gain, 1e-4)
        gain *= (appearance.auto_exposure_target / mean_luma) ** appearance.auto_exposure
    linear = (linear @ (colour_matrix(appearance).T * np.float32(gain))).astype(np.float32)
    if appearance.shot_noise > 0.0 or appearance.read_noise > 0.0:
        rng = np.random.default_rng(int(noise_seed) & 0xFFFFFFFFFFFFFFFF)
        variance = appearance.shot_noise**2 * np.maximum(linear, 0.0) + appearance.read_noise**2
        noise = np.sqrt(variance) * rng.standard_normal(linear.shape, dtype=np.float32)
        linear = (linear + noise).astype(np.float32)
    encoded = np.clip(linear, 0.0, 1.0) ** (1.0 / appearance.gamma)
    encoded = appearance.black_level + (1.0 - appearance.black_level) * encoded
    out = np.clip(np.rint(encoded * 255.0), 0, 255).astype(np.uint8)
    if appearance.jpeg_quality > 0:
        out = jpeg_round_trip(out, appearance.jpeg_quality)
    return out


def frame_noise_seed(episode_seed: int, camera_index: int, time_s: float) -> int:
    """Return the noise seed of one frame: the episode's seed, the camera and the simulated time."""
    sequence = np.random.SeedSequence(
        [int(episode_seed) & 0xFFFFFFFF, camera_index, round(time_s * 1e6)]
    )
    return int(sequence.generate_state(1, np.uint64)[0])


def camera_image(
    warped: NDArray[np.uint8],
    params: CameraParams,
    camera_index: int,
    episode_seed: int,
    time_s: float,
) -> NDArray[np.uint8]:
    """Return a camera's frame from its render warped to its intrinsics: blur, then its look.

    Every backend finishes its RGB frames here, so a world's cameras look the same whichever
    simulator renders them.

    Args:
        warped: The render warped to the camera's intrinsics and distortion (uint8 RGB).
        params: The camera (blur and appearance).
        camera_index: Which camera (its place in the backend's camera list), for the noise.
        episode_seed: The episode's seed, for the noise.
        time_s: Simulated time of the frame, for the noise.

    """
    image = blur(np.ascontiguousarray(warped, dtype=np.uint8), params.blur_sigma_px)
    if params.appearance.is_identity():
        return image
    seed = frame_noise_seed(episode_seed, camera_index, time_s)
    return apply_appearance(image, params.appearance, seed)
