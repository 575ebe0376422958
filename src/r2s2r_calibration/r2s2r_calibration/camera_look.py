"""What grounding can measure of a camera's look from the board views it already takes.

The calibration board is printed black on white: its white squares are a neutral reference, as
a photographer's grey card is. Their colour in the camera's frames gives the camera's white
balance (with the light's colour, which the simulator's white light does not have either):
the per-channel gains, relative to green, that make the simulator's white render as the
camera's white does (decoded with the simulator's gamma 2.2, so the grounded simulator shows the
same cast). Sampled at each visible white square's centre, far enough from its edges that the
calibrated blur does not mix in black, over every calibration view.

What these views cannot give, and grounding leaves at the simulator's identity: exposure and
auto-exposure (the board's absolute brightness depends on the light, not only the camera),
the tone curve and black level (two reflectances, not a grey ramp), sensor noise (one frame per
pose: no repeated frames of a still scene), vignetting (would need the board at many image
positions at one distance), motion blur and compression. :data:`NOT_MEASURED` says so in the
artifact.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.intrinsics import ChessboardConfig

NOT_MEASURED: tuple[str, ...] = (
    "exposure and auto-exposure (the board's brightness depends on the light)",
    "tone curve and black level (two reflectances, no grey ramp)",
    "sensor noise (no repeated frames of a still scene)",
    "vignetting (the board at one distance, few image positions)",
    "motion blur and compression",
)
"""What a camera's look has that the board views do not measure (written into the artifact)."""
RENDER_GAMMA = 2.2
MIN_SQUARE_PX = 6.0
"""A square is sampled only when it spans at least this many pixels (its centre is then clear
of the blurred edges)."""
MIN_SQUARES = 20
"""Fewest white-square samples for an estimate."""


@dataclass(frozen=True)
class WhiteBalance:
    """Gains on linear RGB relative to green, their spread and how many squares gave them."""

    gains_rgb: tuple[float, float, float]
    std_rgb: tuple[float, float, float]
    samples: int

    def is_neutral(self, tolerance: float) -> bool:
        """Return True when every gain is within ``tolerance`` (and 2 sigma) of 1."""
        return all(
            abs(gain - 1.0) <= max(tolerance, 2.0 * std)
            for gain, std in zip(self.gains_rgb, self.std_rgb, strict=True)
        )


def _white_square_centres(board: ChessboardConfig) -> FloatArray:
    """Centres (board frame, m) of the white squares; the top-left square is black."""
    length = board.square_length_m
    return np.array(
        [
            [(i + 0.5) * length, (j + 0.5) * length, 0.0]
            for j in range(board.squares_y)
            for i in range(board.squares_x)
            if (i + j) % 2 == 1
        ]
    )


def estimate_white_balance(
    board: ChessboardConfig,
    images: list[npt.NDArray[np.uint8]],
    board_poses: list[FloatArray],
    camera_matrix: FloatArray,
    distortion: FloatArray,
) -> WhiteBalance:
    """Estimate the camera's white balance from colour views of the board (RGB, uint8).

    Raises:
        CalibrationError: Grey images, or fewer than :data:`MIN_SQUARES` usable white squares.

    """
    if len(images) != len(board_poses):
        raise ValueError(f"{len(images)} images and {len(board_poses)} board poses")
    centres = _white_square_centres(board)
    half = 0.5 * board.square_length_m
    ratios: list[npt.NDArray[np.float64]] = []
    for image, pose in zip(images, board_poses, strict=True):
        if image.ndim != 3 or image.shape[2] != 3:
            raise CalibrationError("white balance needs colour (RGB) views of the board")
        rvec = cv2.Rodrigues(np.asarray(pose[:3, :3], dtype=float))[0]
        tvec = np.asarray(pose[:3, 3], dtype=float)
        corners = np.concatenate([centres, centres + np.array([half, 0.0, 0.0])])
        projected = cv2.projectPoints(corners, rvec, tvec, camera_matrix, distortion)[0]
        pixels = projected.reshape(2, -1, 2)
        sizes = 2.0 * np.linalg.norm(pixels[1] - pixels[0], axis=1)
        height, width = image.shape[:2]
        linear = (image.astype(np.float64) / 255.0) ** RENDER_GAMMA
        for (u, v), size in zip(pixels[0], sizes, strict=True):
            if size < MIN_SQUARE_PX or not (1 <= u < width - 2 and 1 <= v < height - 2):
                continue
            row, column = int(np.rint(v)), int(np.rint(u))
            patch = linear[row - 1 : row + 2, column - 1 : column + 2]
            rgb = patch.reshape(-1, 3).mean(axis=0)
            if rgb[1] <= 0.02 or rgb.max() >= 0.98:  # too dark to tell, or clipped
                continue
            ratios.append(rgb / rgb[1])
    if len(ratios) < MIN_SQUARES:
        raise CalibrationError(
            f"white balance: {len(ratios)} usable white squares (at least {MIN_SQUARES}: the "
            f"board's squares must span {MIN_SQUARE_PX:g} px or more and not clip)"
        )
    stacked = np.stack(ratios)
    gains = np.median(stacked, axis=0)
    spread = 1.4826 * np.median(np.abs(stacked - gains), axis=0) / np.sqrt(len(stacked))
    return WhiteBalance(
        (float(gains[0]), 1.0, float(gains[2])),
        (float(spread[0]), 0.0, float(spread[2])),
        len(stacked),
    )
