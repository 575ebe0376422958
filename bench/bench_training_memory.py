"""Peak memory of training at the paper's scale: on-disk image store vs today's in-memory cache.

Run: ``python bench/bench_training_memory.py [--real R --sim S] [--steps 300]``.

Trains as the experiment trains a co-trained policy (``config/experiment/paper.yaml`` through
``r2s2r.experiment.training.train_config_for``: real + simulated sources, sim ratio 0.5, batch
64, 128 px, the policy of ``policy/cotrain.yaml``), a few hundred steps on one thread, each
path in its own process (its peak RSS is its own, ``getrusage`` and ``VmHWM``):

- ``store``: ``image_store_dir`` (issue 38): the store is built in the training process, as
  the experiment builds it, then every batch's frames are read from it;
- ``cache``: ``cache_images`` (today): every frame decoded and resized into memory first. At
  paper scale it would not fit beside the rest of the machine, so it runs on the real dataset
  with two smaller simulated ones (``--cache-sim-episodes``, the first episodes of the sim
  dataset); the per-episode cost is the slope between the two and the paper-scale figure is
  its projection (labelled so).

Without ``--real``/``--sim``, synthetic datasets in the recorder's format are written first
(``--synthetic-dir``, default under /tmp; removed at the end unless ``--keep-synthetic``):
``--real-episodes`` and ``--sim-episodes`` episodes of ``--frames`` frames, both cameras at
``--image-px``, the robot's 18 joints, gzip-compressed as the recorder writes them. With the
real paper datasets: ``--real <exp>/demos/... --sim <exp>/generation/<configuration>/...``.

Last line: ``{"benchmark": "training_memory", "figures": [...]}``; goal: store peak RSS at
paper scale ≤ 8 GiB.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib

GOAL_GIB = 8.0
"""Issue 38: peak RSS of training at paper scale."""


def write_synthetic(
    path: Path, source: str, episodes: int, frames: int, px: int, seed: int
) -> None:
    """Write ``episodes`` robot episodes (both cameras at ``px``) to a new dataset at ``path``.

    :func:`r2s2r_testing.episodes.write_robot_dataset` with camera-like ``blocks`` images (they
    compress well: a paper-scale dataset fits /tmp; the store holds them decoded, so the memory
    measured does not depend on it). Written to a temporary name and renamed: a dataset is
    there whole or not at all.
    """
    from r2s2r_common.files import move_into_place
    from r2s2r_testing.episodes import write_robot_dataset

    partial = path.with_name(f".{path.name}.partial")
    write_robot_dataset(
        partial,
        source,
        seed,
        episodes,
        frames=frames,
        image_px=px,
        images="blocks",
        progress=True,
    )
    move_into_place(partial, path)


def first_episodes(dataset: str, episodes: int, out: Path) -> None:
    """Copy the first ``episodes`` episodes of ``dataset`` to a new dataset at ``out``."""
    from r2s2r_common.files import move_into_place

    from r2s2r_dataset import EpisodeDataset, EpisodeWriter

    reader = EpisodeDataset(Path(dataset))
    if len(reader) < episodes:
        raise SystemExit(f"{dataset}: {len(reader)} episodes, fewer than {episodes}")
    partial = out.with_name(f".{out.name}.partial")
    with EpisodeWriter(partial) as writer:
        for index in range(episodes):
            writer.append(reader.episode(index))
    reader.close()
    move_into_place(partial, out)


def child(mode: str, real: str, sim: str, px: int, steps: int, batch: int, folder: str) -> dict:
    """Train one path in this process; return its figures."""
    import torch
    from r2s2r_common.config import load_config
    from r2s2r_policy.training import train
    from r2s2r_policy.training_config import TrainConfig

    from r2s2r.experiment.config import ExperimentConfig
    from r2s2r.experiment.products import DatasetProduct
    from r2s2r.experiment.training import train_config_for

    torch.set_num_threads(1)
    preset = load_config(ExperimentConfig, benchlib.REPO / "config" / "experiment" / "paper.yaml")
    preset = preset.model_copy(update={"image_px": px, "batch_size": batch, "train_steps": steps})
    data = train_config_for(preset, DatasetProduct(real, "real"), DatasetProduct(sim, "sim"))
    data.update(
        num_threads=1,
        progress_bar=False,
        checkpoint_every_steps=steps,
        cache_images=mode == "cache",
        image_store_dir=str(Path(folder) / "stores") if mode == "store" else None,
    )
    config = TrainConfig.model_validate(data)
    started = time.perf_counter()
    result = train(config, Path(folder) / "run", resume=False)
    out: dict[str, Any] = {
        "wall_s": time.perf_counter() - started,
        "samples_per_s": result.samples_per_s,
        "data_fraction": result.data_fraction,
        "final_loss": result.losses[-1],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssAnon", "RssFile"):
            out[key] = float(value.split()[0]) / 1024.0
    return out


def run_child(*args: str) -> dict:
    """Run this script as a child with ``--child`` and return its JSON line."""
    done = subprocess.run(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def episodes_in(dataset: str) -> tuple[int, int]:
    """Return ``(episodes, frames)`` of a dataset."""
    from r2s2r_dataset import EpisodeDataset

    reader = EpisodeDataset(Path(dataset))
    counts = len(reader), sum(reader.episode_length(i) for i in range(len(reader)))
    reader.close()
    return counts


def main() -> int:
    """Run the benchmark."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--real", help="Real dataset (default: a synthetic one).")
    parser.add_argument("--sim", help="Simulated dataset (default: a synthetic one).")
    parser.add_argument("--synthetic-dir", help="Where synthetic datasets go (default: /tmp).")
    parser.add_argument("--keep-synthetic", action="store_true", help="Keep them afterwards.")
    parser.add_argument("--real-episodes", type=int, default=100)
    parser.add_argument("--sim-episodes", type=int, default=1500)
    parser.add_argument("--frames", type=int, default=120, help="Frames per synthetic episode.")
    parser.add_argument("--image-px", type=int, default=128)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--cache-sim-episodes",
        type=int,
        nargs=2,
        default=[50, 200],
        help="The cache path's two smaller simulated datasets (episodes).",
    )
    parser.add_argument("--skip-cache", action="store_true", help="Measure the store only.")
    parser.add_argument("--child", choices=["cache", "store"], help=hidden())
    parser.add_argument("--folder", default="", help=hidden())
    args = parser.parse_args()
    if args.child:
        measured = child(
            args.child,
            args.real,
            args.sim,
            args.image_px,
            args.steps,
            args.batch_size,
            args.folder,
        )
        print(json.dumps(measured))
        return 0
    synthetic = Path(args.synthetic_dir or tempfile.mkdtemp(prefix="bench_training_memory_"))
    made = not (args.real and args.sim)
    try:
        real, sim = args.real, args.sim
        if made:
            synthetic.mkdir(parents=True, exist_ok=True)
            paths = (synthetic / "real.hdf5", synthetic / "sim.hdf5")
            counts = (args.real_episodes, args.sim_episodes)
            for seed, (path, count) in enumerate(zip(paths, counts, strict=True)):
                if not path.exists():
                    source = "real" if seed == 0 else "sim"
                    write_synthetic(path, source, count, args.frames, args.image_px, seed)
            real, sim = str(paths[0]), str(paths[1])
        figures = measure(args, real, sim, synthetic)
    finally:
        if made and not args.keep_synthetic:
            shutil.rmtree(synthetic, ignore_errors=True)
    benchlib.report(
        "training_memory",
        figures,
        title=f"training memory at paper scale: {real} + {sim}",
    )
    return 0


def measure(args: Any, real: str, sim: str, scratch: Path) -> list[benchlib.Figure]:
    """Run the store path at full scale and the cache path at two smaller ones."""
    real_counts, sim_counts = episodes_in(real), episodes_in(sim)
    episodes = real_counts[0] + sim_counts[0]
    frames = real_counts[1] + sim_counts[1]
    image_gib = frames * 2 * args.image_px**2 * 3 / 2**30
    common = ["--image-px", str(args.image_px), "--steps", str(args.steps)]
    common += ["--batch-size", str(args.batch_size), "--real", real]
    figures = [
        benchlib.Figure(
            "episodes", episodes, "", note=f"{real_counts[0]} real + {sim_counts[0]} sim"
        ),
        benchlib.Figure("frames", frames, "", note="per camera"),
        benchlib.Figure("images_gib", round(image_gib, 1), "GiB", note="decoded, both cameras"),
    ]
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        store = run_child(*common, "--sim", sim, "--child", "store", "--folder", folder)
    figures += [
        benchlib.Figure(
            "store_peak_rss_gib",
            round(store["peak_rss_mib"] / 1024, 2),
            "GiB",
            goal=f"<= {GOAL_GIB}",
            note="build + train, one process",
        ),
        benchlib.Figure("store_anon_mib_end", round(store["RssAnon"]), "MiB", note="own"),
        benchlib.Figure("store_wall_s", round(store["wall_s"]), "s", note="build + steps"),
        benchlib.Figure("store_samples_per_s", round(store["samples_per_s"], 1), "1/s"),
        benchlib.Figure("store_data_fraction", round(store["data_fraction"], 3), ""),
    ]
    if args.skip_cache:
        return figures
    points = []
    for count in args.cache_sim_episodes:
        with tempfile.TemporaryDirectory(dir=scratch) as folder:
            small = Path(folder) / "sim_small.hdf5"
            first_episodes(sim, count, small)
            cache = run_child(*common, "--sim", str(small), "--child", "cache", "--folder", folder)
            small_frames = episodes_in(str(small))[1]
        points.append((real_counts[0] + count, real_counts[1] + small_frames, cache))
        figures += [
            benchlib.Figure(
                f"cache_peak_rss_gib_{real_counts[0] + count}ep",
                round(cache["peak_rss_mib"] / 1024, 2),
                "GiB",
                note=f"{real_counts[0]} real + {count} sim, measured",
            ),
            benchlib.Figure(
                f"cache_samples_per_s_{real_counts[0] + count}ep",
                round(cache["samples_per_s"], 1),
                "1/s",
            ),
            benchlib.Figure(
                f"cache_data_fraction_{real_counts[0] + count}ep",
                round(cache["data_fraction"], 3),
                "",
            ),
        ]
    (_, f0, c0), (_, f1, c1) = points
    per_frame = (c1["peak_rss_mib"] - c0["peak_rss_mib"]) / (f1 - f0)
    projected = c0["peak_rss_mib"] + per_frame * (frames - f0)
    figures += [
        benchlib.Figure(
            "cache_mib_per_episode",
            round(per_frame * frames / episodes, 1),
            "MiB",
            note="slope of the two, at this dataset's mean episode length",
        ),
        benchlib.Figure(
            "cache_peak_rss_gib_projected",
            round(projected / 1024, 1),
            "GiB",
            note=f"PROJECTION to {episodes} episodes, not measured",
        ),
        benchlib.Figure(
            "store_vs_cache_projected",
            round(store["peak_rss_mib"] / projected, 3),
            "",
            note="peak RSS ratio (projection)",
        ),
    ]
    return figures


def hidden() -> str:
    """Help text of the internal flags (argparse.SUPPRESS)."""
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
