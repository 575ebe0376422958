"""A video-diffusion translator (CRAFT's approach) for a lab with a GPU: **unverified here**.

CRAFT translates simulated videos with a pretrained video diffusion model conditioned on the
sim video's edges (Wan2.1-Fun-Control). This backend is written against ``diffusers``'
``WanVACEPipeline`` (Wan2.1 VACE: a control video, optional reference images, a prompt): the
control video is the Canny edges of the rendered frames, the reference image a real frame of
the same camera (the look to take), the prompt a description of the cell. Weights come from a
folder the user gives (``--diffusion-model``, a diffusers-format copy such as
``Wan2.1-VACE-1.3B-diffusers``) and are loaded with ``local_files_only``: nothing downloads at
run time. It has never run here: no GPU and no ``diffusers`` on the development machines, and a
1.3B model on 2 CPU cores would take hours per episode. Everything around the pipeline (the
control video, the chunking into the model's frame counts, sizes, the checkpoint) runs and is
tested here with a stand-in pipeline; the pipeline itself is the lab's to verify.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from r2s2r_common.config import ConfigModel

from .frames import TranslationInputError

UNVERIFIED = "the diffusion translator is unverified (written against diffusers' WanVACEPipeline)"

PipelineCall = Callable[..., Any]
"""A loaded pipeline: ``pipe(prompt=..., video=..., reference_images=..., ...)``."""


class DiffusionSettings(ConfigModel):
    """How the video-diffusion translator runs (a lab's GPU; see the module docstring)."""

    model_path: str = Field(description="Local diffusers-format WanVACE folder (never fetched).")
    prompt: str = Field(
        default="a real photo of a robot arm with a dexterous hand over a conveyor belt "
        "carrying small objects, three sorting bins on a table, factory lighting",
        description="What the frames show.",
    )
    negative_prompt: str = Field(
        default="cartoon, rendering, CGI, blurry, distorted", description="What they must not."
    )
    num_inference_steps: int = Field(default=30, ge=1, le=500, description="Denoising steps.")
    guidance_scale: float = Field(default=5.0, ge=0.0, le=50.0, description="Text guidance.")
    conditioning_scale: float = Field(
        default=1.0, ge=0.0, le=5.0, description="Weight of the edge control."
    )
    model_px: int = Field(
        default=480, ge=16, le=2048, description="Square size the model runs at (multiple of 16)."
    )
    chunk_frames: int = Field(
        default=33, ge=1, le=257, description="Frames per call (4k + 1, the VAE's stride)."
    )
    canny_low: int = Field(default=50, ge=0, le=255, description="Canny lower threshold.")
    canny_high: int = Field(default=150, ge=0, le=255, description="Canny upper threshold.")
    seed: int = Field(default=0, ge=0, description="Noise seed of every call.")
    device: str = Field(default="cuda", description="torch device.")
    dtype: str = Field(default="bfloat16", description="torch dtype name of the weights.")


def edge_control(frames: NDArray[np.uint8], settings: DiffusionSettings) -> NDArray[np.uint8]:
    """Return the control video: Canny edges of each rendered frame, white on black RGB."""
    out = np.empty_like(frames)
    for index, frame in enumerate(frames):
        grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        edges = cv2.Canny(grey, settings.canny_low, settings.canny_high)
        out[index] = np.repeat(edges[..., None], 3, axis=2)
    return out


def chunks(total: int, size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges covering ``total`` frames in calls of ``size`` (4k + 1) frames.

    The last chunk is taken from the end backwards so every call has the model's frame count
    (frames in the overlap are taken from the later call).

    Raises:
        ValueError: ``size`` is not 4k + 1.

    """
    if size % 4 != 1:
        raise ValueError(f"chunk_frames = {size}: expected 4k + 1 (the video VAE's stride)")
    if total <= size:
        return [(0, total)]
    ranges = [(start, start + size) for start in range(0, total - size + 1, size)]
    if ranges[-1][1] < total:
        ranges.append((total - size, total))
    return ranges


def load_pipeline(settings: DiffusionSettings) -> PipelineCall:
    """Load ``WanVACEPipeline`` from ``model_path`` (local files only) onto the device.

    Raises:
        TranslationInputError: No such folder, or diffusers (or its model) not installed.

    """
    folder = Path(settings.model_path)
    if not (folder / "model_index.json").is_file():
        raise TranslationInputError(
            f"{folder}: not a diffusers model folder (no model_index.json); give a local copy of "
            "a WanVACE model (nothing is downloaded)"
        )
    try:
        import torch
        from diffusers import WanVACEPipeline  # type: ignore[import-not-found]
    except ImportError as error:
        raise TranslationInputError(
            f"{error.name} is not installed: {UNVERIFIED}; install diffusers and transformers "
            "beside a CUDA torch on the GPU machine"
        ) from None
    pipe = WanVACEPipeline.from_pretrained(
        str(folder), torch_dtype=getattr(torch, settings.dtype), local_files_only=True
    )
    return pipe.to(settings.device)  # type: ignore[no-any-return]


def translate_video(
    pipe: PipelineCall,
    frames: NDArray[np.uint8],
    reference: NDArray[np.uint8],
    settings: DiffusionSettings,
) -> NDArray[np.uint8]:
    """Translate one camera's episode ``(T, H, W, 3)`` with the pipeline, chunk by chunk.

    Args:
        pipe: :func:`load_pipeline`'s pipeline (or anything called the same way).
        frames: The rendered frames.
        reference: A real frame of the same camera (the look to take), any size.
        settings: The settings.

    Returns:
        uint8 ``(T, H, W, 3)``: the frames at their own size again.

    """
    from PIL import Image

    if settings.model_px % 16:
        raise ValueError(f"model_px = {settings.model_px}: expected a multiple of 16")
    height, width = frames.shape[1:3]
    px = settings.model_px
    control = edge_control(frames, settings)
    ref_image = Image.fromarray(cv2.resize(reference, (px, px), interpolation=cv2.INTER_CUBIC))
    out = np.empty_like(frames)
    for start, stop in chunks(len(frames), settings.chunk_frames):
        video = [
            Image.fromarray(cv2.resize(c, (px, px), interpolation=cv2.INTER_NEAREST))
            for c in control[start:stop]
        ]
        count = stop - start
        calls = count if count % 4 == 1 else count + (1 - count % 4) % 4
        video += [video[-1]] * (calls - count)  # the model takes 4k + 1 frames
        import torch

        result = pipe(
            prompt=settings.prompt,
            negative_prompt=settings.negative_prompt,
            video=video,
            reference_images=[ref_image],
            conditioning_scale=settings.conditioning_scale,
            height=px,
            width=px,
            num_frames=calls,
            num_inference_steps=settings.num_inference_steps,
            guidance_scale=settings.guidance_scale,
            generator=torch.Generator().manual_seed(settings.seed),
            output_type="np",
        )
        generated = np.asarray(result.frames[0])[:count]  # (count, px, px, 3) in [0, 1]
        for offset, frame in enumerate(generated):
            rgb = np.clip(np.rint(frame * 255.0), 0, 255).astype(np.uint8)
            out[start + offset] = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)
    return out
