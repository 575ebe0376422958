"""Policy benchmark: inference latency, predict_chunk overhead, training throughput.

Run: ``python bench/bench_policy.py [--threads 1] [--iterations 300] [--train-steps 20]``.

Uses the default model of ``config/policy/cotrain.yaml`` (two 128×128 cameras, 6 arm + 12 hand
joints, chunk of 12) with random weights and synthetic data; latency does not depend on the
weights. Prints a table, then one JSON line:
``{"benchmark": "policy", "figures": [{"name", "value", "unit", "goal"}, ...]}``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import benchlib
import numpy as np
import torch
from r2s2r_common.config import load_config
from r2s2r_policy.data.sources import InMemoryEpisodeSource, ObservationSemantics
from r2s2r_policy.models import build_policy
from r2s2r_policy.normalization import stats_from_arrays
from r2s2r_policy.training import train
from r2s2r_policy.training_config import TrainConfig
from r2s2r_policy.training_data import make_spec

from r2s2r_dataset import object_track_fields

CONFIG = Path(__file__).resolve().parents[1] / "config" / "policy" / "cotrain.yaml"
JOINTS = [f"arm_joint_{i}" for i in range(1, 7)] + [f"hand_joint_{i}" for i in range(1, 13)]
TRACK_FIELDS = object_track_fields(["cube", "cylinder", "block", "sphere"])


def synthetic_source(frames: int, episodes: int, image_px: int) -> InMemoryEpisodeSource:
    rng = np.random.default_rng(0)
    data = []
    for _ in range(episodes):
        data.append(
            {
                "head_camera_rgb": rng.integers(0, 255, (frames, image_px, image_px, 3), np.uint8),
                "hand_camera_rgb": rng.integers(0, 255, (frames, image_px, image_px, 3), np.uint8),
                "joint_pos_rad": rng.normal(size=(frames, len(JOINTS))).astype(np.float32),
                "belt_speed_mps": np.full(frames, 0.15, np.float32),
                "object_track": rng.normal(size=(frames, len(TRACK_FIELDS))).astype(np.float32),
                "actions": rng.normal(size=(frames, len(JOINTS))).astype(np.float32),
            }
        )
    semantics = ObservationSemantics("belt_speed", "object_tracker", tuple(TRACK_FIELDS))
    return InMemoryEpisodeSource(
        "bench", data, JOINTS, JOINTS, control_rate_hz=10.0, semantics=semantics
    )


def latency(config: TrainConfig, iterations: int) -> dict[str, float]:
    """Interleaved timing of predict_chunk and the bare forward pass (ms)."""
    options = config.policy
    source = synthetic_source(8, 1, options.image_height_px)
    spec = make_spec(options, source, 10.0)
    low = source.low_dim(0)
    stats = stats_from_arrays({k: [v] for k, v in low.items()})
    policy = build_policy(spec, stats).eval()
    rng = np.random.default_rng(1)
    shape = (options.image_height_px, options.image_width_px, 3)
    observation = {
        "head_camera_rgb": rng.integers(0, 255, shape, np.uint8),
        "hand_camera_rgb": rng.integers(0, 255, shape, np.uint8),
        "joint_pos_rad": rng.normal(size=len(JOINTS)).astype(np.float32),
        "belt_speed_mps": np.array([0.15], np.float32),
        "object_track": rng.normal(size=len(TRACK_FIELDS)).astype(np.float32),
    }
    batch = {
        "head_camera_rgb": torch.from_numpy(observation["head_camera_rgb"])[None],
        "hand_camera_rgb": torch.from_numpy(observation["hand_camera_rgb"])[None],
        "joint_pos_rad": torch.from_numpy(observation["joint_pos_rad"])[None],
        "belt_speed_mps": torch.from_numpy(observation["belt_speed_mps"]).reshape(1, 1),
        "object_track": torch.from_numpy(observation["object_track"])[None],
    }
    for _ in range(20):
        policy.predict_chunk(observation)
    full, bare = [], []
    with torch.inference_mode():
        for _ in range(iterations):
            start = time.perf_counter()
            policy.predict_chunk(observation)
            full.append(time.perf_counter() - start)
            start = time.perf_counter()
            policy.predict_normalized(batch)
            bare.append(time.perf_counter() - start)
    full_ms, bare_ms = np.array(full) * 1e3, np.array(bare) * 1e3
    return {
        "p50_ms": float(np.percentile(full_ms, 50)),
        "p99_ms": float(np.percentile(full_ms, 99)),
        "bare_p50_ms": float(np.percentile(bare_ms, 50)),
        "ratio": float(np.percentile(full_ms, 50) / np.percentile(bare_ms, 50)),
        "parameters": float(sum(p.numel() for p in policy.parameters())),
    }


def training_throughput(config: TrainConfig, steps: int) -> float:
    """Samples/s of the full training loop (dataset, loader, forward, backward, AdamW)."""
    source = synthetic_source(40, 4, config.policy.image_height_px)
    run_config = config.model_copy(
        update={"steps": steps + 2, "checkpoint_every_steps": 10_000, "progress_bar": False}
    )
    with tempfile.TemporaryDirectory() as run_dir:
        # Two warm-up steps, then time the rest through the trainer's own counter.
        result = train(
            run_config, run_dir, sources={"bench": source}, weights={"bench": 1.0}, stop_at_step=2
        )
        result = train(run_config, run_dir, sources={"bench": source}, weights={"bench": 1.0})
    return result.samples_per_s


def main() -> None:
    parser = benchlib.parser(__doc__)
    benchlib.add_threads(parser)
    parser.add_argument("--iterations", type=int, default=300, help="latency samples")
    parser.add_argument("--train-steps", type=int, default=15, help="timed training steps")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = load_config(TrainConfig, CONFIG)
    config = config.model_copy(update={"num_threads": args.threads})
    lat = latency(config, args.iterations)
    small = config.model_copy(
        update={
            "policy": config.policy.model_copy(update={"image_height_px": 64, "image_width_px": 64})
        }
    )
    lat64 = latency(small, args.iterations)
    train_sps = training_throughput(config, args.train_steps)
    train64_sps = training_throughput(small, args.train_steps)
    px = config.policy.image_height_px
    rows = [
        (
            "inference_p50",
            lat["p50_ms"],
            "ms",
            "<= 10",
            f"predict_chunk, {px}px, {args.threads} thr",
        ),
        ("inference_p99", lat["p99_ms"], "ms", None, "predict_chunk"),
        ("bare_forward_p50", lat["bare_p50_ms"], "ms", None, "model forward on ready tensors"),
        ("predict_to_forward_ratio", lat["ratio"], "x", "<= 1.2", "p50 / p50"),
        (
            "train_samples_per_s",
            train_sps,
            "samples/s",
            None,
            f"batch {config.batch_size}, {px}px, full loop",
        ),
        ("inference_p50_64px", lat64["p50_ms"], "ms", None, "predict_chunk, 64px"),
        ("train_samples_per_s_64px", train64_sps, "samples/s", None, "64px"),
        ("parameters", lat["parameters"], "count", None, "default model"),
        # Shared 2-core machine: figures scale with the load other processes put on it.
        ("load_average_1min", os.getloadavg()[0], "procs", None, "during the run (2 cores)"),
    ]
    figures = [
        benchlib.Figure(name, round(value, 4), unit, goal, note)
        for name, value, unit, goal, note in rows
    ]
    benchlib.report("policy", figures)


if __name__ == "__main__":
    main()
