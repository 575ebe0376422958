"""Training throughput: the trainer when issue 13 was filed vs today, and the data path alone.

Run: ``python bench/bench_training_data.py [--image-px 64 128] [--steps 150] [--repeats 2]
[--threads 1] [--baseline fd8935d] [--dataset PATH] [--device cpu]``.

Trains the experiment's model (each tree's own ``config/policy/cotrain.yaml``, images at each
``--image-px``: by default the reduced experiment's 64 px and the training preset's 128 px;
``--threads`` torch threads, default 1 as the reduced experiment trains) on one HDF5 dataset
along three paths, each in its own process, interleaved over ``--repeats`` rounds
so that machine noise falls on all of them alike:

- ``baseline``: the trainer at commit ``--baseline`` (``git archive`` of its ``src`` and
  ``config`` into a temporary folder): per-sample HDF5 reads, a Python loop for the random
  shift, unfused preprocessing. Default: the commit issue 13 was filed against.
- ``hdf5_reads``: today's trainer with ``cache_images: false`` (every sample reads its two
  images from the gzip-compressed HDF5 chunks and resizes them): the data path before the
  cache, today's training step.
- ``cached``: today's trainer as configured (images decoded and resized once, into memory).

Without ``--dataset`` each tree writes a dataset of generated-size episodes (128 px images,
120 frames, compressed as generation writes them) with its own writer, so every path reads
data in the schema it knows. Prints a table, then one JSON line
``{"benchmark": "training_data", "figures": [...]}``.

Figures: steady-state samples/s of each path (the trainer's own counter, after 5 warm-up
steps; the best round), ``cached`` / ``baseline`` (goal >= 5x: the issue's "training samples/s
>= 5x the current data path", read as the whole training step), ``cached`` / ``hdf5_reads``
(the cache's share of it), the data path's share of a step with the cache (goal < 30 %), what
the data path alone delivers (samples over the time spent fetching batches, with and without
the cache, and their ratio: the other reading of the issue's figure), the one-time cache build
time and memory; the cached step in ms, the camera encoders' forward + backward alone on one
batch (the model's floor: no data path can remove it) and the baseline step over that floor
(``speedup_ceiling``: the most any data path could give this model on this machine).

``--device cuda`` trains today's two paths on the GPU (the trainer's ``device`` setting); the
baseline, which had no device setting, is then left out rather than compared across
hardware, and ``speedup_vs_hdf5_reads`` (same trainer, same GPU, only the data path differs)
is the figure to read. Unverified here: the development machines have no GPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import numpy as np

REPO = Path(__file__).resolve().parents[1]
PRESET = Path("config") / "policy" / "cotrain.yaml"
ISSUE_13_BASE = "fd8935d"  # main when issue 13 ("policies that do the task") was filed
CAMERAS = ("head_camera_rgb", "hand_camera_rgb")
WARMUP_STEPS = 5
DEFAULT_IMAGE_PX = (64, 128)  # config/experiment/reduced.yaml, config/policy/cotrain.yaml


def _tree_env(tree: Path) -> dict[str, str]:
    """The environment of a worker for ``tree``: its packages ahead of the installed ones."""
    env = dict(os.environ)
    if tree != REPO:
        packages = [
            str(package)
            for package in sorted((tree / "src").iterdir())
            if (package / package.name / "__init__.py").exists()
        ]
        env["PYTHONPATH"] = os.pathsep.join([*packages, *filter(None, [env.get("PYTHONPATH")])])
    return env


def write_dataset(tree: Path, path: Path, episodes: int, frames: int) -> None:
    """Episodes with generation's sizes (128 px smooth images, 18 joints), any schema version.

    Uses ``tree``'s dataset package (``r2s2r_dataset``; in a tree from before it was split off,
    the baseline's, ``r2s2r_recorder.dataset``); the object-track columns are written where
    that version has them (today's preset feeds them to the policy).
    """
    from r2s2r_description.robot import ALL_JOINT_NAMES

    split = (tree / "src" / "r2s2r_dataset").is_dir()
    dataset = importlib.import_module("r2s2r_dataset" if split else "r2s2r_recorder.dataset")

    rng = np.random.default_rng(0)
    joints = list(ALL_JOINT_NAMES)
    grid = np.linspace(0, 255, 128, dtype=np.float32)
    base = ((grid[None, :, None] + grid[:, None, None]) / 2).astype(np.uint8).repeat(3, axis=2)
    metadata: dict[str, Any] = {
        "source": "sim",
        "world_config_id": "bench",
        "behavior_source": "planner",
        "task": "pick_sort",
        "object_type": "cube",
        "belt_speed_mps": 0.1,
        "outcome": "success",
        "joint_names": joints,
        "action_names": joints,
        "control_rate_hz": 10.0,
    }
    track_fields: list[str] = []
    if hasattr(dataset, "object_track_fields"):
        track_fields = dataset.object_track_fields(["cube", "cylinder", "block", "sphere"])
        metadata.update(
            belt_speed_source="belt_speed",
            object_track_source=dataset.TRACKER_SOURCE,
            object_track_fields=track_fields,
        )
    with dataset.EpisodeWriter(path, compression_level=1) as writer:
        for _ in range(episodes):
            images = {
                key: base[None] + rng.integers(0, 12, (frames, 128, 128, 3), dtype=np.uint8)
                for key in CAMERAS
            }
            trajectory = np.cumsum(rng.normal(0, 0.01, (frames, len(joints))), axis=0)
            extra = {}
            if track_fields:
                track = rng.normal(size=(frames, len(track_fields))).astype(np.float32)
                extra = {dataset.OBJECT_TRACK_KEY: track}
            writer.append(
                dataset.Episode(
                    metadata=dataset.EpisodeMetadata(**metadata),
                    timestamps_s=np.arange(frames) * 0.1,
                    images=images,
                    joint_pos_rad=trajectory.astype(np.float32),
                    belt_speed_mps=np.full(frames, 0.1, np.float32),
                    actions=trajectory.astype(np.float32),
                    extra_obs=extra,
                )
            )


def measure(
    tree: Path,
    dataset: Path,
    image_px: int,
    cache: bool,
    steps: int,
    threads: int = 1,
    device: str = "cpu",
) -> dict[str, float]:
    """Steady-state samples/s and data fraction of one training run of ``tree``'s trainer."""
    import torch
    from r2s2r_common.config import load_config
    from r2s2r_policy.training import train
    from r2s2r_policy.training_config import TrainConfig

    try:
        from r2s2r_policy.data.sources import HDF5EpisodeSource
    except ModuleNotFoundError:  # a tree from before r2s2r_policy.data was split (baseline)
        from r2s2r_policy.data import HDF5EpisodeSource  # type: ignore[attr-defined,no-redef]

    torch.set_num_threads(threads)
    config = load_config(TrainConfig, tree / PRESET)
    size = {"image_height_px": image_px, "image_width_px": image_px}
    config = config.model_copy(update={"policy": config.policy.model_copy(update=size)})
    update: dict[str, Any] = {
        "steps": steps + WARMUP_STEPS,
        "checkpoint_every_steps": 100_000,
        "progress_bar": False,
        "sim_ratio": 1.0,
        "num_threads": threads,
        "cache_images": cache,
        "device": device,
    }
    config = config.model_copy(
        update={key: value for key, value in update.items() if key in TrainConfig.model_fields}
    )
    figures: dict[str, float] = {"batch_size": float(config.batch_size)}
    source = HDF5EpisodeSource(dataset, name="sim")
    cached = None
    if cache:
        from r2s2r_policy.data.chunks import ChunkDataset
        from r2s2r_policy.training_data import make_spec

        spec = make_spec(config.policy, source, source.control_rate_hz)
        started = time.perf_counter()
        cached = ChunkDataset(source, spec, cache_images=True)
        figures["cache_build_s"] = time.perf_counter() - started
        figures["cache_memory_mb"] = cached.image_cache_bytes / 2**20
        figures["frames"] = float(len(cached))
    with tempfile.TemporaryDirectory() as run_dir:
        # The first call stops after the warm-up and checkpoints; the second resumes and is timed.
        train(config, run_dir, {"sim": source}, {"sim": 1.0}, stop_at_step=WARMUP_STEPS)
        result = train(config, run_dir, {"sim": source}, {"sim": 1.0})
    figures["samples_per_s"] = result.samples_per_s
    figures["data_fraction"] = getattr(result, "data_fraction", float("nan"))
    if cached is not None:
        figures["encoder_ms"] = encoder_floor_ms(result.policy, cached, config.batch_size)
    source.close()
    return figures


def encoder_floor_ms(policy: Any, dataset: Any, batch_size: int, repeats: int = 30) -> float:
    """Milliseconds of the camera encoders' forward + backward alone, on one training batch.

    The part of a training step no data path can remove: images already decoded, resized and
    converted to floats, no augmentation, no state, head, loss or optimizer. A baseline step
    over this is the most any data path could speed this model's training up by on this machine.
    """
    import numpy as np
    import torch
    from r2s2r_policy.data.chunks import collate_batch
    from r2s2r_policy.models.conv_keypoint import images_to_float

    batch = collate_batch(dataset.batch(np.arange(batch_size) % len(dataset)))
    keys = list(policy.spec.image_keys)
    device = next(policy.parameters()).device
    images = {key: images_to_float(batch[key].to(device)) for key in keys}
    by_camera = dict(policy.encoders.items())  # a shared encoder has one entry
    encoders = [by_camera.get(key, next(iter(by_camera.values()))) for key in keys]
    policy.train()

    def step() -> None:
        policy.zero_grad(set_to_none=True)
        sums = [encoder(images[key]).sum() for key, encoder in zip(keys, encoders, strict=True)]
        torch.stack(sums).sum().backward()

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(5):
        step()
    synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        step()
    synchronize()
    return 1000.0 * (time.perf_counter() - started) / repeats


def _worker(args: argparse.Namespace) -> None:
    """One path in this process: write the dataset or measure, print one JSON line."""
    tree = Path(args.tree)  # its packages come first on the import path (_tree_env)
    if args.write:
        write_dataset(tree, Path(args.dataset), args.episodes, args.frames)
        return
    figures = measure(
        tree,
        Path(args.dataset),
        args.image_px[0],
        args.cache,
        args.steps,
        args.threads,
        args.device,
    )
    print(json.dumps(figures))


def _run_worker(tree: Path, *options: str) -> dict[str, float]:
    """Run this file as a worker for ``tree``; the figures of its last output line."""
    command = [sys.executable, __file__, "--worker", "--tree", str(tree), *options]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=_tree_env(tree))
    if done.returncode != 0:
        raise SystemExit(f"worker for {tree} failed ({' '.join(command)}):\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        return {}  # a --write worker prints nothing
    return json.loads(lines[-1])


def _extract(commit: str, folder: Path) -> Path:
    """``src`` and ``config`` of ``commit`` under ``folder``; a clear error without git."""
    tree = folder / f"tree_{commit}"
    tree.mkdir()
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit, "src", "config"],
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", b"") or str(error).encode()
        raise SystemExit(
            f"--baseline {commit}: cannot read it from {REPO} ({detail.decode().strip()}); "
            "run from a git clone with that commit, or pass --baseline none"
        ) from error
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def _figures(
    runs: dict[str, list[dict[str, float]]], image_px: int, baseline: str
) -> list[tuple[str, float, str, str | None, str]]:
    """Table rows of one resolution: the best round of each path, their ratios, the cache."""
    best = {name: max(rounds, key=lambda r: r["samples_per_s"]) for name, rounds in runs.items()}
    cached, reads = best["cached"], best["hdf5_reads"]
    px = f"_{image_px}px"
    rows: list[tuple[str, float, str, str | None, str]] = []
    if "baseline" in best:
        note = f"trainer at {baseline} (issue 13 filed)"
        rows.append(
            (
                f"samples_per_s_baseline{px}",
                best["baseline"]["samples_per_s"],
                "samples/s",
                None,
                note,
            )
        )
    rows += [
        (f"samples_per_s_hdf5_reads{px}", reads["samples_per_s"], "samples/s", None, "no cache"),
        (f"samples_per_s_cached{px}", cached["samples_per_s"], "samples/s", None, "image cache"),
    ]
    if "baseline" in best:
        speedup = cached["samples_per_s"] / best["baseline"]["samples_per_s"]
        rows.append((f"speedup_vs_baseline{px}", speedup, "x", ">= 5", "cached / baseline"))
    rows += [
        (
            f"speedup_vs_hdf5_reads{px}",
            cached["samples_per_s"] / reads["samples_per_s"],
            "x",
            None,
            "cached / no cache, whole training step",
        ),
        (f"data_fraction_hdf5_reads{px}", 100 * reads["data_fraction"], "%", None, "of the loop"),
        (f"data_fraction_cached{px}", 100 * cached["data_fraction"], "%", "< 30", "of the loop"),
    ]
    # What the data path alone delivers: the samples over the time spent fetching batches.
    feed = {
        name: best[name]["samples_per_s"] / best[name]["data_fraction"]
        for name in ("hdf5_reads", "cached")
    }
    rows += [
        (f"data_path_samples_per_s_hdf5_reads{px}", feed["hdf5_reads"], "samples/s", None, "alone"),
        (f"data_path_samples_per_s_cached{px}", feed["cached"], "samples/s", None, "alone"),
        (
            f"data_path_speedup{px}",
            feed["cached"] / feed["hdf5_reads"],
            "x",
            None,
            "cached / hdf5 reads, the data path alone",
        ),
        (
            f"cache_build_s{px}",
            cached["cache_build_s"],
            "s",
            None,
            f"{cached['frames']:.0f} frames",
        ),
        (f"cache_memory_mb{px}", cached["cache_memory_mb"], "MiB", None, "2 cameras"),
    ]
    if "encoder_ms" in cached:
        step_ms = {
            name: 1000.0 * run.get("batch_size", cached["batch_size"]) / run["samples_per_s"]
            for name, run in best.items()
        }
        rows += [
            (f"step_ms_cached{px}", step_ms["cached"], "ms", None, "a training step, image cache"),
            (f"encoder_floor_ms{px}", cached["encoder_ms"], "ms", None, "camera encoders alone"),
        ]
        if "baseline" in step_ms:
            rows.append(
                (
                    f"speedup_ceiling{px}",
                    step_ms["baseline"] / cached["encoder_ms"],
                    "x",
                    None,
                    "baseline step / encoder floor: the most a free data path could give",
                )
            )
    return rows


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--dataset", type=Path, help="HDF5 dataset every path reads")
    parser.add_argument("--episodes", type=int, default=20, help="generated episodes")
    parser.add_argument("--frames", type=int, default=120, help="frames per generated episode")
    parser.add_argument(
        "--image-px",
        type=int,
        nargs="+",
        default=list(DEFAULT_IMAGE_PX),
        help="model image sizes (default: the reduced experiment's 64, the training preset's 128)",
    )
    parser.add_argument("--steps", type=int, default=150, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds (best kept)")
    benchlib.add_threads(parser)  # of every path
    parser.add_argument(
        "--baseline",
        default=ISSUE_13_BASE,
        help=f"commit of the 'before' trainer (default {ISSUE_13_BASE}); 'none' skips it",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="today's trainer's device (cpu, cuda, cuda:N, auto); not cpu: no baseline",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(REPO), help=argparse.SUPPRESS)
    parser.add_argument("--write", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    if args.steps < 1 or args.repeats < 1 or args.threads < 1 or min(args.image_px) < 16:
        parser.error("--steps, --repeats and --threads must be >= 1, --image-px >= 16")
    if args.dataset is not None and not args.dataset.is_file():
        parser.error(f"--dataset {args.dataset}: no such file")
    rows: list[tuple[str, float, str, str | None, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        trees = {"today": REPO}
        if args.device != "cpu" and args.baseline != "none":
            print(
                f"--device {args.device}: the baseline ({args.baseline}) had no device "
                "setting (CPU only); left out rather than compared across hardware"
            )
            args.baseline = "none"
        if args.baseline != "none":
            trees["baseline"] = _extract(args.baseline, Path(folder))
        datasets: dict[str, Path] = {}
        for name, tree in trees.items():
            if args.dataset is not None:
                datasets[name] = args.dataset
                continue
            datasets[name] = Path(folder) / f"{name}.hdf5"
            sizes = ["--episodes", str(args.episodes), "--frames", str(args.frames)]
            _run_worker(tree, "--write", "--dataset", str(datasets[name]), *sizes)
        paths = {"hdf5_reads": ("today", False), "cached": ("today", True)}
        if "baseline" in trees:
            paths = {"baseline": ("baseline", False), **paths}
        for image_px in args.image_px:
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
            for round_index in range(args.repeats):
                for name, (tree_name, cache) in paths.items():
                    options = ["--dataset", str(datasets[tree_name]), "--steps", str(args.steps)]
                    options += ["--image-px", str(image_px), "--threads", str(args.threads)]
                    options += ["--device", args.device]
                    options += ["--cache"] if cache else []
                    runs[name].append(_run_worker(trees[tree_name], *options))
                    sps = runs[name][-1]["samples_per_s"]
                    print(
                        f"{image_px} px, round {round_index + 1}/{args.repeats}: "
                        f"{name:10s} {sps:8.1f} samples/s"
                    )
            rows += _figures(runs, image_px, args.baseline)
    rows.append(
        ("load_average_1min", os.getloadavg()[0], "procs", None, "after the runs (2 cores)")
    )
    figures = [
        benchlib.Figure(name, round(value, 4), unit, goal, note)
        for name, value, unit, goal, note in rows
    ]
    benchlib.report("training_data", figures)


if __name__ == "__main__":
    main()
