"""A running cell, without ROS: the simulator served the way a real cell serves its sensors.

:class:`SimCell` owns a :class:`~r2s2r_sim.backend.SimBackend`, the world it simulates, the
nominal world it *publishes* (datasheet intrinsics, CAD mounts) and the current trial. It
advances time in fixed control periods (:meth:`SimCell.step_control`) and reports what became
due in that period: joint state, belt encoder angle, camera frames on each camera's schedule and
a trial outcome when one was just decided. Trajectory commands (:meth:`SimCell.command`) are
validated like ros2_control's joint_trajectory_controller would; a bad one is rejected with a
reason and counted, and the robot keeps doing what it did.

Around it: :mod:`r2s2r_sim.pacing` (capture schedules, pacing to the wall clock, costs),
:mod:`r2s2r_sim.published` (the nominal camera_info and mounts a cell publishes),
:mod:`r2s2r_sim.board` (the operator's calibration board) and
:mod:`r2s2r_sim.nodes.cell_server` (serving a cell over ROS).

The real twin node serves a :class:`SimCell` built from the hidden twin world; the sim bridge's
generation mode serves one built from the nominal or a grounded world. Cell time is monotonic
across trials (the backend restarts at zero on every reset; the cell adds an offset), and so is
the encoder angle.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from pydantic import Field
from r2s2r_common.camera_info import CameraCalibration
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_description.cameras import CAMERA_NAMES, HEAD
from r2s2r_description.controllers import CONTROLLER_JOINTS
from r2s2r_description.frames import WORLD_FRAME
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.transforms import matrix_to_quat, quat_multiply
from r2s2r_world.world import WorldParams, apply_shift, camera_params

from r2s2r_sim.backend import FloatArray, SimBackend, belt_encoder_angle_rad
from r2s2r_sim.board import (
    BOARD_BODY,
    BOARD_FRAMES_ATTACHED,
    BOARD_FRAMES_PLACED,
    OperatorBoardConfig,
    board_body_from_board,
)
from r2s2r_sim.controllers import TrajectoryError, make_trajectory
from r2s2r_sim.pacing import CostAccount, RateSchedule
from r2s2r_sim.published import (
    StaticTransform,
    camera_calibration,
    static_transforms,
)
from r2s2r_sim.task import TrialRunner, sample_trial

NOMINAL_CONDITIONS: tuple[str, ...] = ("", "nominal")
"""Trial conditions that mean "the world as it is" (no evaluation shift)."""


class CommandRejected(TrajectoryError):  # noqa: N818 (named for what it is, as a result)
    """A trajectory command was refused (it is counted; the robot keeps its current motion)."""


class TrialRequestError(ValueError):
    """A trial cannot start: unknown condition or a seed out of range."""


class TrialState(StrEnum):
    """What the cell is doing."""

    IDLE = "idle"  # robot home or holding, belt running, no objects
    RUNNING = "running"  # a trial is being played and judged
    FINISHED = "finished"  # the last trial's outcome is decided; the cell keeps running


class CellConfig(ConfigModel):
    """How a :class:`SimCell` serves its streams."""

    encoder_rate_hz: float = Field(
        default=100.0, gt=0.0, le=5000.0, description="Belt encoder publishing rate."
    )
    render_cameras: bool = Field(
        default=True,
        description="Render camera frames when due (off: a cell without cameras, e.g. a "
        "backend built with rendering disabled for a kinematic mirror or tests).",
    )
    render_depth: bool = Field(
        default=True, description="Render registered depth with every head camera frame."
    )


@dataclass(frozen=True)
class CameraFrame:
    """One capture of a camera.

    Attributes:
        camera_name: ``head_camera`` or ``hand_camera``.
        time_s: Cell time of the capture.
        rgb: (H, W, 3) uint8 image with the simulated world's intrinsics, distortion and blur.
        depth_m: (H, W) float32 depth in metres (0 = no return), head camera only, else None.

    """

    camera_name: str
    time_s: float
    rgb: np.ndarray
    depth_m: np.ndarray | None = None


@dataclass(frozen=True)
class TrialResult:
    """The operator's judgement of a finished trial.

    Attributes:
        trial_id: Id returned by :meth:`SimCell.start_trial`.
        seed: Trial seed.
        condition: Condition it ran under ('' for nominal).
        object_type: Object type (several joined by ``,``).
        success: Every object at rest in its own bin.
        reason: ``success`` or the failure reason.
        duration_s: Simulated time from trial start to the decision.
        time_s: Cell time of the decision.

    """

    trial_id: int
    seed: int
    condition: str
    object_type: str
    success: bool
    reason: str
    duration_s: float
    time_s: float


@dataclass(frozen=True)
class TrackedObject:
    """True state of an object in the scene, in the robot's ``base_link`` (the twin's truth).

    Attributes:
        track_id: Index of the object in its trial.
        object_type: Its type name.
        position_m: (3,) centre in ``base_link``.
        quat_wxyz: (4,) orientation in ``base_link``.
        linear_velocity_mps: (3,) velocity in ``base_link`` axes.

    """

    track_id: int
    object_type: str
    position_m: FloatArray
    quat_wxyz: FloatArray
    linear_velocity_mps: FloatArray


@dataclass(frozen=True)
class ControlStep:
    """What one control period produced.

    Attributes:
        time_s: Cell time at the end of the period.
        joint_positions: (18,) rad, :data:`ALL_JOINT_NAMES` order.
        joint_velocities: (18,) rad/s.
        encoder_angle_rad: Unwrapped roller angle when the encoder is due, else None.
        frames: Camera captures due in this period.
        outcome: The trial's result if it was decided in this period.

    """

    time_s: float
    joint_positions: FloatArray
    joint_velocities: FloatArray
    encoder_angle_rad: float | None
    frames: tuple[CameraFrame, ...] = ()
    outcome: TrialResult | None = None


@dataclass
class _Trial:
    trial_id: int
    seed: int
    condition: str
    runner: TrialRunner
    result: TrialResult | None = None


@dataclass
class _Counters:
    accepted: int = 0
    rejected: int = 0
    last_rejection: str = ""
    trials_started: int = 0
    trials_finished: int = 0
    trials_aborted: int = 0


class SimCell:
    """The simulated cell served in control periods (see the module docstring).

    Args:
        backend: The simulator (a fresh one; the cell resets it).
        world: The world simulated (the twin's hidden truth, or a nominal/grounded world).
        nominal_world: The world the cell *publishes* (camera_info, ``/tf_static``).
        config: Stream settings.
        seed: Seed of the idle cell's reset.
        board: The operator's calibration board; the backend must then have been built with
            :func:`r2s2r_sim.board.board_scene_extra` of the same board and offer
            ``set_mocap_pose``.

    """

    def __init__(
        self,
        backend: SimBackend,
        world: WorldParams,
        nominal_world: WorldParams,
        config: CellConfig | None = None,
        seed: int = 0,
        board: OperatorBoardConfig | None = None,
    ):
        self.backend = backend
        self.board = board
        self._board_placement: tuple[str, FloatArray] | None = None
        if board is not None and not callable(getattr(backend, "set_mocap_pose", None)):
            raise ValueError(
                f"board = {board}: the backend {type(backend).__name__} cannot show a board "
                "(expected a MujocoBackend built with board_scene_extra)"
            )
        self.base_world = world
        self.nominal_world = nominal_world
        self.config = config or CellConfig()
        self.costs = CostAccount()
        self.counters = _Counters()
        self._world = world
        self._trial: _Trial | None = None
        self._next_trial_id = 1
        self._time_offset_s = 0.0
        self._encoder_offset_rad = 0.0
        self._camera_schedules = {
            name: RateSchedule(camera_params(world, name).rate_hz) for name in CAMERA_NAMES
        }
        self._encoder_schedule = RateSchedule(self.config.encoder_rate_hz)
        self._base_cache: tuple[WorldParams, FloatArray, FloatArray, FloatArray] | None = None
        self.camera_demand: dict[str, bool] = dict.fromkeys(CAMERA_NAMES, True)
        """Per camera: render when due (a server turns a camera off while nobody watches it)."""
        self.depth_demand = True
        """Render head depth with head frames (when ``config.render_depth`` is on too)."""
        self.backend.reset(world, seed, ())

    # -- time and state ---------------------------------------------------------------------
    @property
    def world(self) -> WorldParams:
        """The world in effect (the base world, or its shifted version during a trial)."""
        return self._world

    @property
    def time_s(self) -> float:
        """Cell time: monotonic across trials and resets."""
        return self._time_offset_s + self.backend.time_s

    @property
    def control_period_s(self) -> float:
        """Simulated seconds per :meth:`step_control`."""
        physics = self._world.physics
        return physics.steps_per_control * physics.timestep_s

    @property
    def encoder_angle_rad(self) -> float:
        """Unwrapped belt roller angle (travel / true roller radius), monotonic across resets."""
        return self._encoder_offset_rad + belt_encoder_angle_rad(
            self.backend.belt_travel_m, self._world.belt.roller_radius_m
        )

    @property
    def trial_state(self) -> TrialState:
        """Idle, running or finished."""
        if self._trial is None:
            return TrialState.IDLE
        return TrialState.RUNNING if self._trial.result is None else TrialState.FINISHED

    @property
    def trial_id(self) -> int:
        """Id of the current (or last) trial; 0 when idle."""
        return 0 if self._trial is None else self._trial.trial_id

    @property
    def last_result(self) -> TrialResult | None:
        """The current trial's result once decided."""
        return None if self._trial is None else self._trial.result

    def _bank_time(self) -> None:
        """Fold the backend's clock and belt travel into the offsets before a backend reset."""
        self._encoder_offset_rad = self.encoder_angle_rad
        self._time_offset_s = self.time_s

    def _abort_running(self) -> None:
        if self.trial_state == TrialState.RUNNING:
            self.counters.trials_aborted += 1

    # -- trials -----------------------------------------------------------------------------
    def world_for(self, condition: str) -> WorldParams:
        """Return the world of a trial condition ('' or ``nominal``: the base world).

        Raises:
            TrialRequestError: Unknown condition (names the known ones).

        """
        if condition in NOMINAL_CONDITIONS:
            return self.base_world
        try:
            return apply_shift(self.base_world, condition)
        except ConfigError as error:
            known = [*NOMINAL_CONDITIONS[1:], *sorted(self.base_world.shifts)]
            raise TrialRequestError(
                f"condition = {condition!r}: expected '' or one of {known} ({error})"
            ) from None

    def start_trial(self, seed: int, condition: str = "") -> int:
        """Reset the cell with ``seed`` under ``condition`` and start a trial.

        A running trial is aborted (counted, no outcome). Objects arrive as sampled by
        :func:`r2s2r_sim.task.sample_trial` from the condition's world.

        Returns:
            The new trial's id (1, 2, ...).

        Raises:
            TrialRequestError: Unknown condition or a negative seed; the cell is unchanged.

        """
        if seed < 0:
            raise TrialRequestError(f"seed = {seed}: expected ≥ 0")
        world = self.world_for(condition)
        plan = sample_trial(world, seed)
        self._abort_running()
        self._bank_time()
        runner = TrialRunner(self.backend, world, plan)
        runner.start()
        # A trial's frames and encoder readings fall at the same instants after its start,
        # whenever it was started (the in-process evaluator and the twin served over ROS start
        # trials at different cell times; their first frames must still coincide).
        for schedule in (*self._camera_schedules.values(), self._encoder_schedule):
            schedule.restart(self.time_s)
        self._world = world
        self._trial = _Trial(self._next_trial_id, seed, condition, runner)
        self._next_trial_id += 1
        self.counters.trials_started += 1
        return self._trial.trial_id

    def reset(self, seed: int = 0) -> None:
        """Robot home, belt clear (objects parked) at the base world's belt speed, cell idle."""
        self._abort_running()
        self._bank_time()
        objects = getattr(self.backend, "objects", ())  # keep the compiled model when possible
        self.backend.reset(self.base_world, seed, objects if self._world is self.base_world else ())
        self._world = self.base_world
        self._trial = None

    # -- stepping ---------------------------------------------------------------------------
    def step_control(self) -> ControlStep:
        """Advance one control period; return joint state and whatever became due."""
        started = time.perf_counter()
        steps = self._world.physics.steps_per_control
        outcome: TrialResult | None = None
        trial = self._trial
        if trial is not None and trial.result is None:
            decided = trial.runner.step(steps)
            if decided is not None:
                plan = trial.runner.plan
                trial.result = TrialResult(
                    trial_id=trial.trial_id,
                    seed=trial.seed,
                    condition=trial.condition,
                    object_type=",".join(o.type_name for o in plan.objects),
                    success=decided.success,
                    reason=decided.reason,
                    duration_s=decided.time_s,
                    time_s=self.time_s,
                )
                outcome = trial.result
                self.counters.trials_finished += 1
        else:
            self.backend.step(steps)
        now = self.time_s
        positions = self.backend.joint_positions()
        velocities = self.backend.joint_velocities()
        encoder = self.encoder_angle_rad if self._encoder_schedule.due(now) else None
        rendered = time.perf_counter()
        if self._board_placement is not None and any(
            self._camera_schedules[name].next_due(now) for name in CAMERA_NAMES
        ):
            self._pose_board()
        frames = tuple(
            self._capture(name, now)
            for name in CAMERA_NAMES
            if self._camera_schedules[name].due(now)
            and self.config.render_cameras
            and self.camera_demand[name]
        )
        finished = time.perf_counter()
        self.costs.physics_s += rendered - started
        self.costs.render_s += finished - rendered
        self.costs.sim_s += self.control_period_s
        return ControlStep(now, positions, velocities, encoder, frames, outcome)

    # -- the operator's calibration board ------------------------------------------------------
    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        """Put the board at ``T_frame_board`` in ``frame`` (the operator does it).

        ``flange`` / ``palm_link``: clamped to the hand, it moves with the robot. ``world`` or a
        camera's optical frame: put down there (relative to where the camera is now) and left.

        Raises:
            ValueError: No board on this cell, an unknown frame or a pose that is not rigid.

        """
        if self.board is None:
            raise ValueError("this cell has no calibration board (SimCell(board=...))")
        if frame not in BOARD_FRAMES_ATTACHED + BOARD_FRAMES_PLACED:
            raise ValueError(
                f"board frame = {frame!r}: expected one of "
                f"{list(BOARD_FRAMES_ATTACHED + BOARD_FRAMES_PLACED)}"
            )
        pose = np.asarray(T_frame_board, dtype=float)
        rotation = pose[:3, :3]
        if pose.shape != (4, 4) or not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-6):
            raise ValueError("T_frame_board: expected a rigid 4x4 pose (orthonormal rotation)")
        if frame in BOARD_FRAMES_PLACED and frame != WORLD_FRAME:
            pose = self.backend.body_pose(frame) @ pose
            frame = WORLD_FRAME
        self._board_placement = (frame, pose)
        self._pose_board()

    def remove_board(self) -> None:
        """Take the board away (the operator parks it under the floor)."""
        if self.board is None or self._board_placement is None:
            return
        self._board_placement = None
        self.backend.set_mocap_pose(BOARD_BODY, (0.0, 0.0, -2.0), (1.0, 0.0, 0.0, 0.0))  # type: ignore[attr-defined]

    @property
    def board_placement(self) -> tuple[str, FloatArray] | None:
        """Where the board is: (frame, ``T_frame_board``), or None when it is away."""
        return self._board_placement

    def _pose_board(self) -> None:
        assert self.board is not None and self._board_placement is not None
        frame, pose = self._board_placement
        if frame != WORLD_FRAME:
            pose = self.backend.body_pose(frame) @ pose
        body = pose @ np.linalg.inv(board_body_from_board(self.board))
        quat = matrix_to_quat(body[:3, :3])
        self.backend.set_mocap_pose(BOARD_BODY, body[:3, 3], quat)  # type: ignore[attr-defined]

    def _capture(self, camera_name: str, time_s: float) -> CameraFrame:
        rgb = self.backend.render(camera_name)
        depth = None
        if camera_name == HEAD.name and self.config.render_depth and self.depth_demand:
            depth = self.backend.render_depth(camera_name)
        return CameraFrame(camera_name, time_s, rgb, depth)

    # -- commands ---------------------------------------------------------------------------
    def command(
        self,
        controller: str,
        joint_names: Sequence[str],
        times_s: Sequence[float] | FloatArray,
        positions: Sequence[Sequence[float]] | FloatArray,
        velocities: Sequence[Sequence[float]] | FloatArray | None = None,
        start_time_s: float | None = None,
    ) -> None:
        """Hand a JointTrajectory to the ``arm`` or ``hand`` controller.

        Args:
            controller: ``arm`` or ``hand``.
            joint_names: All of that controller's joints, any order.
            times_s: ``time_from_start`` per point (≥ 0, strictly increasing).
            positions: (M, N) rad.
            velocities: Optional (M, N) rad/s (cubic interpolation), or None (linear).
            start_time_s: Cell time to start at (``header.stamp``); None or past: now. A
                future start holds the current position until then.

        Raises:
            CommandRejected: Unknown controller, wrong/missing/repeated joint names, wrong
                lengths, non-finite values or bad times. The rejection is counted in
                :attr:`counters` and nothing is sent: the robot keeps its current motion.

        """
        try:
            if controller not in CONTROLLER_JOINTS:
                raise TrajectoryError(
                    f"controller = {controller!r}: expected one of {sorted(CONTROLLER_JOINTS)}"
                )
            joints = CONTROLLER_JOINTS[controller]
            _check_rows(positions, len(joint_names), "positions")
            if velocities is not None:
                _check_rows(velocities, len(joint_names), "velocities")
            trajectory = make_trajectory(joints, joint_names, times_s, positions, velocities)
            times = trajectory.times_s
            points = trajectory.positions
            rates = trajectory.velocities
            delay_s = 0.0 if start_time_s is None else start_time_s - self.time_s
            if not math.isfinite(delay_s):
                raise TrajectoryError(f"start_time_s = {start_time_s}: expected a finite time")
            if delay_s > 0.0:
                times, points, rates = self._delayed(joints, times, points, rates, delay_s)
        except TrajectoryError as error:
            self.counters.rejected += 1
            self.counters.last_rejection = f"{controller}: {error}"
            raise CommandRejected(self.counters.last_rejection) from None
        self.backend.command_trajectory(joints, times.tolist(), points, rates)
        self.counters.accepted += 1

    def _delayed(
        self,
        joints: Sequence[str],
        times: FloatArray,
        points: FloatArray,
        rates: FloatArray | None,
        delay_s: float,
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        """Shift a trajectory by ``delay_s`` and hold the measured position until it starts."""
        index = [ALL_JOINT_NAMES.index(j) for j in joints]
        hold = self.backend.joint_positions()[index]
        hold_time_s = delay_s if times[0] > 0.0 else delay_s - self.control_period_s
        times = times + delay_s
        if hold_time_s <= 0.0:
            return times, points, rates
        times = np.concatenate([[hold_time_s], times])
        points = np.vstack([hold, points])
        if rates is not None:
            rates = np.vstack([np.zeros(len(joints)), rates])
        return times, points, rates

    # -- observation --------------------------------------------------------------------------
    def object_tracks(self) -> list[TrackedObject]:
        """Return the true poses of the objects in the scene, in the robot's ``base_link``."""
        if self._trial is None:
            return []
        if self._base_cache is None or self._base_cache[0] is not self._world:
            base = self._world.robot.base_pose.to_pose().matrix()  # the truth, not a datasheet
            rotation_t = base[:3, :3].T
            self._base_cache = (self._world, rotation_t, base[:3, 3], matrix_to_quat(rotation_t))
        _, rotation_t, translation, base_from_world = self._base_cache
        names = [a.instance.name for a in self._trial.runner.plan.arrivals]
        tracks = []
        for name, pose in self.backend.object_poses().items():
            if not pose.active or name not in names:
                continue
            tracks.append(
                TrackedObject(
                    track_id=names.index(name),
                    object_type=pose.type_name,
                    position_m=rotation_t @ (pose.position_m - translation),
                    quat_wxyz=quat_multiply(base_from_world, pose.quat_wxyz),
                    linear_velocity_mps=rotation_t @ pose.linear_velocity_mps,
                )
            )
        return tracks

    def camera_calibration(self, camera_name: str) -> CameraCalibration:
        """Return the published (nominal) calibration of ``camera_name``."""
        return camera_calibration(camera_params(self.nominal_world, camera_name), camera_name)

    def static_transforms(self) -> list[StaticTransform]:
        """Return the published (nominal) fixed mounts."""
        return static_transforms(self.nominal_world)

    def close(self) -> None:
        """Free the backend's renderers, if it has any."""
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()


def _check_rows(rows: Sequence[Sequence[float]] | FloatArray, n_joints: int, what: str) -> None:
    """Every trajectory point carries one value per joint (ragged input is named, not cast)."""
    for index, row in enumerate(rows):
        if len(row) != n_joints:
            raise TrajectoryError(
                f"points[{index}].{what} has {len(row)} values: expected {n_joints}, one per joint"
            )
