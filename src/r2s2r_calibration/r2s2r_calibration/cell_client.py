"""What the grounding procedure needs from a cell: :class:`CellClient`, and what it returns.

Implementations: the ROS client (:mod:`r2s2r_calibration.nodes.ros_client`), an in-process
simulated cell (:mod:`r2s2r_calibration.sim_cell_client`) and a recorded session
(:mod:`r2s2r_calibration.session_bag`). Every step takes one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_common.topics import TF_STATIC
from r2s2r_description.frames import WORLD_FRAME

from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.log import JointStateLog


class BoardOperator(Protocol):
    """The operator who holds or places the calibration board (on hardware, a person)."""

    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        """Put the board at a pose in a frame (``world``, ``flange`` or a camera frame)."""
        ...

    def remove_board(self) -> None:
        """Take the board away."""
        ...


class CellClient(Protocol):
    """What the grounding procedure needs from a cell (hardware, the twin or a recording)."""

    @property
    def source(self) -> str:
        """``live`` or a bag path (artifact provenance)."""
        ...

    @property
    def board_operator(self) -> BoardOperator | None:
        """The board operator, or None when the cell cannot show a board."""
        ...

    def now_s(self) -> float:
        """Cell time of the latest ``/joint_states`` (s)."""
        ...

    def wait_until(self, time_s: float) -> None:
        """Return once the cell clock reached ``time_s``."""
        ...

    def joint_positions(self) -> FloatArray:
        """Latest (18,) joint positions, :data:`ALL_JOINT_NAMES` order (rad)."""
        ...

    def start_joint_log(self) -> None:
        """Start logging ``/joint_states`` (and the encoder)."""
        ...

    def stop_joint_log(self) -> JointStateLog:
        """Stop logging and return the joint states."""
        ...

    def encoder_samples(self, duration_s: float) -> tuple[FloatArray, FloatArray]:
        """Record ``/belt/encoder`` for ``duration_s``: (stamps s, unwrapped angles rad)."""
        ...

    def send_trajectory(
        self,
        controller: str,
        joint_names: Sequence[str],
        times_s: FloatArray,
        positions: FloatArray,
        start_time_s: float,
    ) -> None:
        """Publish a JointTrajectory on ``/<controller>_controller/joint_trajectory``."""
        ...

    def camera_model(self, camera: str) -> CameraModel:
        """Return the camera's ``camera_info`` (nominal on an uncalibrated cell)."""
        ...

    def capture_image(self, camera: str, after_s: float | None = None) -> tuple[float, np.ndarray]:
        """First RGB frame of ``camera`` stamped at or after ``after_s`` (default: now)."""
        ...

    def capture_depth(self) -> tuple[float, npt_float32]:
        """Next head depth image: (stamp s, (H, W) float32 metres)."""
        ...

    def frame_pose(self, frame: str) -> FloatArray:
        """``T_world_frame`` of a fixed frame from ``/tf_static`` (the nominal mounts)."""
        ...

    def start_trial(self, seed: int) -> None:
        """Start a trial (objects arrive on the belt)."""
        ...

    def reset_cell(self) -> None:
        """Robot home, belt clear, idle."""
        ...

    def release_streams(self) -> None:
        """Stop receiving camera images and depth until they are asked for again."""
        ...

    def begin_step(self, step: str) -> None:
        """Mark the start of a procedure step (a session bag records it; live cells ignore it)."""
        ...


npt_float32 = np.ndarray  # a (H, W) float32 depth image


def encoder_columns(samples: Sequence[tuple[float, float]]) -> tuple[FloatArray, FloatArray]:
    """Return ``(stamps s, angles rad)`` of ``(stamp, angle)`` encoder samples, in their order."""
    if not samples:
        return np.zeros(0), np.zeros(0)
    data = np.asarray(samples)
    return data[:, 0], data[:, 1]


def pose_in_world(frame: str, parents: Mapping[str, tuple[str, FloatArray]]) -> FloatArray:
    """``T_world_frame`` composed from ``/tf_static`` (``child -> (parent, T_parent_child)``).

    Raises:
        KeyError: The frame is not connected to ``world``.

    """
    pose = np.eye(4)
    current = frame
    while current != WORLD_FRAME:
        if current not in parents:
            raise KeyError(f"frame {frame!r} is not connected to {WORLD_FRAME!r} in {TF_STATIC}")
        parent, matrix = parents[current]
        pose = matrix @ pose
        current = parent
    return pose
