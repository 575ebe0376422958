"""A :class:`~r2s2r_calibration.cell_client.CellClient` over an in-process simulated cell.

It serves a :class:`r2s2r_sim.cell_runtime.SimCell` exactly as the real twin node publishes it
(nominal ``camera_info`` and ``/tf_static``, joint states every control period, encoder at its
rate, head depth on the camera's schedule, commands with a future start stamp), without ROS and
as fast as the CPU allows. The tests and the benchmark build the cell; this module never reads
a world file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_sim.cell_runtime import SimCell

from r2s2r_calibration.cell_client import (
    BoardOperator,
    encoder_columns,
    pose_in_world,
)
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.log import JointStateLog


class SimCellClient:
    """Serve a :class:`SimCell` to the grounding procedure.

    Args:
        cell: The cell (the client steps it; nothing else should).

    """

    def __init__(self, cell: SimCell):
        self.cell = cell
        self._logging = False
        self._log_t: list[float] = []
        self._log_q: list[FloatArray] = []
        self._log_v: list[FloatArray] = []
        self._encoder: list[tuple[float, float]] = []
        self._depth: list[tuple[float, np.ndarray]] = []
        self._frames: dict[str, tuple[float, np.ndarray]] = {}
        self._positions = cell.backend.joint_positions()

    @property
    def source(self) -> str:
        """Provenance source."""
        return "live"

    @property
    def board_operator(self) -> BoardOperator | None:
        """The cell's operator when the cell has a calibration board (``SimCell(board=...)``)."""
        return _SimBoardOperator(self.cell) if self.cell.board is not None else None

    def _step(self) -> None:
        step = self.cell.step_control()
        self._positions = step.joint_positions
        if self._logging:
            self._log_t.append(step.time_s)
            self._log_q.append(step.joint_positions)
            self._log_v.append(step.joint_velocities)
        if step.encoder_angle_rad is not None:
            self._encoder.append((step.time_s, step.encoder_angle_rad))
        for frame in step.frames:
            self._frames[frame.camera_name] = (frame.time_s, frame.rgb)
            if frame.depth_m is not None:
                self._depth = [(frame.time_s, frame.depth_m)]

    def now_s(self) -> float:
        """Cell time (s)."""
        return self.cell.time_s

    def wait_until(self, time_s: float) -> None:
        """Step the cell until its clock reaches ``time_s``."""
        while self.cell.time_s < time_s - 1e-9:
            self._step()

    def joint_positions(self) -> FloatArray:
        """Latest joint positions (rad)."""
        return np.asarray(self._positions, dtype=float).copy()

    def start_joint_log(self) -> None:
        """Start logging joint states."""
        self._logging = True
        self._log_t, self._log_q, self._log_v = [], [], []

    def stop_joint_log(self) -> JointStateLog:
        """Stop logging; return the log."""
        self._logging = False
        return JointStateLog(
            np.asarray(self._log_t), np.asarray(self._log_q), np.asarray(self._log_v)
        )

    def encoder_samples(self, duration_s: float) -> tuple[FloatArray, FloatArray]:
        """Return the encoder samples gathered since the last call plus ``duration_s`` more."""
        self.wait_until(self.cell.time_s + duration_s)
        samples, self._encoder = self._encoder, []
        return encoder_columns(samples)

    def send_trajectory(
        self,
        controller: str,
        joint_names: Sequence[str],
        times_s: FloatArray,
        positions: FloatArray,
        start_time_s: float,
    ) -> None:
        """Command a controller (start at ``start_time_s`` on the cell clock)."""
        self.cell.command(controller, joint_names, times_s, positions, None, start_time_s)

    def camera_model(self, camera: str) -> CameraModel:
        """Return the published (nominal) calibration."""
        return CameraModel.from_calibration(self.cell.camera_calibration(camera))

    def capture_image(self, camera: str, after_s: float | None = None) -> tuple[float, np.ndarray]:
        """Step until ``camera`` captured a frame at or after ``after_s`` (default: now)."""
        after = self.cell.time_s + 1e-9 if after_s is None else after_s
        while camera not in self._frames or self._frames[camera][0] < after - 1e-9:
            self._step()
        return self._frames[camera]

    def begin_step(self, step: str) -> None:
        """Mark the start of a procedure step: nothing to do on a live cell."""

    def release_streams(self) -> None:
        """Drop the buffered camera frames (a new capture waits for a new frame)."""
        self._frames = {}
        self._depth = []

    def capture_depth(self) -> tuple[float, np.ndarray]:
        """Step until the next head depth frame."""
        self._depth = []
        while not self._depth:
            self._step()
        return self._depth[0]

    def frame_pose(self, frame: str) -> FloatArray:
        """``T_world_frame`` composed from the published static transforms."""
        parents = {}
        for transform in self.cell.static_transforms():
            matrix = _matrix(transform.translation_m, transform.quat_wxyz)
            parents[transform.child] = (transform.parent, matrix)
        return pose_in_world(frame, parents)

    def start_trial(self, seed: int) -> None:
        """Start a trial."""
        self.cell.start_trial(seed)

    def reset_cell(self) -> None:
        """Reset the cell to idle."""
        self.cell.reset()


class _SimBoardOperator:
    """The in-process cell's operator: places the board directly."""

    def __init__(self, cell: SimCell):
        self.cell = cell

    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        """Put the board at a pose in a frame."""
        self.cell.place_board(frame, T_frame_board)

    def remove_board(self) -> None:
        """Take the board away."""
        self.cell.remove_board()


def _matrix(translation: Sequence[float], quat_wxyz: Sequence[float]) -> FloatArray:
    w, x, y, z = quat_wxyz
    rotation = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    pose = np.eye(4)
    pose[:3, :3] = rotation
    pose[:3, 3] = translation
    return pose
