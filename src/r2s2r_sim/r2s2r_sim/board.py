"""The operator's calibration board in the simulator: its print, its MuJoCo body, its frames.

On hardware a person holds a printed chessboard in front of the cameras or clamps it to the
hand; in the twin the operator is :meth:`r2s2r_sim.cell_runtime.SimCell.place_board`, and the
board is a textured mocap box added to the scene by :func:`board_scene_extra`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.cameras import HAND, HEAD
from r2s2r_description.frames import PALM_LINK, WORLD_FRAME

from r2s2r_sim.backend import FloatArray

BOARD_BODY = "operator_calibration_board"
"""MuJoCo mocap body of the operator's calibration board."""

BOARD_FRAMES_ATTACHED: tuple[str, ...] = ("flange", PALM_LINK)
"""Board frames that move with the robot (the board is clamped to the hand)."""

BOARD_FRAMES_PLACED: tuple[str, ...] = (
    WORLD_FRAME,
    HEAD.optical_frame,
    HAND.optical_frame,
)
"""Board frames where the operator puts the board down (it stays put in the world)."""


class OperatorBoardConfig(ConfigModel):
    """The printed chessboard the twin's operator holds or places (a plain chessboard).

    Board frame (OpenCV's object-point convention): origin at the outer corner of the first
    square, x along ``squares_x``, y along ``squares_y``, z into the board (the printed face
    looks along -z). Inner corner (row i, column j) is at ``((j + 1) s, (i + 1) s, 0)``.
    """

    squares_x: int = Field(default=7, ge=3, le=32, description="Squares along the board x.")
    squares_y: int = Field(default=6, ge=3, le=32, description="Squares along the board y.")
    square_length_m: float = Field(
        default=0.04, gt=0.0, le=0.5, description="Printed side of one square (m)."
    )
    margin_squares: float = Field(
        default=0.5, ge=0.1, le=5.0, description="White margin around the squares (squares)."
    )
    thickness_m: float = Field(default=0.004, gt=0.0, le=0.05, description="Board thickness.")
    texels_per_square: int = Field(
        default=64, ge=8, le=512, description="Texture resolution of one square."
    )


def board_texture(config: OperatorBoardConfig) -> npt.NDArray[np.uint8]:
    """Grey texture of the printed board: squares (black where row + column is even), margin."""
    texels = config.texels_per_square
    rows = np.arange(config.squares_y * texels) // texels
    cols = np.arange(config.squares_x * texels) // texels
    squares = np.where((rows[:, None] + cols[None, :]) % 2 == 0, 0, 255).astype(np.uint8)
    margin = round(config.margin_squares * texels)
    return np.pad(squares, margin, constant_values=255)


def board_scene_extra(config: OperatorBoardConfig) -> Callable[[Any], None]:
    """Return a scene extra (``MujocoBackend(scene_extras=...)``) adding the board (mocap).

    The board is a thin textured box without collisions, parked under the floor until placed.
    """

    def add(spec: Any) -> None:
        import mujoco

        texture = board_texture(config)
        tex = spec.add_texture()
        tex.name = f"{BOARD_BODY}_texture"
        tex.type = mujoco.mjtTexture.mjTEXTURE_2D
        tex.height, tex.width = texture.shape
        tex.nchannel = 3
        tex.data = np.repeat(texture[:, :, None], 3, axis=2).tobytes()
        material = spec.add_material()
        material.name = f"{BOARD_BODY}_material"
        material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
        material.texuniform = False
        material.texrepeat = [1.0, 1.0]
        body = spec.worldbody.add_body()
        body.name = BOARD_BODY
        body.mocap = True
        body.pos = [0.0, 0.0, -2.0]
        geom = body.add_geom()
        geom.name = f"{BOARD_BODY}_geom"
        geom.type = mujoco.mjtGeom.mjGEOM_BOX
        margin = config.margin_squares * config.square_length_m
        geom.size = [
            0.5 * config.squares_x * config.square_length_m + margin,
            0.5 * config.squares_y * config.square_length_m + margin,
            0.5 * config.thickness_m,
        ]
        geom.material = material.name
        geom.rgba = [1.0, 1.0, 1.0, 1.0]
        geom.contype, geom.conaffinity = 0, 0

    return add


def board_body_from_board(config: OperatorBoardConfig) -> FloatArray:
    """``T_body_board``: the board frame in the box body (printed face = the box's +z face)."""
    pose = np.diag([1.0, -1.0, -1.0, 1.0])
    pose[:3, 3] = (
        -0.5 * config.squares_x * config.square_length_m,
        0.5 * config.squares_y * config.square_length_m,
        0.5 * config.thickness_m,
    )
    return pose
