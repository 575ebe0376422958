"""Writing a LeRobot v3.0 dataset's files: mp4 videos, parquet tables and the JSON meta.

Episodes are concatenated into a data file and, per camera, a video file until the file passes
``data_file_size_mb`` / ``video_file_size_mb``; a chunk holds ``chunk_size`` files. An episode's
frames sit in its video file from ``videos/<key>/from_timestamp`` on, frame ``i`` at
``from_timestamp + i / fps``.

Videos are AV1 (SVT-AV1, LeRobot's default: crf 30, a key frame every 2 frames) or H.264;
``lossless`` writes H.264 in RGB at qp 0 (``libx264rgb``), which decodes to the recorded pixels
bit for bit.
"""

from __future__ import annotations

import json
import logging
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .lerobot_config import LeRobotExportConfig
from .lerobot_format import VIDEO_PATH, ExportError

_ENCODERS: dict[str, str] = {"av1": "libsvtav1", "h264": "libx264"}
_DEFAULT_CRF: dict[str, int] = {"av1": 30, "h264": 23}


def _file_position(counter: int, chunk_size: int) -> tuple[int, int]:
    return counter // chunk_size, counter % chunk_size


class VideoWriter:
    """One camera's video files: episodes encoded back to back, a new file past the size limit."""

    def __init__(self, root: Path, video_key: str, fps: int, config: LeRobotExportConfig) -> None:
        self.root = root
        self.video_key = video_key
        self.fps = fps
        self.config = config
        self.file_counter = 0
        self._container: Any = None
        self._stream: Any = None
        self._path: Path | None = None
        self._frames_in_file = 0
        self.frame_shape: tuple[int, ...] | None = None

    @property
    def encoder(self) -> tuple[str, str, dict[str, str]]:
        """``(encoder name, pixel format, options)``."""
        cfg = self.config
        if cfg.lossless:
            return "libx264rgb", "rgb24", {"qp": "0", "g": str(cfg.gop_frames), "preset": "fast"}
        crf = cfg.crf if cfg.crf is not None else _DEFAULT_CRF[cfg.codec]
        options = {"crf": str(crf), "g": str(cfg.gop_frames)}
        if cfg.codec == "av1":
            options["preset"] = "12"
        return _ENCODERS[cfg.codec], "yuv420p", options

    def _open(self) -> None:
        import av

        chunk, index = _file_position(self.file_counter, self.config.chunk_size)
        self._path = self.root / VIDEO_PATH.format(
            video_key=self.video_key, chunk_index=chunk, file_index=index
        )
        self._path.parent.mkdir(parents=True, exist_ok=True)
        name, pix_fmt, options = self.encoder
        assert self.frame_shape is not None
        height, width = self.frame_shape[:2]
        if pix_fmt == "yuv420p" and (height % 2 or width % 2):
            raise ExportError(
                f"{self.video_key}: {width}x{height} px images cannot be encoded in yuv420p "
                "(odd size); export with --lossless (RGB, any size)"
            )
        # SVT-AV1 prints its banner at info level unless told otherwise.
        os.environ.setdefault("SVT_LOG", "1")
        logging.getLogger("libav").setLevel(logging.ERROR)
        self._container = av.open(str(self._path), "w", format="mp4")
        stream = self._container.add_stream(name, rate=self.fps, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        self._stream = stream
        self._frames_in_file = 0

    def add_episode(self, images: np.ndarray) -> dict[str, float | int]:
        """Encode one episode's uint8 (T, H, W, 3) frames; return its episode-row entries."""
        import av

        if self.frame_shape is None:
            self.frame_shape = tuple(int(d) for d in images.shape[1:])
        elif tuple(images.shape[1:]) != self.frame_shape:
            raise ExportError(
                f"{self.video_key}: frames of shape {tuple(images.shape[1:])} after episodes of "
                f"{self.frame_shape} (one video feature has one shape)"
            )
        if self._container is None:
            self._open()
        chunk, index = _file_position(self.file_counter, self.config.chunk_size)
        start = self._frames_in_file
        time_base = Fraction(1, self.fps)
        for image in images:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts = self._frames_in_file
            frame.time_base = time_base
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
            self._frames_in_file += 1
        entry: dict[str, float | int] = {
            f"videos/{self.video_key}/chunk_index": chunk,
            f"videos/{self.video_key}/file_index": index,
            f"videos/{self.video_key}/from_timestamp": start / self.fps,
            f"videos/{self.video_key}/to_timestamp": self._frames_in_file / self.fps,
        }
        assert self._path is not None
        # The muxer writes nothing until the encoder's first packets: no file yet is size 0.
        written = self._path.stat().st_size if self._path.exists() else 0
        if written > self.config.video_file_size_mb * 1e6:
            self.close()
            self.file_counter += 1
        return entry

    def close(self) -> None:
        """Flush the encoder and close the current file."""
        if self._container is not None:
            for packet in self._stream.encode():
                self._container.mux(packet)
            self._container.close()
            self._container = None

    def video_info(self) -> dict[str, Any]:
        """LeRobot's ``features[key]["info"]`` of the first file, read back from it."""
        import av

        path = self.root / VIDEO_PATH.format(video_key=self.video_key, chunk_index=0, file_index=0)
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            return {
                "video.height": stream.height,
                "video.width": stream.width,
                "video.codec": stream.codec.canonical_name,
                "video.pix_fmt": stream.pix_fmt,
                "video.is_depth_map": False,
                "video.fps": self.fps,
                "video.channels": 3,
                "has_audio": False,
            }


class TableWriter:
    """Rows into parquet files of one kind (data or episodes), a new file past the size limit."""

    def __init__(self, root: Path, template: str, max_mb: float, chunk_size: int) -> None:
        self.root = root
        self.template = template
        self.max_bytes = max_mb * 1e6
        self.chunk_size = chunk_size
        self.file_counter = 0
        self._writer: Any = None
        self._bytes = 0

    def position(self) -> tuple[int, int]:
        """``(chunk_index, file_index)`` the next rows go to."""
        return _file_position(self.file_counter, self.chunk_size)

    def write(self, table: Any) -> None:
        """Append a pyarrow table's rows; a new file once the current one passes the limit."""
        import pyarrow.parquet as pq

        if self._writer is not None and not self._writer.schema.equals(table.schema):
            raise ExportError(
                f"{self.template}: rows with columns {table.schema.names} after rows with "
                f"{self._writer.schema.names} (every episode must have the same features)"
            )
        if self._writer is None:
            chunk, index = self.position()
            path = self.root / self.template.format(chunk_index=chunk, file_index=index)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(str(path), table.schema, compression="snappy")
            self._bytes = 0
        self._writer.write_table(table)
        self._bytes += int(table.nbytes)
        if self._bytes > self.max_bytes:
            self.close()
            self.file_counter += 1

    def close(self) -> None:
        """Close the current file."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def arrow_column(values: np.ndarray) -> Any:
    """Return a per-frame array as an Arrow column: scalars, or fixed-size lists for vectors."""
    import pyarrow as pa

    if values.ndim == 1:
        return pa.array(values)
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, int(np.prod(values.shape[1:])))


def episode_row_table(row: dict[str, Any]) -> Any:
    """Return one row of ``meta/episodes`` as a one-row pyarrow table."""
    import pyarrow as pa

    return pa.table({key: [value] for key, value in row.items()})


def write_json(path: Path, content: dict[str, Any]) -> None:
    """Write a JSON meta file (``info.json``, ``stats.json``), making its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=4) + "\n")


def write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """``meta/tasks.parquet`` as pandas writes a frame indexed by task with a task_index column.

    LeRobot reads it with ``pandas.read_parquet``; the ``pandas`` schema metadata makes the
    ``task`` column the frame's index, as LeRobot expects (written without pandas, which the
    workspace does not need).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(tasks)
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    table = pa.table(
        {
            "task_index": pa.array([tasks[name] for name in names], type=pa.int64()),
            "task": pa.array(names, type=pa.string()),
        }
    ).replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path))
