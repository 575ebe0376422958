"""ROS-free capture backends behind one interface: ``open()``, ``read()``, ``close()``.

* :class:`DeviceBackend`: a V4L2/USB camera through ``cv2.VideoCapture``; reopens the device
  with exponential backoff after an unplug, without the caller restarting anything.
* :class:`ReplayBackend`: a video file or an image folder, looping, real-time or as fast as
  possible.
* :class:`CallableBackend`: wraps any function returning an image; the simulator's
  ``SimCameraBackend`` is built on it (a renderer call per frame).

``read()`` blocks until the next frame and returns ``(frame, capture_time_s)``; the capture time
comes from the ``clock`` given to the backend (the node passes its ROS clock, so simulated time
works too). Failures raise :class:`CaptureError` subclasses that carry ``retry_after_s``, so a
capture loop can wait (interruptibly) and call ``read()`` again.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from r2s2r_cameras.config import CameraDriverConfig, DeviceConfig, ReplayConfig
from r2s2r_cameras.processing import frame_encoding

Clock = Callable[[], float]
"""Returns the current time in seconds (epoch or simulated)."""

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".npy")
"""Files an image folder replays (``.npy`` for float depth)."""


class CaptureError(RuntimeError):
    """A frame could not be captured.

    Attributes:
        retry_after_s: How long to wait before calling ``read()`` again (None: do not retry).

    """

    def __init__(self, message: str, retry_after_s: float | None = 0.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeviceNotFoundError(CaptureError):
    """The device does not exist or cannot be opened."""


class UnsupportedPixelFormatError(CaptureError):
    """The device does not deliver the requested pixel format or resolution."""


class DeviceDisconnectedError(CaptureError):
    """The device stopped delivering frames (unplugged); the backend is reconnecting."""


class ReplaySourceError(CaptureError):
    """A replay path is missing, empty or unreadable."""


class EndOfStreamError(CaptureError):
    """A non-looping replay reached its end."""


class CameraBackend(abc.ABC):
    """A source of frames.

    Attributes:
        encoding: Encoding of the frames ``read()`` returns (``bgr8`` for OpenCV sources).
        nominal_rate_hz: Expected frame rate (for drop detection), 0 if unknown.

    """

    encoding: str = "bgr8"
    nominal_rate_hz: float = 0.0

    @abc.abstractmethod
    def open(self) -> None:
        """Open the source and check it delivers what was asked.

        Raises:
            CaptureError: (a subclass naming the problem) if it cannot.

        """

    @abc.abstractmethod
    def read(self) -> tuple[np.ndarray, float]:
        """Block until the next frame.

        Returns:
            ``(frame, capture_time_s)``: frame in :attr:`encoding`, capture time from the clock.

        Raises:
            CaptureError: No frame this time; see ``retry_after_s``.

        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the source (idempotent; may be called from another thread)."""

    @property
    @abc.abstractmethod
    def frame_size_px(self) -> tuple[int, int]:
        """(width, height) of delivered frames; valid after :meth:`open`."""

    def status(self) -> dict[str, str]:
        """Backend-specific key/values for diagnostics."""
        return {}

    def __enter__(self) -> CameraBackend:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Pacer:
    """Interruptible real-time pacing of a frame sequence."""

    def __init__(self, rate_hz: float, monotonic: Clock) -> None:
        self.period_s = 1.0 / rate_hz if rate_hz > 0 else 0.0
        self._monotonic = monotonic
        self._next_due_s: float | None = None
        self._stop = threading.Event()
        self.late_frames = 0

    def wait(self) -> None:
        if self.period_s <= 0:
            return
        now = self._monotonic()
        if self._next_due_s is None:
            self._next_due_s = now
        delay = self._next_due_s - now
        if delay > 0:
            self._stop.wait(delay)
        elif delay < -self.period_s:
            # Consumer fell behind by more than a frame: restart the schedule, do not burst.
            self.late_frames += 1
            self._next_due_s = now
        self._next_due_s += self.period_s

    def interrupt(self) -> None:
        self._stop.set()

    def reset(self) -> None:
        self._stop.clear()
        self._next_due_s = None


def _fourcc_text(code: int) -> str:
    return "".join(chr((code >> (8 * shift)) & 0xFF) for shift in range(4))


class DeviceBackend(CameraBackend):
    """A camera opened through ``cv2.VideoCapture`` (device index or path).

    Args:
        config: Device settings.
        clock: Capture-time source.
        monotonic: Monotonic clock for reconnect backoff (injectable for tests).

    """

    def __init__(
        self, config: DeviceConfig, clock: Clock = time.time, monotonic: Clock = time.monotonic
    ) -> None:
        self.config = config
        self.nominal_rate_hz = config.fps_hz
        self._clock = clock
        self._monotonic = monotonic
        self._capture: Any = None
        self._lock = threading.Lock()
        self._size_px: tuple[int, int] | None = None
        self._backoff_s = config.reconnect_initial_backoff_s
        self._next_attempt_s = 0.0
        self.reconnect_count = 0
        self.disconnect_count = 0
        self.last_error = ""

    def _source(self) -> int | str:
        device = self.config.device.strip()
        if device.isdigit():
            return int(device)
        if not Path(device).exists():
            raise DeviceNotFoundError(
                f"device.device = {device!r}: no such device path", retry_after_s=None
            )
        return device

    def _open_capture(self) -> tuple[Any, np.ndarray]:
        """Open and configure the device; returns the capture and its first frame."""
        config = self.config
        source = self._source()
        api = cv2.CAP_V4L2 if config.api == "v4l2" else cv2.CAP_ANY
        capture = cv2.VideoCapture(source, api)
        if not capture.isOpened():
            capture.release()
            raise DeviceNotFoundError(
                f"device.device = {config.device!r}: cannot open camera (not connected, "
                "busy, or no permission)",
                retry_after_s=None,
            )
        try:
            if config.pixel_format:
                capture.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*config.pixel_format))
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, config.width_px)
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, config.height_px)
            capture.set(cv2.CAP_PROP_FPS, config.fps_hz)
            if config.pixel_format:
                actual = int(capture.get(cv2.CAP_PROP_FOURCC))
                if actual not in (0, cv2.VideoWriter.fourcc(*config.pixel_format)):
                    raise UnsupportedPixelFormatError(
                        f"device.pixel_format = {config.pixel_format!r}: device "
                        f"{config.device!r} does not support it (it delivers "
                        f"{_fourcc_text(actual)!r})",
                        retry_after_s=None,
                    )
            ok, frame = capture.read()
            if not ok or frame is None:
                raise DeviceNotFoundError(
                    f"device.device = {config.device!r}: opened but delivered no frame",
                    retry_after_s=None,
                )
            height, width = frame.shape[:2]
            if (width, height) != (config.width_px, config.height_px):
                raise UnsupportedPixelFormatError(
                    f"device.width_px x device.height_px = {config.width_px}x{config.height_px}: "
                    f"device {config.device!r} delivers {width}x{height} instead",
                    retry_after_s=None,
                )
        except BaseException:
            capture.release()
            raise
        return capture, frame

    def open(self) -> None:
        """Open the device and check pixel format, resolution and that frames arrive.

        Raises:
            DeviceNotFoundError: Unknown or unopenable device.
            UnsupportedPixelFormatError: Pixel format or resolution not delivered.

        """
        capture, frame = self._open_capture()
        self.encoding = frame_encoding(frame)
        with self._lock:
            self._capture = capture
            self._size_px = (frame.shape[1], frame.shape[0])
        self._backoff_s = self.config.reconnect_initial_backoff_s

    @property
    def frame_size_px(self) -> tuple[int, int]:
        """(width, height) of delivered frames."""
        if self._size_px is None:
            raise RuntimeError("DeviceBackend.frame_size_px: open() the device first")
        return self._size_px

    @property
    def connected(self) -> bool:
        """True while the device is open."""
        return self._capture is not None

    def _reconnect(self) -> None:
        now = self._monotonic()
        if now < self._next_attempt_s:
            raise DeviceDisconnectedError(
                f"device {self.config.device!r} disconnected; next reconnect attempt in "
                f"{self._next_attempt_s - now:.2f} s",
                retry_after_s=self._next_attempt_s - now,
            )
        try:
            capture, _ = self._open_capture()
        except CaptureError as error:
            self._next_attempt_s = now + self._backoff_s
            retry = self._backoff_s
            self._backoff_s = min(2.0 * self._backoff_s, self.config.reconnect_max_backoff_s)
            self.last_error = f"reconnect failed: {error}"
            raise DeviceDisconnectedError(
                f"device {self.config.device!r} still disconnected ({error}); retrying in "
                f"{retry:.2f} s",
                retry_after_s=retry,
            ) from None
        with self._lock:
            self._capture = capture
        self._backoff_s = self.config.reconnect_initial_backoff_s
        self.reconnect_count += 1

    def read(self) -> tuple[np.ndarray, float]:
        """Grab the next frame, reconnecting first if the device was lost.

        Raises:
            DeviceDisconnectedError: The device is gone (retry after ``retry_after_s``).

        """
        if self._capture is None:
            self._reconnect()
        capture = self._capture
        ok, frame = capture.read() if capture is not None else (False, None)
        capture_time_s = self._clock()
        if not ok or frame is None:
            with self._lock:
                if self._capture is not None:
                    self._capture.release()
                    self._capture = None
            self.disconnect_count += 1
            self._next_attempt_s = self._monotonic() + self._backoff_s
            self.last_error = f"device {self.config.device!r} stopped delivering frames"
            raise DeviceDisconnectedError(self.last_error, retry_after_s=self._backoff_s)
        return frame, capture_time_s

    def close(self) -> None:
        """Release the device."""
        with self._lock:
            if self._capture is not None:
                self._capture.release()
                self._capture = None

    def status(self) -> dict[str, str]:
        """Report connection state, reconnects and disconnects."""
        return {
            "connected": str(self.connected),
            "reconnects": str(self.reconnect_count),
            "disconnects": str(self.disconnect_count),
        }


def _load_image(path: Path) -> np.ndarray:
    if path.suffix.lower() == ".npy":
        return np.load(path, allow_pickle=False)
    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ReplaySourceError(f"replay.path: cannot read image {path}", retry_after_s=None)
    if image.ndim == 3 and image.shape[2] == 4:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    return image


class ReplayBackend(CameraBackend):
    """Replays a video file or a folder of images as a camera.

    Args:
        config: Replay settings.
        clock: Capture-time source (frames are stamped when delivered).
        monotonic: Clock for real-time pacing.

    """

    def __init__(
        self, config: ReplayConfig, clock: Clock = time.time, monotonic: Clock = time.monotonic
    ) -> None:
        self.config = config
        self._clock = clock
        self._monotonic = monotonic
        self._files: list[Path] = []
        self._video: Any = None
        self._index = 0
        self._size_px: tuple[int, int] | None = None
        self._pacer: _Pacer | None = None
        self.frames_delivered = 0
        self.loops = 0

    def open(self) -> None:
        """Check the source and read its first frame (size and encoding).

        Raises:
            ReplaySourceError: Missing, empty or unreadable path.

        """
        path = Path(self.config.path)
        if not self.config.path or not path.exists():
            raise ReplaySourceError(
                f"replay.path = {self.config.path!r}: no such file or folder", retry_after_s=None
            )
        if path.is_dir():
            self._files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not self._files:
                raise ReplaySourceError(
                    f"replay.path = {self.config.path!r}: folder has no images "
                    f"({', '.join(IMAGE_SUFFIXES)})",
                    retry_after_s=None,
                )
            first = _load_image(self._files[0])
            source_rate_hz = 30.0
        else:
            self._open_video()
            source_rate_hz = float(self._video.get(cv2.CAP_PROP_FPS)) or 30.0
            ok, first = self._video.read()
            if not ok or first is None:
                raise ReplaySourceError(
                    f"replay.path = {self.config.path!r}: video has no readable frame",
                    retry_after_s=None,
                )
            self._open_video()  # rewind: first frame is delivered by read()
        try:
            self.encoding = frame_encoding(first)
        except ValueError as error:
            raise ReplaySourceError(f"replay.path: {error}", retry_after_s=None) from None
        self._size_px = (first.shape[1], first.shape[0])
        self.nominal_rate_hz = self.config.rate_hz or source_rate_hz
        self._pacer = _Pacer(
            self.nominal_rate_hz if self.config.real_time else 0.0, self._monotonic
        )
        self._index = 0

    def _open_video(self) -> None:
        if self._video is not None:
            self._video.release()
        self._video = cv2.VideoCapture(self.config.path)
        if not self._video.isOpened():
            raise ReplaySourceError(
                f"replay.path = {self.config.path!r}: not a readable video", retry_after_s=None
            )

    @property
    def frame_size_px(self) -> tuple[int, int]:
        """(width, height) of the replayed frames."""
        if self._size_px is None:
            raise RuntimeError("ReplayBackend.frame_size_px: open() first")
        return self._size_px

    def _next_frame(self) -> np.ndarray | None:
        if self._files:
            if self._index >= len(self._files):
                return None
            frame = _load_image(self._files[self._index])
            self._index += 1
            return frame
        ok, frame = self._video.read()
        return frame if ok else None

    def read(self) -> tuple[np.ndarray, float]:
        """Deliver the next frame, waiting for its time when replaying in real time.

        Raises:
            EndOfStreamError: End reached and ``loop`` is off.
            ReplaySourceError: A frame differs in size/encoding from the first one.

        """
        if self._pacer is None:
            raise ReplaySourceError("ReplayBackend.read: open() first", retry_after_s=None)
        frame = self._next_frame()
        if frame is None:
            if not self.config.loop:
                raise EndOfStreamError(
                    f"replay of {self.config.path!r} ended after {self.frames_delivered} frames",
                    retry_after_s=None,
                )
            self.loops += 1
            self._index = 0
            if not self._files:
                self._open_video()
            frame = self._next_frame()
            if frame is None:
                raise ReplaySourceError(
                    f"replay.path = {self.config.path!r}: no frame after rewinding",
                    retry_after_s=None,
                )
        size = (frame.shape[1], frame.shape[0])
        if size != self._size_px or frame_encoding(frame) != self.encoding:
            raise ReplaySourceError(
                f"replay.path = {self.config.path!r}: frame {self.frames_delivered} is "
                f"{size[0]}x{size[1]} {frame.dtype}, the first was "
                f"{self.frame_size_px[0]}x{self.frame_size_px[1]} {self.encoding}",
                retry_after_s=0.0,
            )
        self._pacer.wait()
        self.frames_delivered += 1
        return frame, self._clock()

    def close(self) -> None:
        """Stop pacing and release the video."""
        if self._pacer is not None:
            self._pacer.interrupt()
        if self._video is not None:
            self._video.release()
            self._video = None

    def status(self) -> dict[str, str]:
        """Frames delivered, loops and frames late for their schedule."""
        return {
            "frames_delivered": str(self.frames_delivered),
            "loops": str(self.loops),
            "late_frames": str(self._pacer.late_frames if self._pacer else 0),
        }


class CallableBackend(CameraBackend):
    """Frames from a function, e.g. a simulator renderer.

    ``SimCameraBackend`` wraps its renderer this way: ``grab()`` returns the image (and may
    block until the simulator has a new frame); ``capture_time`` returns the time to stamp it
    with (simulation time), defaulting to ``clock``.

    Args:
        grab: Returns the next frame in ``encoding``.
        encoding: Encoding of the frames ``grab`` returns (e.g. ``rgb8``, ``32FC1``).
        frame_size_px: (width, height) the frames have.
        rate_hz: Pace ``read()`` at this rate; 0 leaves pacing to ``grab``.
        clock: Capture-time source.
        capture_time: Optional function returning the capture time of the last grabbed frame.
        monotonic: Clock for pacing.

    """

    def __init__(
        self,
        grab: Callable[[], np.ndarray],
        encoding: str,
        frame_size_px: tuple[int, int],
        rate_hz: float = 0.0,
        clock: Clock = time.time,
        capture_time: Callable[[], float] | None = None,
        monotonic: Clock = time.monotonic,
    ) -> None:
        self.encoding = encoding
        self.nominal_rate_hz = rate_hz
        self._grab = grab
        self._size_px = frame_size_px
        self._clock = capture_time or clock
        self._pacer = _Pacer(rate_hz, monotonic)

    def open(self) -> None:
        """Start pacing."""
        self._pacer.reset()

    @property
    def frame_size_px(self) -> tuple[int, int]:
        """(width, height) of the frames."""
        return self._size_px

    def read(self) -> tuple[np.ndarray, float]:
        """Call ``grab`` (after pacing) and stamp the result.

        Raises:
            CaptureError: If ``grab`` returns a frame of the wrong size.

        """
        self._pacer.wait()
        frame = self._grab()
        if (frame.shape[1], frame.shape[0]) != self._size_px:
            raise CaptureError(
                f"grab() returned {frame.shape[1]}x{frame.shape[0]}, expected "
                f"{self._size_px[0]}x{self._size_px[1]}"
            )
        return frame, self._clock()

    def close(self) -> None:
        """Interrupt pacing."""
        self._pacer.interrupt()


BackendFactory = Callable[[CameraDriverConfig, Clock], CameraBackend]
"""Builds a backend from the driver config and a capture clock."""

BUILTIN_BACKENDS: dict[str, BackendFactory] = {
    "device": lambda config, clock: DeviceBackend(config.device, clock=clock),
    "replay": lambda config, clock: ReplayBackend(config.replay, clock=clock),
}
"""Backends selectable by the ``backend`` parameter (read-only; pass extra ones explicitly)."""


class UnknownBackendError(ValueError):
    """The ``backend`` parameter names no known backend."""


def create_backend(
    config: CameraDriverConfig,
    clock: Clock = time.time,
    extra_backends: dict[str, BackendFactory] | None = None,
) -> CameraBackend:
    """Build the backend named by ``config.backend``.

    Args:
        config: Driver config.
        clock: Capture-time source.
        extra_backends: More factories by name (e.g. ``{"sim": make_sim_backend}``).

    Raises:
        UnknownBackendError: Naming the known backends.

    """
    factories = {**BUILTIN_BACKENDS, **(extra_backends or {})}
    factory = factories.get(config.backend)
    if factory is None:
        raise UnknownBackendError(
            f"backend = {config.backend!r}: unknown capture backend "
            f"(known: {', '.join(sorted(factories))})"
        )
    return factory(config, clock)
