"""Frame post-processing between a backend and the published image: colour and size."""

from __future__ import annotations

import cv2
import numpy as np
from r2s2r_common.image_conversion import ImageConversionError

_COLOUR_CONVERSIONS: dict[tuple[str, str], int] = {
    ("bgr8", "rgb8"): cv2.COLOR_BGR2RGB,
    ("rgb8", "bgr8"): cv2.COLOR_RGB2BGR,
    ("bgr8", "mono8"): cv2.COLOR_BGR2GRAY,
    ("rgb8", "mono8"): cv2.COLOR_RGB2GRAY,
    ("mono8", "rgb8"): cv2.COLOR_GRAY2RGB,
    ("mono8", "bgr8"): cv2.COLOR_GRAY2BGR,
}


def convert_encoding(frame: np.ndarray, source: str, target: str) -> np.ndarray:
    """Convert a frame between colour encodings.

    Depth encodings (16UC1, 32FC1) only pass through unchanged; converting colour to depth or
    between depth types would change the meaning of the values, so it is an error.

    Raises:
        ImageConversionError: If there is no meaningful conversion from ``source`` to ``target``.

    """
    if source == target:
        return frame
    code = _COLOUR_CONVERSIONS.get((source, target))
    if code is None:
        raise ImageConversionError(
            f"encoding: cannot convert frames from {source!r} to {target!r} "
            f"(colour conversions only among rgb8, bgr8, mono8)"
        )
    return cv2.cvtColor(frame, code)


def frame_encoding(frame: np.ndarray, colour_encoding: str = "bgr8") -> str:
    """Infer the encoding of an OpenCV frame from its shape and dtype.

    Args:
        frame: Frame as returned by OpenCV.
        colour_encoding: Encoding of 3-channel uint8 frames (OpenCV gives bgr8).

    Raises:
        ImageConversionError: For layouts without a supported encoding.

    """
    if frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3:
        return colour_encoding
    single = frame.ndim == 2 or (frame.ndim == 3 and frame.shape[2] == 1)
    if single and frame.dtype == np.uint8:
        return "mono8"
    if single and frame.dtype == np.uint16:
        return "16UC1"
    if single and frame.dtype == np.float32:
        return "32FC1"
    raise ImageConversionError(
        f"frame: shape {frame.shape} dtype {frame.dtype} has no supported encoding"
    )


def resize_frame(frame: np.ndarray, width_px: int, height_px: int, encoding: str) -> np.ndarray:
    """Resize a frame; depth is resized with nearest neighbour so no depth is invented."""
    if frame.shape[1] == width_px and frame.shape[0] == height_px:
        return frame
    if encoding in ("16UC1", "32FC1"):
        interpolation = cv2.INTER_NEAREST
    elif width_px < frame.shape[1]:
        interpolation = cv2.INTER_AREA
    else:
        interpolation = cv2.INTER_LINEAR
    return cv2.resize(frame, (width_px, height_px), interpolation=interpolation)
