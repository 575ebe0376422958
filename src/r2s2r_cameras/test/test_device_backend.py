"""DeviceBackend against a patched cv2.VideoCapture: frames, unplug, reconnect, bad input."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from r2s2r_cameras.backends import (
    DeviceBackend,
    DeviceDisconnectedError,
    DeviceNotFoundError,
    UnsupportedPixelFormatError,
)
from r2s2r_cameras.config import DeviceConfig

from r2s2r_cameras import backends


class FakeCamera:
    """A USB camera that can be unplugged; supports MJPG and YUYV at 640x480 only."""

    def __init__(self) -> None:
        self.plugged = True
        self.frames_served = 0
        self.opened_count = 0
        self.supported_fourccs = {cv2.VideoWriter.fourcc(*"MJPG"), cv2.VideoWriter.fourcc(*"YUYV")}
        self.size_px = (640, 480)


class FakeVideoCapture:
    """Stand-in for cv2.VideoCapture bound to one FakeCamera at index 0."""

    camera: FakeCamera

    def __init__(self, source: Any, api: int = 0) -> None:
        self.open_ = source == 0 and self.camera.plugged
        self.fourcc = cv2.VideoWriter.fourcc(*"YUYV")
        if self.open_:
            self.camera.opened_count += 1

    def isOpened(self) -> bool:  # noqa: N802 - OpenCV's name
        return self.open_

    def set(self, prop: int, value: float) -> bool:
        if prop == cv2.CAP_PROP_FOURCC and int(value) in self.camera.supported_fourccs:
            self.fourcc = int(value)
        return True

    def get(self, prop: int) -> float:
        return float(self.fourcc) if prop == cv2.CAP_PROP_FOURCC else 0.0

    def read(self) -> tuple[bool, np.ndarray | None]:
        if not (self.open_ and self.camera.plugged):
            return False, None
        self.camera.frames_served += 1
        width, height = self.camera.size_px
        frame = np.full((height, width, 3), self.camera.frames_served % 256, np.uint8)
        return True, frame

    def release(self) -> None:
        self.open_ = False


class FakeTime:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def camera(monkeypatch: pytest.MonkeyPatch) -> FakeCamera:
    fake = FakeCamera()
    FakeVideoCapture.camera = fake
    monkeypatch.setattr(backends.cv2, "VideoCapture", FakeVideoCapture)
    return fake


def make_backend(**overrides: Any) -> tuple[DeviceBackend, FakeTime]:
    clock = FakeTime()
    settings: dict[str, Any] = {
        "device": "0",
        "reconnect_initial_backoff_s": 0.5,
        "reconnect_max_backoff_s": 2.0,
        **overrides,
    }
    config = DeviceConfig(**settings)
    return DeviceBackend(config, clock=clock, monotonic=clock), clock


def test_frames_are_delivered_with_capture_time(camera: FakeCamera) -> None:
    backend, clock = make_backend()
    backend.open()
    assert backend.frame_size_px == (640, 480)
    assert backend.encoding == "bgr8"
    values = []
    for step in range(3):
        clock.now_s = 100.0 + step / 30
        frame, capture_time_s = backend.read()
        assert frame.shape == (480, 640, 3)
        assert capture_time_s == pytest.approx(100.0 + step / 30)
        values.append(int(frame[0, 0, 0]))
    assert values == [2, 3, 4]  # frame 1 was consumed by open()'s check
    backend.close()
    assert not backend.connected


def test_unplug_then_reconnect_with_backoff(camera: FakeCamera) -> None:
    backend, clock = make_backend()
    backend.open()
    backend.read()
    camera.plugged = False
    with pytest.raises(DeviceDisconnectedError) as lost:
        backend.read()
    assert lost.value.retry_after_s == pytest.approx(0.5)
    assert not backend.connected
    # Before the backoff has passed, no reopen is attempted.
    clock.now_s += 0.2
    with pytest.raises(DeviceDisconnectedError, match=r"next reconnect attempt in 0\.30 s"):
        backend.read()
    opens_before = camera.opened_count
    # Still unplugged at the attempt: the backoff doubles (0.5 -> 1.0 -> 2.0, capped at 2.0).
    retries = []
    for _ in range(3):
        clock.now_s += 10.0
        with pytest.raises(DeviceDisconnectedError) as failed:
            backend.read()
        retries.append(failed.value.retry_after_s)
    assert retries == [pytest.approx(0.5), pytest.approx(1.0), pytest.approx(2.0)]
    assert camera.opened_count == opens_before
    # Plug back in: the next read after the backoff reopens and delivers a frame.
    camera.plugged = True
    clock.now_s += 2.0
    frame, _ = backend.read()
    assert frame.shape == (480, 640, 3)
    assert backend.connected
    assert backend.reconnect_count == 1
    assert backend.disconnect_count == 1
    # Backoff is reset after a successful reconnect.
    camera.plugged = False
    with pytest.raises(DeviceDisconnectedError) as lost_again:
        backend.read()
    assert lost_again.value.retry_after_s == pytest.approx(0.5)


def test_unknown_device_index_fails_at_open(camera: FakeCamera) -> None:
    backend, _ = make_backend(device="3")
    with pytest.raises(DeviceNotFoundError, match=r"device.device = '3': cannot open camera"):
        backend.open()


def test_unknown_device_path_fails_at_open(camera: FakeCamera) -> None:
    backend, _ = make_backend(device="/dev/v4l/by-id/no-such-camera")
    with pytest.raises(DeviceNotFoundError, match="no such device path"):
        backend.open()


def test_unsupported_pixel_format_fails_at_open(camera: FakeCamera) -> None:
    backend, _ = make_backend(pixel_format="H264")
    with pytest.raises(UnsupportedPixelFormatError, match=r"'H264'.*delivers 'YUYV'"):
        backend.open()


def test_unsupported_resolution_fails_at_open(camera: FakeCamera) -> None:
    backend, _ = make_backend(width_px=1920, height_px=1080)
    with pytest.raises(UnsupportedPixelFormatError, match="delivers 640x480 instead"):
        backend.open()


def test_bad_pixel_format_text_is_a_schema_error() -> None:
    with pytest.raises(ValueError, match="pixel_format"):
        DeviceConfig(pixel_format="mjpeg")
