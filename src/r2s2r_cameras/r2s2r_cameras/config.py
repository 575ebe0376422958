"""Typed configuration of the camera driver (one schema for the core and the node)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from r2s2r_common.config import ConfigModel

OutputEncoding = Literal["rgb8", "bgr8", "mono8", "16UC1", "32FC1"]


class DeviceConfig(ConfigModel):
    """A V4L2/USB camera opened through ``cv2.VideoCapture``."""

    device: str = Field(
        default="0",
        description="Device index ('0') or path ('/dev/video0', '/dev/v4l/by-id/...').",
    )
    api: Literal["any", "v4l2"] = Field(
        default="any", description="OpenCV capture API: 'any' (auto) or 'v4l2'."
    )
    pixel_format: str = Field(
        default="MJPG",
        pattern=r"^([A-Z0-9 ]{4})?$",
        description="FOURCC pixel format (e.g. MJPG, YUYV); empty keeps the device default.",
    )
    width_px: int = Field(default=640, ge=1, le=8192, description="Requested image width, px.")
    height_px: int = Field(default=480, ge=1, le=8192, description="Requested image height, px.")
    fps_hz: float = Field(default=30.0, gt=0.0, le=1000.0, description="Requested frame rate, Hz.")
    reconnect_initial_backoff_s: float = Field(
        default=0.5, gt=0.0, le=60.0, description="First wait before reopening a lost device, s."
    )
    reconnect_max_backoff_s: float = Field(
        default=5.0, gt=0.0, le=600.0, description="Longest wait between reopen attempts, s."
    )


class ReplayConfig(ConfigModel):
    """Replay of a video file or a folder of images."""

    path: str = Field(
        default="", description="Video file (avi, mp4, ...) or folder of images (sorted by name)."
    )
    loop: bool = Field(default=True, description="Start again at the end instead of stopping.")
    real_time: bool = Field(
        default=True, description="Pace frames at rate_hz; false replays as fast as possible."
    )
    rate_hz: float = Field(
        default=0.0,
        ge=0.0,
        le=1000.0,
        description="Replay rate, Hz; 0 uses the video's own rate (30 Hz for image folders).",
    )


class CameraDriverConfig(ConfigModel):
    """Parameters of one ``camera_driver`` node."""

    camera_name: str = Field(
        default="camera",
        pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
        description="Camera name: topics <camera_name>/image_raw, frame <name>_optical_frame.",
    )
    backend: str = Field(default="device", description="Capture backend: 'device' or 'replay'.")
    encoding: OutputEncoding = Field(
        default="rgb8", description="Encoding of the published image_raw."
    )
    calibration_file: str = Field(
        default="",
        description="camera_calibration YAML for camera_info; empty publishes an uncalibrated one.",
    )
    output_width_px: int = Field(
        default=0, ge=0, le=8192, description="Resize published images to this width; 0 = off."
    )
    output_height_px: int = Field(
        default=0, ge=0, le=8192, description="Resize published images to this height; 0 = off."
    )
    autostart: bool = Field(
        default=True,
        description="Configure and activate at startup (false: wait for a lifecycle manager).",
    )
    diagnostics_period_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="Period of /diagnostics messages, s."
    )
    device: DeviceConfig = Field(default_factory=DeviceConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)

    @property
    def optical_frame(self) -> str:
        """REP 103 optical frame of this camera (z forward, x right, y down)."""
        return f"{self.camera_name}_optical_frame"

    @property
    def resize_enabled(self) -> bool:
        """True when output_width_px and output_height_px ask for resizing."""
        return self.output_width_px > 0 and self.output_height_px > 0
