"""A :class:`~r2s2r_calibration.cell_client.CellClient` over ROS: a running cell's contract topics.

It uses only what a real cell exposes (docs/architecture.md, section 4): camera images and
``camera_info``, head depth, ``/joint_states``, the two joint_trajectory_controller topics,
``/belt/encoder``, ``/tf_static`` and the ``/trial/start`` / ``/trial/reset`` services. The
board operator (a person on hardware) is reached through ``/twin/operator/board_pose`` when
``board_operator`` is on.

The procedure runs in a worker thread and blocks on this client; the node is spun by an
executor in another thread, whose callbacks fill the buffers below under one condition
variable. Cell time is the stamp of the latest ``/joint_states`` message. Camera and depth
subscriptions are made on first use (a lazy twin renders a camera only while it has
subscribers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from r2s2r_common.camera_info import from_camera_info_msg
from r2s2r_common.camera_model import CameraModel
from r2s2r_common.image_conversion import from_image_msg
from r2s2r_common.ros.batched import BatchedSubscription
from r2s2r_common.ros.qos import (
    ENCODER_STREAM_QOS,
    JOINT_STATES_STREAM_QOS,
    LATCHED_QOS,
    RELIABLE_QOS,
    SENSOR_DATA_QOS,
)
from r2s2r_common.ros.services import ServiceNoAnswerError, call_service, wait_in_other_thread
from r2s2r_common.stamps import set_stamp, stamp_to_s
from r2s2r_common.topics import (
    BELT_ENCODER,
    HEAD_DEPTH,
    JOINT_STATES,
    OPERATOR_BOARD_POSE,
    TF_STATIC,
    TRIAL_RESET,
    TRIAL_START,
    camera_image,
    camera_info,
    joint_trajectory,
)
from r2s2r_description.controllers import controller_name
from r2s2r_description.frames import BASE_LINK
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_description.transforms import matrix_to_quat, quat_to_matrix
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from r2s2r_calibration.cell_client import (
    BoardOperator,
    encoder_columns,
    pose_in_world,
)
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.log import JointStateLog
from r2s2r_interfaces.srv import StartTrial
from tf2_msgs.msg import TFMessage

JOINT_BATCH_PERIOD_S = 0.01
"""How often queued joint states are taken (s): the cell clock seen here lags by at most this."""
ENCODER_BATCH_PERIOD_S = 0.05
"""How often queued belt encoder readings are taken (s)."""
RESEND_AFTER_S = 2.0
"""Seconds without an answer after which ``/trial/reset`` (repeatable) is sent again."""


class CellTimeoutError(CalibrationError):
    """The cell did not deliver what was asked for in time (not running, or not publishing)."""


class SecondCellError(CalibrationError):
    """More than one cell publishes on the ROS domain (their clocks and joints would mix)."""


def pose_stamped(frame: str, pose: FloatArray) -> PoseStamped:
    """Build a PoseStamped of a 4x4 pose in ``frame``."""
    msg = PoseStamped()
    msg.header.frame_id = frame
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pose[:3, 3])
    o.w, o.x, o.y, o.z = (float(v) for v in matrix_to_quat(pose[:3, :3]))
    return msg


def _has_subscriber(publisher: Any) -> Callable[[], bool]:
    """Predicate: the publisher is matched with at least one subscription."""
    return lambda: bool(publisher.get_subscription_count() > 0)


class RosBoardOperator:
    """Asks the operator (the twin's stand-in) to place or remove the board over ROS."""

    def __init__(self, publish: Callable[[PoseStamped], None]):
        self._publish = publish

    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        """Publish the requested board pose."""
        self._publish(pose_stamped(frame, np.asarray(T_frame_board, dtype=float)))

    def remove_board(self) -> None:
        """Publish an empty frame_id (board away)."""
        self._publish(pose_stamped("", np.eye(4)))


class RosCellClient:
    """Serve a running cell to the grounding procedure over ROS (see the module docstring).

    Args:
        node: The node to make subscriptions, publishers and clients on (spun elsewhere).
        board_operator: Offer the twin's board operator (``/twin/operator/board_pose``).
        timeout_s: Wall-clock limit of every wait (s).

    """

    def __init__(self, node: Node, board_operator: bool = True, timeout_s: float = 30.0):
        self.node = node
        self.timeout_s = float(timeout_s)
        self._cond = threading.Condition()
        self._index = {name: i for i, name in enumerate(ALL_JOINT_NAMES)}
        self._time_s = -1.0
        self._wake_targets_s: list[float] = []  # cell times wait_until callers wait for
        self._wake_at_s = float("inf")  # the earliest of them
        self._positions: FloatArray | None = None
        self._logging = False
        self._log: list[tuple[float, FloatArray, FloatArray]] = []
        self._encoder: list[tuple[float, float]] = []
        self._images: dict[str, list[tuple[float, np.ndarray]]] = {}
        self._received: dict[str, int] = {}
        self._infos: dict[str, CameraInfo] = {}
        self._static: dict[str, tuple[str, FloatArray]] = {}
        self._subscriptions: dict[str, Any] = {}
        self._releases: list[tuple[list[Any], threading.Event]] = []
        self._release_guard = node.create_guard_condition(self._on_release)
        # Joint states arrive at the control rate (500 Hz): a deep reader queue (4 s) taken in
        # batches every JOINT_BATCH_PERIOD_S (one executor wake-up per batch, not per message:
        # per message, rclpy's executor cost most of a core), in their own callback group so
        # that image callbacks never delay them. The group is mutually exclusive: batches of
        # one stream are handled one at a time, in order. Spin the node on a
        # SingleThreadedExecutor (rclpy's MultiThreadedExecutor spends more on dispatch than
        # the callbacks cost). Order is also restored from the stamps (the log is sorted on
        # stop; the latest position only moves forward).
        streams = MutuallyExclusiveCallbackGroup()
        self._joint_stream = BatchedSubscription(
            node,
            JointState,
            JOINT_STATES,
            self._on_joint_batch,
            JOINT_STATES_STREAM_QOS,
            JOINT_BATCH_PERIOD_S,
            callback_group=streams,
        )
        self._encoder_stream = BatchedSubscription(
            node,
            JointState,
            BELT_ENCODER,
            self._on_encoder_batch,
            ENCODER_STREAM_QOS,
            ENCODER_BATCH_PERIOD_S,
            callback_group=streams,
        )
        node.create_subscription(TFMessage, TF_STATIC, self._on_tf_static, LATCHED_QOS)
        self._trajectory = {
            name: node.create_publisher(
                JointTrajectory, joint_trajectory(controller_name(name)), RELIABLE_QOS
            )
            for name in ("arm", "hand")
        }
        self._start: Any = node.create_client(StartTrial, TRIAL_START)
        self._reset: Any = node.create_client(Trigger, TRIAL_RESET)
        self._board: RosBoardOperator | None = None
        self._board_publisher: Any = None
        if board_operator:
            self._board_publisher = node.create_publisher(
                PoseStamped, OPERATOR_BOARD_POSE, RELIABLE_QOS
            )
            self._board = RosBoardOperator(self._board_publisher.publish)

    # -- callbacks (executor thread) -----------------------------------------------------------
    def _on_joint_batch(self, messages: list[JointState]) -> None:
        states: list[tuple[float, FloatArray, FloatArray]] = []
        for msg in messages:
            if len(msg.name) != len(msg.position):
                continue
            positions = np.full(len(ALL_JOINT_NAMES), np.nan)
            velocities = np.zeros(len(ALL_JOINT_NAMES))
            for k, name in enumerate(msg.name):
                index = self._index.get(name)
                if index is not None:
                    positions[index] = msg.position[k]
                    if k < len(msg.velocity):
                        velocities[index] = msg.velocity[k]
            states.append((stamp_to_s(msg.header.stamp), positions, velocities))
        if not states:
            return
        with self._cond:
            first = self._positions is None
            for stamp, positions, _ in states:
                if stamp >= self._time_s:
                    self._time_s = stamp
                    self._positions = positions
            if self._logging:
                self._log.extend(states)
            # Wake a waiter only when what it waits for may have come (the first state, or the
            # cell time it waits for), not for every batch.
            if first or self._time_s >= self._wake_at_s:
                self._cond.notify_all()

    def _on_encoder_batch(self, messages: list[JointState]) -> None:
        readings = [
            (stamp_to_s(msg.header.stamp), float(msg.position[0]))
            for msg in messages
            if len(msg.position) >= 1
        ]
        with self._cond:
            self._encoder.extend(readings)

    def _on_tf_static(self, msg: TFMessage) -> None:
        with self._cond:
            for transform in msg.transforms:
                t, q = transform.transform.translation, transform.transform.rotation
                pose = np.eye(4)
                pose[:3, :3] = quat_to_matrix((q.w, q.x, q.y, q.z))
                pose[:3, 3] = (t.x, t.y, t.z)
                self._static[transform.child_frame_id] = (transform.header.frame_id, pose)
            self._cond.notify_all()

    def _on_image(self, key: str, msg: Image) -> None:
        try:
            array = from_image_msg(msg)
        except ValueError as error:
            self.node.get_logger().warning(f"{key}: image dropped: {error}")
            return
        with self._cond:
            frames = self._images.setdefault(key, [])
            frames.append((stamp_to_s(msg.header.stamp), array))
            del frames[:-4]
            self._received[key] = self._received.get(key, 0) + 1
            self._cond.notify_all()

    def _on_info(self, camera: str, msg: CameraInfo) -> None:
        with self._cond:
            self._infos[camera] = msg
            self._cond.notify_all()

    # -- waiting -----------------------------------------------------------------------------
    def _wait(
        self, predicate: Callable[[], bool], what: str, while_clock_runs: bool = False
    ) -> None:
        """Block until ``predicate`` holds (under the lock), at most ``timeout_s``.

        With ``while_clock_runs`` the limit is on a *stalled* cell: it restarts whenever the
        cell clock advanced, so a far target on a cell slower than real time (a twin at
        ``real_time_factor`` 0.5, a loaded machine) is waited for as long as time moves.
        """
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            seen_s = self._time_s
            while not predicate():
                if while_clock_runs and self._time_s > seen_s:
                    seen_s = self._time_s
                    deadline = time.monotonic() + self.timeout_s
                remaining = deadline - time.monotonic()
                if remaining <= 0.0:
                    stalled = " (the cell clock did not advance)" if while_clock_runs else ""
                    raise CellTimeoutError(
                        f"waited {self.timeout_s:.0f} s for {what}{stalled}; is the cell "
                        "running (`r2s2r launch real_deploy`) and publishing?"
                    )
                self._cond.wait(min(remaining, 0.5))

    def wait_for_cell(self) -> None:
        """Block until ``/joint_states`` and ``/tf_static`` arrived, from one cell.

        Raises:
            CellTimeoutError: Nothing within ``timeout_s``.
            SecondCellError: More than one ``/joint_states`` publisher: another cell (or a
                twin left running) on this ROS domain would mix its clock and joints into the
                procedure's.

        """
        self._wait(lambda: self._positions is not None, JOINT_STATES)
        self._wait(lambda: BASE_LINK in self._static, f"{TF_STATIC} ({BASE_LINK})")
        count = self.node.count_publishers(JOINT_STATES)
        if count > 1:
            raise SecondCellError(
                f"{count} publishers of {JOINT_STATES} on ROS domain "
                f"{self.node.context.get_domain_id()}: expected one cell; stop the other one "
                "(a twin left running?) or give this cell its own ROS_DOMAIN_ID"
            )
        # Reliable messages sent before discovery matched a subscriber are lost: wait for the
        # controllers (and the board operator) to be listening before the first command.
        publishers = dict(self._trajectory)
        if self._board_publisher is not None:
            publishers["board"] = self._board_publisher
        for name, publisher in publishers.items():
            self._wait(
                _has_subscriber(publisher), f"a subscriber of {publisher.topic_name} ({name})"
            )

    def _subscribe(
        self, key: str, msg_type: Any, topic: str, callback: Callable[[Any], None]
    ) -> None:
        if key not in self._subscriptions:
            self._subscriptions[key] = self.node.create_subscription(
                msg_type, topic, callback, SENSOR_DATA_QOS
            )

    def begin_step(self, step: str) -> None:
        """Mark the start of a procedure step: nothing to do on a live cell."""

    def release_streams(self, from_executor: bool = False) -> None:
        """Unsubscribe from cameras and depth (the twin stops rendering what nobody watches).

        The subscriptions are destroyed on the executor's thread: destroying one while the
        executor builds its wait set in another thread fails there (``InvalidHandle``). From a
        worker thread this hands them over and waits; ``from_executor`` (a callback, e.g. a
        lifecycle transition) destroys them at once.
        """
        with self._cond:
            released = list(self._subscriptions.values())
            self._subscriptions = {}
            self._images = {}
        if not released:
            return
        if from_executor:
            for subscription in released:
                self.node.destroy_subscription(subscription)
            return
        done = threading.Event()
        with self._cond:
            self._releases.append((released, done))
        self._release_guard.trigger()
        if not done.wait(self.timeout_s):
            raise CellTimeoutError(
                f"waited {self.timeout_s:.0f} s for the executor to release the camera streams; "
                "is the node being spun?"
            )

    def close(self) -> None:
        """Executor thread: release every stream, joint states and encoder included."""
        self.release_streams(from_executor=True)
        self._joint_stream.destroy()
        self._encoder_stream.destroy()

    def _on_release(self) -> None:
        """Executor thread: destroy the subscriptions handed over by :meth:`release_streams`."""
        with self._cond:
            pending, self._releases = self._releases, []
        for released, done in pending:
            for subscription in released:
                self.node.destroy_subscription(subscription)
            done.set()

    # -- CellClient --------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """Provenance source."""
        return "live"

    @property
    def board_operator(self) -> BoardOperator | None:
        """The twin's board operator when enabled."""
        return self._board

    def now_s(self) -> float:
        """Cell time of the latest ``/joint_states`` (s)."""
        self._wait(lambda: self._positions is not None, JOINT_STATES)
        with self._cond:
            return self._time_s

    def wait_until(self, time_s: float) -> None:
        """Block until the cell clock reached ``time_s``.

        Raises:
            CellTimeoutError: The cell clock stopped advancing for ``timeout_s`` before.

        """
        target = time_s - 1e-9
        with self._cond:
            self._wake_targets_s.append(target)
            self._wake_at_s = min(self._wake_targets_s)
        try:
            self._wait(
                lambda: self._time_s >= target, f"cell time {time_s:.3f} s", while_clock_runs=True
            )
        finally:
            with self._cond:
                self._wake_targets_s.remove(target)
                self._wake_at_s = min(self._wake_targets_s, default=float("inf"))

    def joint_positions(self) -> FloatArray:
        """Latest joint positions (rad)."""
        self._wait(lambda: self._positions is not None, JOINT_STATES)
        with self._cond:
            assert self._positions is not None
            return self._positions.copy()

    def start_joint_log(self) -> None:
        """Start logging joint states."""
        with self._cond:
            self._logging = True
            self._log = []

    def stop_joint_log(self) -> JointStateLog:
        """Stop logging; return the log."""
        with self._cond:
            self._logging = False
            log, self._log = self._log, []
        if not log:
            return JointStateLog(np.zeros(0), np.zeros((0, 18)), np.zeros((0, 18)))
        # Stamp order, one sample per stamp (a message delivered twice or late is not a sample).
        by_stamp = {t: (q, v) for t, q, v in log}
        stamps = sorted(by_stamp)
        return JointStateLog(
            np.array(stamps),
            np.array([by_stamp[t][0] for t in stamps]),
            np.array([by_stamp[t][1] for t in stamps]),
        )

    def encoder_samples(self, duration_s: float) -> tuple[FloatArray, FloatArray]:
        """Return the encoder samples since the last call plus ``duration_s`` more."""
        if duration_s > 0.0:
            self.wait_until(self.now_s() + duration_s)
        with self._cond:
            samples, self._encoder = self._encoder, []
        return encoder_columns(sorted(samples))

    def send_trajectory(
        self,
        controller: str,
        joint_names: Sequence[str],
        times_s: FloatArray,
        positions: FloatArray,
        start_time_s: float,
    ) -> None:
        """Publish a JointTrajectory starting at ``start_time_s`` (cell clock)."""
        msg = JointTrajectory(joint_names=list(joint_names))
        set_stamp(msg.header.stamp, start_time_s)
        for t, row in zip(np.asarray(times_s, dtype=float), np.asarray(positions), strict=True):
            point = JointTrajectoryPoint(positions=[float(v) for v in row])
            set_stamp(point.time_from_start, float(t))
            msg.points.append(point)
        self._trajectory[controller].publish(msg)

    def camera_model(self, camera: str) -> CameraModel:
        """Return the camera's published ``camera_info``."""
        self._subscribe(
            f"{camera}/info",
            CameraInfo,
            camera_info(camera),
            lambda msg: self._on_info(camera, msg),
        )
        self._wait(lambda: camera in self._infos, camera_info(camera))
        return CameraModel.from_calibration(from_camera_info_msg(self._infos[camera], camera))

    def _next_frame(self, key: str, after_s: float) -> tuple[float, np.ndarray]:
        """First frame stamped at/after ``after_s`` that is also the 2nd+ frame received now.

        Cell time here comes from ``/joint_states``, which may arrive late under load; a frame
        received two frames after the request was rendered after the cell saw any command or
        board request sent before it (the cell serves messages between camera periods).
        """
        with self._cond:
            baseline = self._received.get(key, 0)

        def arrived() -> bool:
            fresh = self._received.get(key, 0) - baseline
            frames = self._images.get(key, [])[-max(fresh - 1, 0) :] if fresh >= 2 else []
            return any(stamp >= after_s for stamp, _ in frames)

        self._wait(arrived, f"a {key} frame after cell time {after_s:.3f} s")
        with self._cond:
            fresh = self._received.get(key, 0) - baseline
            frames = self._images[key][-max(fresh - 1, 1) :]
            return next((s, a) for s, a in frames if s >= after_s)

    def capture_image(self, camera: str, after_s: float | None = None) -> tuple[float, np.ndarray]:
        """Return the first RGB frame of ``camera`` stamped at/after ``after_s`` (default: now)."""
        key = f"{camera}/image"
        self._subscribe(key, Image, camera_image(camera), lambda msg: self._on_image(key, msg))
        return self._next_frame(key, self.now_s() + 1e-6 if after_s is None else after_s)

    def capture_depth(self) -> tuple[float, np.ndarray]:
        """Return the next head depth image: (stamp s, (H, W) float32 m)."""
        key = "head_camera/depth"
        self._subscribe(
            key,
            Image,
            HEAD_DEPTH,
            lambda msg: self._on_image(key, msg),
        )
        return self._next_frame(key, self.now_s() + 1e-6)

    def frame_pose(self, frame: str) -> FloatArray:
        """``T_world_frame`` composed from ``/tf_static``.

        Raises:
            KeyError: The frame is not connected to ``world``.

        """
        self._wait(lambda: BASE_LINK in self._static, TF_STATIC)
        with self._cond:
            parents = dict(self._static)
        return pose_in_world(frame, parents)

    def _call(
        self, client: Any, request: Any, what: str, resend_after_s: float | None = None
    ) -> Any:
        if not client.wait_for_service(timeout_sec=self.timeout_s):
            raise CellTimeoutError(f"{what}: service not available; is the cell running?")
        try:
            return call_service(
                client, request, what, self.timeout_s, wait_in_other_thread, resend_after_s
            )
        except ServiceNoAnswerError as error:
            raise CellTimeoutError(str(error)) from error

    def start_trial(self, seed: int) -> None:
        """Start a trial through ``/trial/start``."""
        response = self._call(self._start, StartTrial.Request(seed=seed), TRIAL_START)
        if not response.success:
            raise CalibrationError(f"{TRIAL_START} refused: {response.message}")

    def reset_cell(self) -> None:
        """Reset the cell through ``/trial/reset``."""
        response = self._call(self._reset, Trigger.Request(), TRIAL_RESET, RESEND_AFTER_S)
        if not response.success:
            raise CalibrationError(f"{TRIAL_RESET} refused: {response.message}")
