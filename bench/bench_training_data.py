"""Training data path: samples/s with per-sample HDF5 reads vs the in-memory image cache.

Run: ``python bench/bench_training_data.py [--dataset PATH] [--image-px 64] [--steps 150]``.

Trains the experiment's model (``config/policy/cotrain.yaml``, images at ``--image-px``) on one
HDF5 dataset twice, side by side in one process: with ``cache_images: false`` (every sample
reads its two images from the gzip-compressed HDF5 chunks and resizes them, the data path
before the cache) and with the cache (images decoded and resized once when the dataset is
built). Without ``--dataset`` a dataset of generated-size episodes (128 px images, 120 frames,
compressed as generation writes them) is written to a temporary folder. Prints a table, then
one JSON line ``{"benchmark": "training_data", "figures": [...]}``.

Figures: samples/s of each path (steady state, the trainer's own counter), their ratio (goal
>= 5x), the data path's share of a training step with the cache (goal < 30 %), the one-time
cache build time and memory.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from r2s2r_common.config import load_config
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_policy.data import ChunkDataset, HDF5EpisodeSource
from r2s2r_policy.training import TrainConfig, make_spec, train
from r2s2r_recorder.dataset import (
    OBJECT_TRACK_KEY,
    TRACKER_SOURCE,
    Episode,
    EpisodeMetadata,
    EpisodeWriter,
    object_track_fields,
)

CONFIG = Path(__file__).resolve().parents[1] / "config" / "policy" / "cotrain.yaml"


def write_dataset(path: Path, episodes: int, frames: int) -> Path:
    """Episodes with generation's sizes: 128 px images (smooth, compressible), 18 joints."""
    rng = np.random.default_rng(0)
    joints = list(ALL_JOINT_NAMES)
    fields = object_track_fields(["cube", "cylinder", "block", "sphere"])
    grid = np.linspace(0, 255, 128, dtype=np.float32)
    base = ((grid[None, :, None] + grid[:, None, None]) / 2).astype(np.uint8).repeat(3, axis=2)
    with EpisodeWriter(path, compression_level=1) as writer:
        for _ in range(episodes):
            images = {}
            for key in ("head_camera_rgb", "hand_camera_rgb"):
                noise = rng.integers(0, 12, (frames, 128, 128, 3), dtype=np.uint8)
                images[key] = base[None] + noise
            trajectory = np.cumsum(rng.normal(0, 0.01, (frames, len(joints))), axis=0)
            writer.append(
                Episode(
                    metadata=EpisodeMetadata(
                        source="sim",
                        world_config_id="bench",
                        behavior_source="planner",
                        task="pick_sort",
                        object_type="cube",
                        belt_speed_mps=0.1,
                        outcome="success",
                        joint_names=joints,
                        action_names=joints,
                        control_rate_hz=10.0,
                        belt_speed_source="belt_speed",
                        object_track_source=TRACKER_SOURCE,
                        object_track_fields=fields,
                    ),
                    timestamps_s=np.arange(frames) * 0.1,
                    images=images,
                    joint_pos_rad=trajectory.astype(np.float32),
                    belt_speed_mps=np.full(frames, 0.1, np.float32),
                    actions=trajectory.astype(np.float32),
                    extra_obs={
                        OBJECT_TRACK_KEY: rng.normal(size=(frames, len(fields))).astype(np.float32)
                    },
                )
            )
    return path


def run(config: TrainConfig, dataset: Path, cache: bool, steps: int) -> tuple[float, float]:
    """Steady-state samples/s and data fraction of one training run (after 5 warm-up steps)."""
    run_config = config.model_copy(
        update={
            "steps": steps + 5,
            "checkpoint_every_steps": 100_000,
            "progress_bar": False,
            "cache_images": cache,
            "sim_ratio": 1.0,
        }
    )
    source = HDF5EpisodeSource(dataset, name="sim")
    with tempfile.TemporaryDirectory() as run_dir:
        train(run_config, run_dir, {"sim": source}, {"sim": 1.0}, stop_at_step=5)
        result = train(run_config, run_dir, {"sim": source}, {"sim": 1.0})
    source.close()
    return result.samples_per_s, result.data_fraction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, help="HDF5 dataset (default: a generated one)")
    parser.add_argument("--episodes", type=int, default=20, help="generated episodes")
    parser.add_argument("--frames", type=int, default=120, help="frames per generated episode")
    parser.add_argument("--image-px", type=int, default=64, help="model image size")
    parser.add_argument("--steps", type=int, default=150, help="timed steps per path")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = load_config(TrainConfig, CONFIG)
    policy = config.policy.model_copy(
        update={"image_height_px": args.image_px, "image_width_px": args.image_px}
    )
    config = config.model_copy(update={"policy": policy, "num_threads": args.threads})
    with tempfile.TemporaryDirectory() as folder:
        dataset = args.dataset or write_dataset(
            Path(folder) / "bench.hdf5", args.episodes, args.frames
        )
        source = HDF5EpisodeSource(dataset, name="sim")
        spec = make_spec(config.policy, source, source.control_rate_hz)
        started = time.perf_counter()
        cached = ChunkDataset(source, spec, cache_images=True)
        build_s = time.perf_counter() - started
        cache_mb = cached.image_cache_bytes / 2**20
        frames = len(cached)
        source.close()
        del cached
        before_sps, before_data = run(config, dataset, cache=False, steps=args.steps)
        after_sps, after_data = run(config, dataset, cache=True, steps=args.steps)
    rows = [
        ("samples_per_s_hdf5_reads", before_sps, "samples/s", None, "per-sample HDF5 + resize"),
        ("samples_per_s_cached", after_sps, "samples/s", None, "images cached in memory"),
        ("speedup", after_sps / before_sps, "x", ">= 5", "cached / per-sample"),
        ("data_fraction_hdf5_reads", 100 * before_data, "%", None, "of the loop's time"),
        ("data_fraction_cached", 100 * after_data, "%", "< 30", "of the loop's time"),
        ("cache_build_s", build_s, "s", None, f"{frames} frames, once per dataset"),
        ("cache_memory_mb", cache_mb, "MiB", None, f"2 cameras at {args.image_px} px"),
        ("load_average_1min", os.getloadavg()[0], "procs", None, "during the run (2 cores)"),
    ]
    print(f"{'figure':28s} {'value':>12s} {'unit':10s} {'goal':8s} note")
    for name, value, unit, goal, note in rows:
        print(f"{name:28s} {value:12.3f} {unit:10s} {goal or '-':8s} {note}")
    figures = [
        {"name": name, "value": round(value, 4), "unit": unit, "goal": goal}
        for name, value, unit, goal, _ in rows
    ]
    print(json.dumps({"benchmark": "training_data", "figures": figures}))


if __name__ == "__main__":
    main()
