"""Grounding sessions recorded to a rosbag2 (MCAP) bag, and grounding re-run from one.

:class:`RecordingCellClient` wraps the live cell client of ``r2s2r ground --record-bag DIR``
and writes everything the procedure observed: images and depth (``sensor_msgs/Image`` on
``/<camera>/image_raw``, ``/head_camera/depth/image_raw``), ``camera_info``, the joint-state and
encoder logs (``sensor_msgs/JointState`` on ``/joint_states``, ``/belt/encoder``), plus one
``std_msgs/String`` per procedure call on ``/calibration/trace`` (JSON: the call, its arguments
and small results such as a ``/tf_static`` frame pose, and step markers).

:class:`BagCellClient` serves the procedure from such a bag without a cell
(``r2s2r ground --from-bag DIR [--steps ...]``): each step starts at its marker, and every
call gets what the live call got, in order. A step can so be re-run with other solver
settings, on a machine without ROS: alone, or with the steps whose results it plans from (the
``bins`` views come from the ``registration``). The procedure must ask for what was recorded: a
call that differs from the recording (another step order, a changed view plan) stops with an
error that names both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_common.stamps import split_s, stamp_to_s
from r2s2r_common.topics import (
    BELT_ENCODER,
    CALIBRATION_TRACE,
    HEAD_DEPTH,
    JOINT_STATES,
    camera_image,
    camera_info,
)
from r2s2r_description.cameras import camera as cell_camera
from r2s2r_description.robot import ALL_JOINT_NAMES
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from r2s2r_calibration.cell_client import BoardOperator, CellClient
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.log import JointStateLog

_TYPES = get_typestore(Stores.ROS2_HUMBLE)
_Time = _TYPES.types["builtin_interfaces/msg/Time"]
_Header = _TYPES.types["std_msgs/msg/Header"]
_Image = _TYPES.types["sensor_msgs/msg/Image"]
_CameraInfo = _TYPES.types["sensor_msgs/msg/CameraInfo"]
_Roi = _TYPES.types["sensor_msgs/msg/RegionOfInterest"]
_JointState = _TYPES.types["sensor_msgs/msg/JointState"]
_String = _TYPES.types["std_msgs/msg/String"]
_MSGTYPES = {
    "image": "sensor_msgs/msg/Image",
    "info": "sensor_msgs/msg/CameraInfo",
    "joints": "sensor_msgs/msg/JointState",
    "trace": "std_msgs/msg/String",
}


class SessionBagError(CalibrationError):
    """A session bag that cannot be read, or a procedure that asks for what it does not hold."""


def _header(stamp_s: float, frame_id: str = "") -> Any:
    return _Header(_Time(*split_s(stamp_s)), frame_id)


def _image_msg(stamp_s: float, array: np.ndarray) -> Any:
    if array.dtype == np.float32 and array.ndim == 2:
        encoding, step = "32FC1", 4 * array.shape[1]
    elif array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3:
        encoding, step = "rgb8", 3 * array.shape[1]
    else:
        raise SessionBagError(f"cannot record an image of {array.dtype} {array.shape}")
    data = np.frombuffer(np.ascontiguousarray(array).tobytes(), dtype=np.uint8)
    return _Image(_header(stamp_s), array.shape[0], array.shape[1], encoding, 0, step, data)


def _image_array(msg: Any) -> np.ndarray:
    data = np.asarray(msg.data, dtype=np.uint8).tobytes()
    if msg.encoding == "32FC1":
        return np.frombuffer(data, dtype=np.float32).reshape(msg.height, msg.width).copy()
    if msg.encoding == "rgb8":
        return np.frombuffer(data, dtype=np.uint8).reshape(msg.height, msg.width, 3).copy()
    raise SessionBagError(f"image encoding {msg.encoding!r} is not one a session bag holds")


def _joint_msg(stamp_s: float, names: Sequence[str], position: FloatArray,
               velocity: FloatArray) -> Any:  # fmt: skip
    return _JointState(
        _header(stamp_s),
        list(names),
        np.asarray(position, dtype=np.float64),
        np.asarray(velocity, dtype=np.float64),
        np.zeros(0, dtype=np.float64),
    )


class RecordingCellClient:
    """A cell client that records what the procedure observes into a session bag.

    Args:
        inner: The live client (e.g. :class:`~r2s2r_calibration.nodes.ros_client.RosCellClient`).
        bag_dir: New bag directory (must not exist).

    """

    def __init__(self, inner: CellClient, bag_dir: str | Path):
        self.inner = inner
        self.bag_dir = Path(bag_dir)
        if self.bag_dir.exists():
            raise SessionBagError(f"{self.bag_dir} exists; a session bag needs a new directory")
        self.bag_dir.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.bag_dir, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self._board = _RecordingBoard(self, inner.board_operator) if inner.board_operator else None
        self._trace("open", board_operator=inner.board_operator is not None)

    def _write(self, topic: str, kind: str, msg: Any) -> None:
        if topic not in self._connections:
            self._connections[topic] = self._writer.add_connection(
                topic, _MSGTYPES[kind], typestore=_TYPES
            )
        data = _TYPES.serialize_cdr(msg, _MSGTYPES[kind])
        self._writer.write(self._connections[topic], time.time_ns(), data)

    def _trace(self, call: str, **fields: Any) -> None:
        self._write(CALIBRATION_TRACE, "trace", _String(json.dumps({"call": call, **fields})))

    def close(self) -> None:
        """Finish the bag (``metadata.yaml``); the bag is readable after this."""
        self._trace("close")
        self._writer.close()

    # -- CellClient ---------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The live source (the bag only records it)."""
        return self.inner.source

    @property
    def board_operator(self) -> BoardOperator | None:
        """The inner board operator, recording its requests."""
        return self._board

    def begin_step(self, step: str) -> None:
        """Mark the start of a procedure step (a replay of that step alone starts here)."""
        self._trace("begin_step", step=step)

    def now_s(self) -> float:
        """See :class:`CellClient`."""
        value = self.inner.now_s()
        self._trace("now_s", value=value)
        return value

    def wait_until(self, time_s: float) -> None:
        """See :class:`CellClient`."""
        self.inner.wait_until(time_s)
        self._trace("wait_until", time_s=time_s)

    def joint_positions(self) -> FloatArray:
        """See :class:`CellClient`."""
        value = self.inner.joint_positions()
        self._trace("joint_positions", value=[float(v) for v in value])
        return value

    def start_joint_log(self) -> None:
        """See :class:`CellClient`."""
        self.inner.start_joint_log()
        self._trace("start_joint_log")

    def stop_joint_log(self) -> JointStateLog:
        """See :class:`CellClient`."""
        log = self.inner.stop_joint_log()
        for k, stamp in enumerate(log.stamps_s):
            msg = _joint_msg(float(stamp), log.joint_names, log.positions[k], log.velocities[k])
            self._write(JOINT_STATES, "joints", msg)
        self._trace("stop_joint_log", samples=len(log.stamps_s))
        return log

    def encoder_samples(self, duration_s: float) -> tuple[FloatArray, FloatArray]:
        """See :class:`CellClient`."""
        times, angles = self.inner.encoder_samples(duration_s)
        for stamp, angle in zip(times, angles, strict=True):
            msg = _joint_msg(float(stamp), ["belt_roller"], np.array([angle]), np.zeros(1))
            self._write(BELT_ENCODER, "joints", msg)
        self._trace("encoder_samples", duration_s=duration_s, samples=len(times))
        return times, angles

    def send_trajectory(self, controller: str, joint_names: Sequence[str], times_s: FloatArray,
                        positions: FloatArray, start_time_s: float) -> None:  # fmt: skip
        """See :class:`CellClient` (the command is recorded in the trace)."""
        self.inner.send_trajectory(controller, joint_names, times_s, positions, start_time_s)
        self._trace(
            "send_trajectory",
            controller=controller,
            joint_names=list(joint_names),
            times_s=[float(v) for v in times_s],
            positions=np.asarray(positions, dtype=float).tolist(),
            start_time_s=start_time_s,
        )

    def camera_model(self, camera: str) -> CameraModel:
        """See :class:`CellClient`."""
        model = self.inner.camera_model(camera)
        K = np.asarray(model.camera_matrix, dtype=float)
        P = np.hstack([K, np.zeros((3, 1))]).reshape(-1)
        msg = _CameraInfo(
            _header(0.0, cell_camera(camera).optical_frame), model.height_px, model.width_px,
            "plumb_bob", np.asarray(model.distortion, dtype=float), K.reshape(-1),
            np.eye(3).reshape(-1), P, 0, 0, _Roi(0, 0, 0, 0, False),
        )  # fmt: skip
        self._write(camera_info(camera), "info", msg)
        self._trace("camera_model", camera=camera)
        return model

    def capture_image(self, camera: str, after_s: float | None = None) -> tuple[float, np.ndarray]:
        """See :class:`CellClient`."""
        stamp, image = self.inner.capture_image(camera, after_s)
        self._write(camera_image(camera), "image", _image_msg(stamp, image))
        self._trace("capture_image", camera=camera, stamp_s=stamp)
        return stamp, image

    def capture_depth(self) -> tuple[float, np.ndarray]:
        """See :class:`CellClient`."""
        stamp, depth = self.inner.capture_depth()
        self._write(HEAD_DEPTH, "image", _image_msg(stamp, depth))
        self._trace("capture_depth", stamp_s=stamp)
        return stamp, depth

    def frame_pose(self, frame: str) -> FloatArray:
        """See :class:`CellClient` (the composed ``/tf_static`` pose goes in the trace)."""
        pose = self.inner.frame_pose(frame)
        self._trace("frame_pose", frame=frame, value=np.asarray(pose, dtype=float).tolist())
        return pose

    def start_trial(self, seed: int) -> None:
        """See :class:`CellClient`."""
        self.inner.start_trial(seed)
        self._trace("start_trial", seed=seed)

    def reset_cell(self) -> None:
        """See :class:`CellClient`."""
        self.inner.reset_cell()
        self._trace("reset_cell")

    def release_streams(self) -> None:
        """See :class:`CellClient`."""
        self.inner.release_streams()
        self._trace("release_streams")


class _RecordingBoard:
    def __init__(self, client: RecordingCellClient, inner: BoardOperator):
        self._client, self._inner = client, inner

    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        self._inner.place_board(frame, T_frame_board)
        self._client._trace(
            "place_board", frame=frame, pose=np.asarray(T_frame_board, dtype=float).tolist()
        )

    def remove_board(self) -> None:
        self._inner.remove_board()
        self._client._trace("remove_board")


class BagCellClient:
    """A cell client that serves a recorded grounding session (no cell, no ROS).

    Args:
        bag_dir: A bag written by :class:`RecordingCellClient`.

    Raises:
        SessionBagError: Not readable, or not a grounding session bag.

    """

    def __init__(self, bag_dir: str | Path):
        self.bag_dir = Path(bag_dir)
        if not (self.bag_dir / "metadata.yaml").is_file():
            raise SessionBagError(
                f"{self.bag_dir}: no rosbag2 metadata.yaml (not a bag, or its recording did not "
                "finish)"
            )
        self._trace: list[dict[str, Any]] = []
        self._streams: dict[str, list[Any]] = {}
        try:
            with Reader(self.bag_dir) as reader:
                for connection, _, data in reader.messages():
                    msg: Any = _TYPES.deserialize_cdr(data, connection.msgtype)
                    if connection.topic == CALIBRATION_TRACE:
                        self._trace.append(json.loads(msg.data))
                    else:
                        self._streams.setdefault(connection.topic, []).append(msg)
        except Exception as error:  # rosbags raises several kinds; name the bag
            raise SessionBagError(f"{self.bag_dir}: cannot read the bag: {error}") from None
        if not self._trace or self._trace[0]["call"] != "open":
            raise SessionBagError(
                f"{self.bag_dir}: no {CALIBRATION_TRACE} session trace; record one with "
                "`r2s2r ground --record-bag DIR`"
            )
        self._cursor = 1
        self._read: dict[str, int] = {}
        self._board = _ReplayBoard(self) if self._trace[0].get("board_operator") else None

    @property
    def steps(self) -> list[str]:
        """The procedure steps the bag holds, in recorded order."""
        return [entry["step"] for entry in self._trace if entry["call"] == "begin_step"]

    def _next(self, call: str) -> dict[str, Any]:
        if self._cursor >= len(self._trace):
            raise SessionBagError(
                f"{self.bag_dir}: the procedure asks for {call} but the recording has ended"
            )
        entry = self._trace[self._cursor]
        if entry["call"] != call:
            raise SessionBagError(
                f"{self.bag_dir}: the procedure asks for {call} where the recording did "
                f"{entry['call']} (entry {self._cursor}): the procedure or its settings differ "
                "from the recorded session's; re-record, or run the recorded settings"
            )
        self._cursor += 1
        return entry

    def _take(self, topic: str, count: int) -> list[Any]:
        start = self._read.get(topic, 0)
        messages = self._streams.get(topic, [])[start : start + count]
        if len(messages) < count:
            raise SessionBagError(f"{self.bag_dir}: {topic} holds fewer messages than its trace")
        self._read[topic] = start + count
        return messages

    # -- CellClient ---------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The bag path (artifact provenance)."""
        return str(self.bag_dir)

    @property
    def board_operator(self) -> BoardOperator | None:
        """Replays the recorded board requests when the session had an operator."""
        return self._board

    def begin_step(self, step: str) -> None:
        """Jump to the recorded start of ``step`` (with the streams at that point)."""
        for index, entry in enumerate(self._trace):
            if entry["call"] == "begin_step" and entry["step"] == step:
                self._seek(index + 1)
                return
        raise SessionBagError(
            f"{self.bag_dir}: the recording has no step {step!r} (it has {self.steps})"
        )

    def _seek(self, index: int) -> None:
        """Position the cursor and the stream reads as they were at trace entry ``index``."""
        self._read = {}
        for entry in self._trace[:index]:
            for topic, count in _stream_use(entry):
                self._read[topic] = self._read.get(topic, 0) + count
        self._cursor = index

    def now_s(self) -> float:
        """See :class:`CellClient`."""
        return float(self._next("now_s")["value"])

    def wait_until(self, time_s: float) -> None:
        """See :class:`CellClient`."""
        self._next("wait_until")

    def joint_positions(self) -> FloatArray:
        """See :class:`CellClient`."""
        return np.asarray(self._next("joint_positions")["value"], dtype=float)

    def start_joint_log(self) -> None:
        """See :class:`CellClient`."""
        self._next("start_joint_log")

    def stop_joint_log(self) -> JointStateLog:
        """See :class:`CellClient`."""
        entry = self._next("stop_joint_log")
        messages = self._take(JOINT_STATES, int(entry["samples"]))
        if not messages:
            return JointStateLog(np.zeros(0), np.zeros((0, 18)), np.zeros((0, 18)))
        names = tuple(messages[0].name)
        return JointStateLog(
            np.array([stamp_to_s(m.header.stamp) for m in messages]),
            np.array([np.asarray(m.position, dtype=float) for m in messages]),
            np.array([np.asarray(m.velocity, dtype=float) for m in messages]),
            names if names else ALL_JOINT_NAMES,
        )

    def encoder_samples(self, duration_s: float) -> tuple[FloatArray, FloatArray]:
        """See :class:`CellClient`."""
        entry = self._next("encoder_samples")
        messages = self._take(BELT_ENCODER, int(entry["samples"]))
        times = np.array([stamp_to_s(m.header.stamp) for m in messages])
        angles = np.array([float(m.position[0]) for m in messages])
        return times, angles

    def send_trajectory(self, controller: str, joint_names: Sequence[str], times_s: FloatArray,
                        positions: FloatArray, start_time_s: float) -> None:  # fmt: skip
        """See :class:`CellClient` (nothing moves; the recorded command is skipped over)."""
        self._next("send_trajectory")

    def camera_model(self, camera: str) -> CameraModel:
        """See :class:`CellClient`."""
        self._next("camera_model")
        (msg,) = self._take(camera_info(camera), 1)
        return CameraModel(
            width_px=int(msg.width),
            height_px=int(msg.height),
            camera_matrix=np.asarray(msg.k, dtype=float).reshape(3, 3),
            distortion=np.asarray(msg.d, dtype=float),
        )

    def capture_image(self, camera: str, after_s: float | None = None) -> tuple[float, np.ndarray]:
        """See :class:`CellClient`."""
        entry = self._next("capture_image")
        if entry["camera"] != camera:
            raise SessionBagError(
                f"{self.bag_dir}: the procedure asks for a {camera} image where the recording "
                f"took a {entry['camera']} image (entry {self._cursor - 1})"
            )
        (msg,) = self._take(camera_image(camera), 1)
        return stamp_to_s(msg.header.stamp), _image_array(msg)

    def capture_depth(self) -> tuple[float, np.ndarray]:
        """See :class:`CellClient`."""
        self._next("capture_depth")
        (msg,) = self._take(HEAD_DEPTH, 1)
        return stamp_to_s(msg.header.stamp), _image_array(msg)

    def frame_pose(self, frame: str) -> FloatArray:
        """See :class:`CellClient`."""
        entry = self._next("frame_pose")
        if entry["frame"] != frame:
            raise SessionBagError(
                f"{self.bag_dir}: the procedure asks for frame {frame!r} where the recording "
                f"looked up {entry['frame']!r}"
            )
        return np.asarray(entry["value"], dtype=float)

    def start_trial(self, seed: int) -> None:
        """See :class:`CellClient`."""
        self._next("start_trial")

    def reset_cell(self) -> None:
        """See :class:`CellClient`."""
        self._next("reset_cell")

    def release_streams(self) -> None:
        """See :class:`CellClient`."""
        self._next("release_streams")


class _ReplayBoard:
    def __init__(self, client: BagCellClient):
        self._client = client

    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        self._client._next("place_board")

    def remove_board(self) -> None:
        self._client._next("remove_board")


def _stream_use(entry: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """Yield the stream messages a trace entry consumed: (topic, count)."""
    call = entry["call"]
    if call == "stop_joint_log":
        yield JOINT_STATES, int(entry["samples"])
    elif call == "encoder_samples":
        yield BELT_ENCODER, int(entry["samples"])
    elif call == "camera_model":
        yield camera_info(entry["camera"]), 1
    elif call == "capture_image":
        yield camera_image(entry["camera"]), 1
    elif call == "capture_depth":
        yield HEAD_DEPTH, 1
