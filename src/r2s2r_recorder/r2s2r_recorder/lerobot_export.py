"""Export an episode dataset (robomimic-style HDF5) to LeRobot's v3.0 dataset layout.

The layout written (as LeRobot's ``LeRobotDataset`` reads it, codebase version ``v3.0``)::

    OUT/meta/info.json                              fps, features, chunking, paths
    OUT/meta/stats.json                             per feature: min max mean std count q01..q99
    OUT/meta/tasks.parquet                          index: task string; column task_index
    OUT/meta/episodes/chunk-000/file-000.parquet    one row per episode (ranges, files, stats)
    OUT/data/chunk-000/file-000.parquet             one row per frame (states, actions, indices)
    OUT/videos/observation.images.<camera>/chunk-000/file-000.mp4   episodes back to back
    OUT/README.md                                   what was exported, co-training weights

Episodes are concatenated into a data file and, per camera, a video file until the file passes
``data_file_size_mb`` / ``video_file_size_mb``; a chunk holds ``chunk_size`` files. An episode's
frames sit in its video file from ``videos/<key>/from_timestamp`` on, frame ``i`` at
``from_timestamp + i / fps``; the ``timestamp`` column is ``frame_index / fps`` (the recorded
times are kept as ``r2s2r.timestamp_s``).

Videos are AV1 (SVT-AV1, LeRobot's default: crf 30, a key frame every 2 frames) or H.264;
``lossless`` writes H.264 in RGB at qp 0 (``libx264rgb``), which decodes to the recorded pixels
bit for bit. LeRobot has no per-dataset sampling weight: the export's README and
``info.json["r2s2r"]["co_training"]`` say how to reproduce the workspace's ``sim_ratio``.

The export is written into ``.OUT.partial`` beside ``OUT`` and renamed when complete, so ``OUT``
is either absent or whole. Nothing here imports rclpy, torch or LeRobot.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel

from .dataset import (
    CAMERA_KEYS,
    DatasetError,
    Episode,
    EpisodeDataset,
    EpisodeMetadata,
    partial_path,
)

CODEBASE_VERSION = "v3.0"
"""LeRobot dataset format version written (``info.json["codebase_version"]``)."""
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
README_NAME = "README.md"
QUANTILES: tuple[float, ...] = (0.01, 0.10, 0.50, 0.90, 0.99)
"""Quantiles in the stats (LeRobot's ``q01`` ... ``q99``)."""

STATE_KEY = "observation.state"
ACTION_KEY = "action"
RECORDED_TIME_KEY = "r2s2r.timestamp_s"
IMAGE_FEATURE_PREFIX = "observation.images."
_INDEX_KEYS = ("frame_index", "episode_index", "index", "task_index")

Codec = Literal["av1", "h264"]
_ENCODERS: dict[str, str] = {"av1": "libsvtav1", "h264": "libx264"}
_DEFAULT_CRF: dict[str, int] = {"av1": 30, "h264": 23}


class ExportError(DatasetError):
    """The export cannot be made: its output is in the way, or the input cannot be exported."""


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


@dataclass
class ExportSummary:
    """What :func:`export_lerobot` wrote.

    Attributes:
        output: The exported dataset folder.
        episodes: Episodes written.
        frames: Frames written.
        bytes_written: Size of everything under ``output``.
        seconds: Wall time of the export.
        video_codec: Codec name of the videos (``av1``, ``h264``).
        frames_per_source: Frames per episode source (``real``, ``sim``).

    """

    output: Path
    episodes: int
    frames: int
    bytes_written: int
    seconds: float
    video_codec: str
    frames_per_source: dict[str, int] = field(default_factory=dict)

    def format(self) -> str:
        """One line for a person."""
        sources = ", ".join(f"{k} {v}" for k, v in sorted(self.frames_per_source.items()))
        return (
            f"{self.output}: LeRobot {CODEBASE_VERSION}, {self.episodes} episodes, "
            f"{self.frames} frames ({sources}), {self.video_codec} video, "
            f"{self.bytes_written / 1e6:.1f} MB in {self.seconds:.1f} s"
        )


# --- stats ------------------------------------------------------------------------------------


def _array_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Stats over axis 0 of a (N, ...) array (exact quantiles), LeRobot's keys."""
    data = values.astype(np.float64)
    stats = {
        "min": data.min(axis=0),
        "max": data.max(axis=0),
        "mean": data.mean(axis=0),
        "std": data.std(axis=0),
        "count": np.array([data.shape[0]]),
    }
    quantiles = np.quantile(data, QUANTILES, axis=0)
    for q, value in zip(QUANTILES, quantiles, strict=True):
        stats[f"q{round(q * 100):02d}"] = value
    return stats


def _image_histogram(images: np.ndarray) -> np.ndarray:
    """Per-channel 256-bin histogram of uint8 (T, H, W, 3) images: int64 (3, 256)."""
    return np.stack(
        [np.bincount(images[..., c].ravel(), minlength=256) for c in range(images.shape[-1])]
    ).astype(np.int64)


def _histogram_stats(histogram: np.ndarray, count: int) -> dict[str, np.ndarray]:
    """Per-channel stats of pixel values in [0, 1] from (C, 256) histograms, shape (C, 1, 1).

    Exact: every pixel is counted (LeRobot samples frames); quantiles are the smallest value
    whose cumulative share reaches q. ``count`` is the number of frames, as LeRobot counts.
    """
    levels = np.arange(256, dtype=np.float64) / 255.0
    totals = histogram.sum(axis=1).astype(np.float64)
    mean = (histogram * levels).sum(axis=1) / totals
    var = (histogram * levels**2).sum(axis=1) / totals - mean**2
    present = histogram > 0
    cumulative = np.cumsum(histogram, axis=1) / totals[:, None]
    stats = {
        "min": np.array([levels[np.argmax(row)] for row in present]),
        "max": np.array([levels[255 - np.argmax(row[::-1])] for row in present]),
        "mean": mean,
        "std": np.sqrt(np.maximum(var, 0.0)),
    }
    for q in QUANTILES:
        stats[f"q{round(q * 100):02d}"] = np.array(
            [levels[int(np.searchsorted(row, q - 1e-12))] for row in cumulative]
        )
    shaped = {k: v.reshape(-1, 1, 1) for k, v in stats.items()}
    shaped["count"] = np.array([count])
    return shaped


def _jsonable(stats: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in stats.items()}


# --- features ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Column:
    """A per-frame feature of the data files: its LeRobot name, dtype, shape and names."""

    key: str
    dtype: str
    shape: tuple[int, ...]
    names: list[str] | None

    def spec(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "names": self.names}


def _episode_columns(episode: Episode) -> dict[str, np.ndarray]:
    """One episode's per-frame arrays by LeRobot feature name (no videos, no index columns)."""
    n = episode.num_frames
    columns: dict[str, np.ndarray] = {
        STATE_KEY: episode.joint_pos_rad.astype(np.float32),
        "observation.belt_speed_mps": episode.belt_speed_mps.reshape(n).astype(np.float32),
    }
    if episode.object_pose is not None and episode.object_pose_valid is not None:
        columns["observation.object_pose"] = episode.object_pose.astype(np.float32)
        columns["observation.object_pose_valid"] = episode.object_pose_valid.reshape(n).astype(
            np.bool_
        )
    for key, values in sorted(episode.extra_obs.items()):
        if values.ndim > 2:
            raise ExportError(
                f"obs/{key}: per-frame shape {values.shape[1:]} is not a vector (only the "
                f"cameras {list(CAMERA_KEYS)} are exported as videos)"
            )
        columns[f"observation.{key}"] = (
            values.reshape(n) if values.ndim == 2 and values.shape[1] == 1 else values
        )
    columns[ACTION_KEY] = episode.actions.astype(np.float32)
    # float32: LeRobot hands every number to torch as float32 (float64 columns included).
    columns[RECORDED_TIME_KEY] = episode.timestamps_s.astype(np.float32)
    return columns


def _column_specs(columns: dict[str, np.ndarray], metadata: EpisodeMetadata) -> dict[str, _Column]:
    names: dict[str, list[str]] = {
        STATE_KEY: list(metadata.joint_names),
        ACTION_KEY: list(metadata.action_names),
        "observation.object_pose": ["x_m", "y_m", "z_m", "qx", "qy", "qz", "qw"],
    }
    if metadata.object_track_fields:
        names["observation.object_track"] = list(metadata.object_track_fields)
    specs = {}
    for key, values in columns.items():
        shape = (1,) if values.ndim == 1 else tuple(int(d) for d in values.shape[1:])
        specs[key] = _Column(key, str(values.dtype), shape, names.get(key))
    return specs


def _camera_feature(key: str, shape: tuple[int, ...], video_info: dict[str, Any]) -> dict[str, Any]:
    return {
        "dtype": "video",
        "shape": list(shape),
        "names": ["height", "width", "channels"],
        "info": video_info,
    }


def video_feature_key(camera_key: str) -> str:
    """LeRobot feature name of a camera image key: ``observation.images.<camera>``."""
    return IMAGE_FEATURE_PREFIX + camera_key.removesuffix("_rgb")


# --- writers ----------------------------------------------------------------------------------


def _file_position(counter: int, chunk_size: int) -> tuple[int, int]:
    return counter // chunk_size, counter % chunk_size


class _VideoWriter:
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


class _TableWriter:
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
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _arrow_column(values: np.ndarray) -> Any:
    """Return a per-frame array as an Arrow column: scalars, or fixed-size lists for vectors."""
    import pyarrow as pa

    if values.ndim == 1:
        return pa.array(values)
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, int(np.prod(values.shape[1:])))


def _episode_row_table(row: dict[str, Any]) -> Any:
    import pyarrow as pa

    return pa.table({key: [value] for key, value in row.items()})


# --- export -----------------------------------------------------------------------------------


def _integer_fps(metadata: EpisodeMetadata, where: str) -> int:
    rate = metadata.control_rate_hz
    if abs(rate - round(rate)) > 1e-6:
        raise ExportError(
            f"{where}: control_rate_hz = {rate}; LeRobot's fps is an integer (resample the "
            "dataset to a whole rate first)"
        )
    return round(rate)


def check_output(out: Path) -> None:
    """Refuse an output folder that exists and is not empty, or that is a file.

    Raises:
        ExportError: Naming the path and what to do.

    """
    if out.is_file() or out.is_symlink():
        raise ExportError(f"{out}: exists and is not a folder; give a new folder for the export")
    if out.is_dir() and any(out.iterdir()):
        raise ExportError(
            f"{out}: folder is not empty (nothing written); give a new or empty folder"
        )


def _co_training_note(frames_per_source: dict[str, int], sim_ratio: float | None) -> dict[str, Any]:
    real = frames_per_source.get("real", 0)
    sim = frames_per_source.get("sim", 0)
    note: dict[str, Any] = {
        "note": (
            "LeRobot has no per-dataset sampling weight. The workspace co-trains by drawing each "
            "sample from sim with probability sim_ratio and then a frame of that source "
            "uniformly (r2s2r_policy.sampling.MixtureSampler). To reproduce it, give each frame "
            "of a real episode weight (1 - sim_ratio) / real_frames and each frame of a sim "
            "episode weight sim_ratio / sim_frames (the episode's source is the 'r2s2r/source' "
            "column of meta/episodes; its frames are dataset_from_index..dataset_to_index - 1) "
            "and sample with torch.utils.data.WeightedRandomSampler(weights, num_samples, "
            "replacement=True); or, with real and sim exported as two datasets, repeat the sim "
            "dataset's episodes k = sim_ratio / (1 - sim_ratio) * real_frames / sim_frames "
            "times in the concatenation."
        ),
        "real_frames": real,
        "sim_frames": sim,
    }
    if sim_ratio is not None:
        note["sim_ratio"] = sim_ratio
        note["frame_weight_real"] = (1.0 - sim_ratio) / real if real else None
        note["frame_weight_sim"] = sim_ratio / sim if sim else None
    return note


def _readme(info: dict[str, Any], source: Path, episodes_per_source: dict[str, int]) -> str:
    co = info["r2s2r"]["co_training"]
    lines = [
        "# r2s2r episodes in LeRobot v3.0 format",
        "",
        f"Exported by `r2s2r dataset export-lerobot` from `{source}`: "
        f"{info['total_episodes']} episodes, {info['total_frames']} frames at {info['fps']} fps "
        f"({', '.join(f'{k}: {v} episodes' for k, v in sorted(episodes_per_source.items()))}).",
        "",
        "Load it with LeRobot (no hub access needed):",
        "",
        "```python",
        "from lerobot.datasets.lerobot_dataset import LeRobotDataset",
        "# standalone package lerobot-dataset: from ledataset.datasets.lerobot_dataset import ...",
        "dataset = LeRobotDataset('r2s2r/export', root='THIS_FOLDER')",
        "```",
        "",
        "Features: "
        + ", ".join(f"`{k}`" for k in info["features"] if k not in ("timestamp", *_INDEX_KEYS))
        + ". `timestamp` is `frame_index / fps`; the recorded times are `r2s2r.timestamp_s`.",
        "",
        "## Co-training weights",
        "",
        co["note"],
        "",
        f"Frames here: real {co['real_frames']}, sim {co['sim_frames']}.",
        "",
        "```python",
        "import torch",
        "sim_ratio = 0.5  # the workspace's TrainConfig.sim_ratio",
        "frames = {'real': 0, 'sim': 0}",
        "episodes = dataset.meta.episodes",
        "for ep in episodes:",
        "    frames[ep['r2s2r/source']] += ep['length']",
        "share = {'real': 1.0 - sim_ratio, 'sim': sim_ratio}",
        "weights = torch.zeros(len(dataset), dtype=torch.float64)",
        "for ep in episodes:",
        "    source = ep['r2s2r/source']",
        "    weight = share[source] / frames[source]",
        "    weights[ep['dataset_from_index'] : ep['dataset_to_index']] = weight",
        "sampler = torch.utils.data.WeightedRandomSampler(weights, len(dataset))",
        "```",
    ]
    if "sim_ratio" in co:
        lines += [
            "",
            f"For sim_ratio = {co['sim_ratio']}: weight per real frame "
            f"{co['frame_weight_real']}, per sim frame {co['frame_weight_sim']}.",
        ]
    return "\n".join(lines) + "\n"


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def export_lerobot(
    source: str | Path,
    out: str | Path,
    config: LeRobotExportConfig | None = None,
    on_episode: Callable[[int, int], None] | None = None,
) -> ExportSummary:
    """Write the episodes of ``source`` as a LeRobot v3.0 dataset in ``out``.

    Args:
        source: An episode dataset (a ``.hdf5`` shard or a folder of them).
        out: The folder to create (absent or empty).
        config: Codec and file-size settings.
        on_episode: Called with ``(episodes done, episodes in all)`` after each episode.

    Returns:
        An :class:`ExportSummary`.

    Raises:
        ExportError: If ``out`` is in the way, or the episodes cannot be exported (one rate,
            one set of features, even image sizes unless lossless); nothing is left behind.
        DatasetError: If ``source`` is not a dataset.

    """
    cfg = config or LeRobotExportConfig()
    out_path = Path(out)
    check_output(out_path)
    start_s = time.monotonic()
    with EpisodeDataset(source) as dataset:
        if len(dataset) == 0:
            raise ExportError(f"{source}: holds no episode; nothing to export")
        staging = partial_path(out_path)
        if staging.exists():
            shutil.rmtree(staging)  # a killed export's leftovers: nothing reads them
        staging.mkdir(parents=True)
        try:
            summary_parts = _write(dataset, staging, cfg, Path(source), on_episode)
            check_output(out_path)
            if out_path.is_dir():
                out_path.rmdir()
            os.replace(staging, out_path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    episodes, frames, codec, per_source = summary_parts
    return ExportSummary(
        output=out_path,
        episodes=episodes,
        frames=frames,
        bytes_written=_tree_bytes(out_path),
        seconds=time.monotonic() - start_s,
        video_codec=codec,
        frames_per_source=per_source,
    )


def _iter_episodes(dataset: EpisodeDataset) -> Iterator[tuple[int, Episode]]:
    for index in range(len(dataset)):
        yield index, dataset.episode(index)


def _write(
    dataset: EpisodeDataset,
    root: Path,
    cfg: LeRobotExportConfig,
    source: Path,
    on_episode: Callable[[int, int], None] | None,
) -> tuple[int, int, str, dict[str, int]]:
    fps = _integer_fps(dataset.metadata(0), dataset.where(0))
    video_keys = {camera: video_feature_key(camera) for camera in CAMERA_KEYS}
    videos = {camera: _VideoWriter(root, key, fps, cfg) for camera, key in video_keys.items()}
    data_writer = _TableWriter(root, DATA_PATH, cfg.data_file_size_mb, cfg.chunk_size)
    episode_writer = _TableWriter(root, EPISODES_PATH, cfg.data_file_size_mb, cfg.chunk_size)
    specs: dict[str, _Column] | None = None
    tasks: dict[str, int] = {}
    low_dim: dict[str, list[np.ndarray]] = {}
    histograms = {camera: np.zeros((3, 256), dtype=np.int64) for camera in CAMERA_KEYS}
    episodes_per_source: Counter[str] = Counter()
    frames_per_source: Counter[str] = Counter()
    total = 0
    try:
        for index, episode in _iter_episodes(dataset):
            where = dataset.where(index)
            meta = episode.metadata
            if _integer_fps(meta, where) != fps:
                raise ExportError(
                    f"{where}: control_rate_hz = {meta.control_rate_hz}, the first episode's is "
                    f"{fps} (one LeRobot dataset has one fps)"
                )
            columns = _episode_columns(episode)
            episode_specs = _column_specs(columns, meta)
            if specs is None:
                specs = episode_specs
            elif episode_specs != specs:
                differ = sorted(set(specs.items()) ^ set(episode_specs.items()))
                raise ExportError(
                    f"{where}: features differ from the first episode's: "
                    f"{[column.key for _, column in differ]}"
                )
            n = episode.num_frames
            task_index = tasks.setdefault(meta.task, len(tasks))
            frame_index = np.arange(n, dtype=np.int64)
            columns["timestamp"] = (frame_index / fps).astype(np.float32)
            columns["frame_index"] = frame_index
            columns["episode_index"] = np.full(n, index, dtype=np.int64)
            columns["index"] = np.arange(total, total + n, dtype=np.int64)
            columns["task_index"] = np.full(n, task_index, dtype=np.int64)

            import pyarrow as pa

            data_chunk, data_file = data_writer.position()
            data_writer.write(pa.table({k: _arrow_column(v) for k, v in columns.items()}))
            row: dict[str, Any] = {
                "episode_index": index,
                "tasks": [meta.task],
                "length": n,
                "data/chunk_index": data_chunk,
                "data/file_index": data_file,
                "dataset_from_index": total,
                "dataset_to_index": total + n,
            }
            stats: dict[str, dict[str, np.ndarray]] = {}
            for camera, writer in videos.items():
                images = episode.images[camera]
                row.update(writer.add_episode(images))
                histogram = _image_histogram(images)
                histograms[camera] += histogram
                stats[video_keys[camera]] = _histogram_stats(histogram, n)
            meta_chunk, meta_file = episode_writer.position()
            row["meta/episodes/chunk_index"] = meta_chunk
            row["meta/episodes/file_index"] = meta_file
            for name in ("source", "behavior_source", "outcome", "object_type", "world_config_id"):
                row[f"r2s2r/{name}"] = str(getattr(meta, name))
            for key, values in columns.items():
                stats[key] = _array_stats(values)
                low_dim.setdefault(key, []).append(values)
            for key, feature_stats in stats.items():
                for stat, value in feature_stats.items():
                    row[f"stats/{key}/{stat}"] = np.asarray(value).tolist()
            episode_writer.write(_episode_row_table(row))
            total += n
            episodes_per_source[meta.source] += 1
            frames_per_source[meta.source] += n
            if on_episode is not None:
                on_episode(index + 1, len(dataset))
    finally:
        for writer in videos.values():
            writer.close()
        data_writer.close()
        episode_writer.close()
    assert specs is not None

    features: dict[str, Any] = {}
    global_stats: dict[str, Any] = {}
    for camera, writer in videos.items():
        assert writer.frame_shape is not None
        features[video_keys[camera]] = _camera_feature(
            video_keys[camera], writer.frame_shape, writer.video_info()
        )
        global_stats[video_keys[camera]] = _jsonable(_histogram_stats(histograms[camera], total))
    for key, spec in specs.items():
        features[key] = spec.spec()
    features["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
    for key in _INDEX_KEYS:
        features[key] = {"dtype": "int64", "shape": [1], "names": None}
    for key, parts in low_dim.items():
        global_stats[key] = _jsonable(_array_stats(np.concatenate(parts)))
    codec = str(features[video_keys[CAMERA_KEYS[0]]]["info"]["video.codec"])
    info: dict[str, Any] = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": cfg.robot_type,
        "total_episodes": len(dataset),
        "total_frames": total,
        "total_tasks": len(tasks),
        "chunks_size": cfg.chunk_size,
        "data_files_size_in_mb": cfg.data_file_size_mb,
        "video_files_size_in_mb": cfg.video_file_size_mb,
        "fps": fps,
        "splits": {"train": f"0:{len(dataset)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH,
        "features": features,
        "r2s2r": {
            "source": str(source),
            "episodes_per_source": dict(sorted(episodes_per_source.items())),
            "co_training": _co_training_note(dict(frames_per_source), cfg.sim_ratio),
            "export_config": cfg.model_dump(),
        },
    }
    _write_json(root / INFO_PATH, info)
    _write_json(root / STATS_PATH, global_stats)
    _write_tasks(root / TASKS_PATH, tasks)
    (root / README_NAME).write_text(_readme(info, source, dict(episodes_per_source)))
    return len(dataset), total, codec, dict(sorted(frames_per_source.items()))


def _write_json(path: Path, content: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=4) + "\n")


def _write_tasks(path: Path, tasks: dict[str, int]) -> None:
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
