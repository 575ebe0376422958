"""How ``r2s2r dataset export-lerobot`` writes a LeRobot v3.0 dataset: its typed settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from r2s2r_common.config import ConfigModel

Codec = Literal["av1", "h264"]


class LeRobotExportConfig(ConfigModel):
    """How ``r2s2r dataset export-lerobot`` writes a LeRobot v3.0 dataset."""

    codec: Codec = Field(
        default="av1", description="Video codec: 'av1' (SVT-AV1, LeRobot's default) or 'h264'."
    )
    lossless: bool = Field(
        default=False,
        description="Write H.264 in RGB at qp 0 (libx264rgb): frames decode bit for bit, files "
        "are several times larger; overrides codec and crf.",
    )
    crf: int | None = Field(
        default=None, ge=0, le=63, description="Constant rate factor (None: 30 for av1, 23 h264)."
    )
    gop_frames: int = Field(
        default=2, ge=1, le=600, description="Frames between key frames (LeRobot uses 2)."
    )
    chunk_size: int = Field(default=1000, ge=1, description="Files per chunk folder.")
    data_file_size_mb: float = Field(
        default=100.0, gt=0.0, description="A data file is closed once it passes this size (MB)."
    )
    video_file_size_mb: float = Field(
        default=200.0, gt=0.0, description="A video file is closed once it passes this size (MB)."
    )
    robot_type: str = Field(default="r2s2r_cell", description="info.json robot_type.")
    sim_ratio: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="The co-training sim_ratio to spell out as per-frame weights in the export's "
        "README and info.json (None: the formula only).",
    )
