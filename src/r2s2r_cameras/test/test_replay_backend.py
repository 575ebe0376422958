"""ReplayBackend with a real MJPG/avi video written here and an image folder."""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from r2s2r_cameras.backends import (
    CallableBackend,
    EndOfStreamError,
    ReplayBackend,
    ReplaySourceError,
    UnknownBackendError,
    create_backend,
)
from r2s2r_cameras.config import CameraDriverConfig, ReplayConfig

WIDTH, HEIGHT, FRAMES = 160, 120, 6


def frame_with_level(index: int) -> np.ndarray:
    frame = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    frame[:, :, index % 3] = 40 * (index + 1)  # one channel lit: checks BGR order survives
    return frame


@pytest.fixture
def video_file(tmp_path: Path) -> Path:
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 25.0, (WIDTH, HEIGHT))
    assert writer.isOpened()
    for index in range(FRAMES):
        writer.write(frame_with_level(index))
    writer.release()
    return path


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "frames"
    folder.mkdir()
    for index in range(FRAMES):
        cv2.imwrite(str(folder / f"frame_{index:03d}.png"), frame_with_level(index))
    (folder / "notes.txt").write_text("not an image")
    return folder


def dominant(frame: np.ndarray) -> tuple[int, int]:
    """(channel, level) of the lit channel."""
    means = frame.reshape(-1, 3).mean(axis=0)
    channel = int(np.argmax(means))
    return channel, round(float(means[channel]))


def test_video_replays_frames_in_order_and_loops(video_file: Path) -> None:
    backend = ReplayBackend(ReplayConfig(path=str(video_file), loop=True, real_time=False))
    backend.open()
    assert backend.frame_size_px == (WIDTH, HEIGHT)
    assert backend.encoding == "bgr8"
    assert backend.nominal_rate_hz == pytest.approx(25.0)
    seen = [dominant(backend.read()[0]) for _ in range(FRAMES + 2)]
    expected = [(i % 3, 40 * (i + 1)) for i in range(FRAMES)]
    for (channel, level), (want_channel, want_level) in zip(
        seen, expected + expected[:2], strict=True
    ):
        assert channel == want_channel
        assert abs(level - want_level) <= 3  # MJPG is lossy
    assert backend.loops == 1
    backend.close()


def test_video_without_loop_ends(video_file: Path) -> None:
    backend = ReplayBackend(ReplayConfig(path=str(video_file), loop=False, real_time=False))
    backend.open()
    for _ in range(FRAMES):
        backend.read()
    with pytest.raises(EndOfStreamError, match=f"ended after {FRAMES} frames"):
        backend.read()


def test_image_folder_replays_exactly(image_folder: Path) -> None:
    backend = ReplayBackend(ReplayConfig(path=str(image_folder), loop=True, real_time=False))
    backend.open()
    for index in range(FRAMES + 1):
        frame, _ = backend.read()
        np.testing.assert_array_equal(frame, frame_with_level(index % FRAMES))  # PNG: lossless


def test_depth_folder_keeps_16_bit(tmp_path: Path) -> None:
    depth_mm = (np.arange(HEIGHT * WIDTH, dtype=np.uint32) % 65536).astype(np.uint16)
    depth_mm = depth_mm.reshape(HEIGHT, WIDTH)
    cv2.imwrite(str(tmp_path / "d0.png"), depth_mm)
    backend = ReplayBackend(ReplayConfig(path=str(tmp_path), real_time=False))
    backend.open()
    assert backend.encoding == "16UC1"
    np.testing.assert_array_equal(backend.read()[0], depth_mm)


def test_real_time_replay_is_paced(image_folder: Path) -> None:
    backend = ReplayBackend(ReplayConfig(path=str(image_folder), real_time=True, rate_hz=50.0))
    backend.open()
    start = time.monotonic()
    stamps = [backend.read()[1] for _ in range(6)]
    elapsed = time.monotonic() - start
    assert elapsed == pytest.approx(5 / 50.0, abs=0.04)
    assert np.all(np.diff(stamps) > 0.0)


@pytest.mark.parametrize("path", ["", "/nonexistent/clip.avi"])
def test_missing_source_is_an_error(path: str) -> None:
    with pytest.raises(ReplaySourceError, match="no such file or folder"):
        ReplayBackend(ReplayConfig(path=path)).open()


def test_empty_folder_and_bad_video_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ReplaySourceError, match="folder has no images"):
        ReplayBackend(ReplayConfig(path=str(tmp_path))).open()
    junk = tmp_path / "junk.avi"
    junk.write_bytes(b"not a video at all")
    with pytest.raises(ReplaySourceError, match=r"junk\.avi"):
        ReplayBackend(ReplayConfig(path=str(junk))).open()


def test_callable_backend_wraps_a_renderer() -> None:
    counter = iter(range(100))
    backend = CallableBackend(
        grab=lambda: np.full((4, 6, 3), next(counter), np.uint8),
        encoding="rgb8",
        frame_size_px=(6, 4),
        capture_time=lambda: 42.5,
    )
    with backend:
        frame, stamp = backend.read()
        assert frame[0, 0, 0] == 0 and stamp == 42.5
        assert backend.read()[0][0, 0, 0] == 1


def test_create_backend_by_name(image_folder: Path) -> None:
    config = CameraDriverConfig(backend="replay", replay=ReplayConfig(path=str(image_folder)))
    assert isinstance(create_backend(config), ReplayBackend)
    with pytest.raises(UnknownBackendError, match=r"'usb3'.*known: device, replay, sim"):
        create_backend(
            config.model_copy(update={"backend": "usb3"}),
            extra_backends={
                "sim": lambda c, clock: CallableBackend(lambda: np.zeros((1, 1)), "mono8", (1, 1))
            },
        )


@pytest.mark.parametrize(
    ("name", "node"), [("head_camera", "head_camera_driver"), ("hand_camera", "hand_camera_driver")]
)
def test_shipped_parameter_files_match_the_schema(name: str, node: str) -> None:
    from r2s2r_common.config import load_config

    root = Path(__file__).resolve().parents[3]
    config = load_config(CameraDriverConfig, root / f"config/nodes/{node}.yaml", node)
    assert config.camera_name == name
    assert config.optical_frame == f"{name}_optical_frame"
