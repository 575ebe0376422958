"""LeRobot v3.0 export speed: ``r2s2r dataset export-lerobot`` per video codec.

Exports one dataset (``--dataset``, or synthetic episodes: ``--episodes`` of ``--frames`` frames
at 10 Hz, two ``--image-px`` square cameras with ``--noise-sigma`` pixel noise, 18 joints, made
with the tests' episode factory)
with AV1 (the default), H.264 and lossless H.264 (RGB, qp 0), each into a fresh folder, and
reports episodes/s, frames/s, MB written and MB per 1,000 frames, beside the time it takes only
to read the episodes (the export's floor: HDF5 read and gzip decode) and the source's size.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import benchlib
from r2s2r_dataset.lerobot_config import LeRobotExportConfig
from r2s2r_dataset.lerobot_export import export_lerobot

from r2s2r_dataset import EpisodeDataset

CODECS: dict[str, LeRobotExportConfig] = {
    "av1": LeRobotExportConfig(codec="av1"),
    "h264": LeRobotExportConfig(codec="h264"),
    "lossless": LeRobotExportConfig(lossless=True),
}


def synthetic_dataset(
    path: Path, episodes: int, frames: int, image_px: int, noise_sigma: float
) -> Path:
    """Write ``episodes`` synthetic episodes with the robot's 18 joints; return ``path``.

    The factory's flat-coloured images get Gaussian pixel noise (``noise_sigma`` grey levels,
    new every frame, as a camera's), without which any codec compresses them to almost nothing.
    """
    import numpy as np
    from r2s2r_description.robot import ALL_JOINT_NAMES
    from r2s2r_testing.episodes import synthetic_episode

    from r2s2r_dataset import EpisodeWriter

    joints = list(ALL_JOINT_NAMES)
    with EpisodeWriter(path) as writer:
        for seed in range(episodes):
            episode = synthetic_episode(
                seed, frames, source="real" if seed % 2 == 0 else "sim", image_px=image_px
            )
            rng = np.random.default_rng(seed)
            walk = np.cumsum(rng.normal(0.0, 0.01, (frames + 1, len(joints))), axis=0)
            episode.metadata.joint_names = joints
            episode.metadata.action_names = joints
            episode.joint_pos_rad = walk[:-1].astype(np.float32)
            episode.actions = walk[1:].astype(np.float32)
            for key, images in episode.images.items():
                noisy = images + rng.normal(0.0, noise_sigma, images.shape)
                episode.images[key] = np.clip(noisy, 0, 255).astype(np.uint8)
            writer.append(episode)
    return path


def main() -> None:
    """Run the benchmark and print its table and JSON line."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--dataset", type=Path, default=None, help="dataset to export")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--image-px", type=int, default=128)
    parser.add_argument("--noise-sigma", type=float, default=3.0, help="pixel noise (grey levels)")
    parser.add_argument("--codecs", nargs="+", default=list(CODECS), choices=list(CODECS))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench_lerobot_export_"))
    try:
        source = args.dataset or synthetic_dataset(
            work / "source.hdf5", args.episodes, args.frames, args.image_px, args.noise_sigma
        )
        source_mb = sum(
            p.stat().st_size for p in ([source] if source.is_file() else source.glob("*.hdf5"))
        )
        read_s = float("inf")
        for _ in range(2):  # the first pass also warms the page cache, as an export's would
            started = time.perf_counter()
            with EpisodeDataset(source) as dataset:
                episodes = len(dataset)
                frames = sum(episode.num_frames for episode in dataset)
            read_s = min(read_s, time.perf_counter() - started)
        figures = [
            benchlib.Figure("source_episodes", episodes),
            benchlib.Figure("source_frames", frames),
            benchlib.Figure("source_mb", source_mb / 1e6, "MB", note="HDF5, gzip level 1"),
            benchlib.Figure("read_only_frames_per_s", frames / read_s, "frames/s"),
        ]
        for name in args.codecs:
            out = work / f"out_{name}"
            summary = export_lerobot(source, out, CODECS[name])
            figures += [
                benchlib.Figure(
                    f"{name}_episodes_per_s", summary.episodes / summary.seconds, "1/s"
                ),
                benchlib.Figure(
                    f"{name}_frames_per_s",
                    summary.frames / summary.seconds,
                    "frames/s",
                    goal=">= 10" if name == "av1" else None,
                    note="goal: faster than a 10 Hz recording" if name == "av1" else "",
                ),
                benchlib.Figure(f"{name}_mb_written", summary.bytes_written / 1e6, "MB"),
                benchlib.Figure(
                    f"{name}_mb_per_1000_frames",
                    summary.bytes_written / 1e6 / summary.frames * 1000,
                    "MB",
                ),
            ]
            shutil.rmtree(out)
        benchlib.report(
            "lerobot_export",
            figures,
            title=f"LeRobot v3.0 export of {source if args.dataset else 'synthetic episodes'}",
            image_px=None if args.dataset else args.image_px,
            noise_sigma=None if args.dataset else args.noise_sigma,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
