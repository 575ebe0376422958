"""Export an episode dataset (robomimic-style HDF5) to LeRobot's v3.0 dataset layout.

The layout and its columns are :mod:`.lerobot_format`'s, the stats :mod:`.lerobot_stats`'s, and
the files are written by :mod:`.lerobot_files`; the settings are
:class:`~r2s2r_dataset.lerobot_config.LeRobotExportConfig`.

LeRobot has no per-dataset sampling weight: the export's README and
``info.json["r2s2r"]["co_training"]`` say how to reproduce the workspace's ``sim_ratio``.

The export is written into ``.OUT.partial`` beside ``OUT`` and renamed when complete, so ``OUT``
is either absent or whole. Nothing here imports rclpy, torch or LeRobot.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.files import move_into_place

from .hdf5 import EpisodeDataset, partial_path
from .lerobot_config import LeRobotExportConfig
from .lerobot_files import (
    TableWriter,
    VideoWriter,
    arrow_column,
    episode_row_table,
    write_json,
    write_tasks,
)
from .lerobot_format import (
    CODEBASE_VERSION,
    DATA_PATH,
    EPISODES_PATH,
    INDEX_KEYS,
    INFO_PATH,
    README_NAME,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    Column,
    ExportError,
    camera_feature,
    column_specs,
    episode_columns,
    video_feature_key,
)
from .lerobot_stats import array_stats, histogram_stats, image_histogram, jsonable
from .schema import CAMERA_KEYS, Episode, EpisodeMetadata, non_finite_problem


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
        + ", ".join(f"`{k}`" for k in info["features"] if k not in ("timestamp", *INDEX_KEYS))
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
            move_into_place(staging, out_path)
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
    videos = {camera: VideoWriter(root, key, fps, cfg) for camera, key in video_keys.items()}
    data_writer = TableWriter(root, DATA_PATH, cfg.data_file_size_mb, cfg.chunk_size)
    episode_writer = TableWriter(root, EPISODES_PATH, cfg.data_file_size_mb, cfg.chunk_size)
    specs: dict[str, Column] | None = None
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
            columns = episode_columns(episode)
            episode_specs = column_specs(columns, meta)
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
            data_writer.write(pa.table({k: arrow_column(v) for k, v in columns.items()}))
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
                histogram = image_histogram(images)
                histograms[camera] += histogram
                stats[video_keys[camera]] = histogram_stats(histogram, n)
            meta_chunk, meta_file = episode_writer.position()
            row["meta/episodes/chunk_index"] = meta_chunk
            row["meta/episodes/file_index"] = meta_file
            for name in ("source", "behavior_source", "outcome", "object_type", "world_config_id"):
                row[f"r2s2r/{name}"] = str(getattr(meta, name))
            for key, values in columns.items():
                if np.issubdtype(np.asarray(values).dtype, np.floating):
                    problem = non_finite_problem(values)  # as training refuses them
                    if problem is not None:
                        raise ExportError(f"{where}: {key}: {problem}")
                stats[key] = array_stats(values)
                low_dim.setdefault(key, []).append(values)
            for key, feature_stats in stats.items():
                for stat, value in feature_stats.items():
                    row[f"stats/{key}/{stat}"] = np.asarray(value).tolist()
            episode_writer.write(episode_row_table(row))
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
        features[video_keys[camera]] = camera_feature(
            video_keys[camera], writer.frame_shape, writer.video_info()
        )
        global_stats[video_keys[camera]] = jsonable(histogram_stats(histograms[camera], total))
    for key, spec in specs.items():
        features[key] = spec.spec()
    features["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
    for key in INDEX_KEYS:
        features[key] = {"dtype": "int64", "shape": [1], "names": None}
    for key, parts in low_dim.items():
        global_stats[key] = jsonable(array_stats(np.concatenate(parts)))
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
    write_json(root / INFO_PATH, info)
    write_json(root / STATS_PATH, global_stats)
    write_tasks(root / TASKS_PATH, tasks)
    (root / README_NAME).write_text(_readme(info, source, dict(episodes_per_source)))
    return len(dataset), total, codec, dict(sorted(frames_per_source.items()))
