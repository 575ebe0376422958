"""Latent analysis cost: frames, latents and indexes of an experiment's datasets.

Run: ``python bench/bench_analysis.py EXPDIR [--stride 4] [--threads 1]``.

For a finished experiment (``r2s2r experiment``): samples every ``stride``-th frame of the real
dataset and of each co-trained policy's simulated dataset (decode + resize to the policies'
size), embeds them with that policy (every frame: what ``r2s2r analyze experiment`` does) and
builds its live-monitor index (``r2s2r analyze index``: class-balanced, at most 2048 per
domain), timing each part. Goal (issue 37): all of it for the reduced experiment's datasets in
≤ 5 min on the 2-core machine.

Last line: ``{"benchmark": "analysis", "figures": [...]}``.
"""

from __future__ import annotations

import time
from pathlib import Path

import benchlib
import torch
from r2s2r_policy.analysis.embeddings import embed_frames, sample_frames
from r2s2r_policy.analysis.index import build_latent_index
from r2s2r_policy.checkpoint import load_checkpoint
from r2s2r_policy.data.sources import HDF5EpisodeSource

from r2s2r.experiment.analysis import read_finished, training_datasets
from r2s2r.experiment.results import REAL_ONLY


def main() -> int:
    """Run the benchmark."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("experiment", type=Path, help="A finished experiment directory.")
    parser.add_argument("--stride", type=int, default=4)
    benchlib.add_threads(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    finished = read_finished(args.experiment)
    real_path = training_datasets(finished.policies[REAL_ONLY])["real"]
    seconds = {"frames": 0.0, "embed": 0.0, "index": 0.0}
    counts = {"frames": 0, "latents": 0}
    real_frames = None
    for name, policy_info in finished.policies.items():
        if policy_info.configuration is None:
            continue
        policy = load_checkpoint(policy_info.checkpoint).policy
        started = time.perf_counter()
        if real_frames is None:
            with_source = HDF5EpisodeSource(real_path, name="real")
            real_frames = sample_frames(with_source, policy.spec, "real", args.stride)
            with_source.close()
            counts["frames"] += len(real_frames)
        source = HDF5EpisodeSource(training_datasets(policy_info)["sim"], name=name)
        sim_frames = sample_frames(source, policy.spec, "sim", args.stride)
        source.close()
        counts["frames"] += len(sim_frames)
        framed = time.perf_counter()
        embed_frames(policy, real_frames)
        embed_frames(policy, sim_frames)
        embedded = time.perf_counter()
        index = build_latent_index(policy, real_frames, sim_frames)
        indexed = time.perf_counter()
        counts["latents"] += len(real_frames) + len(sim_frames)
        seconds["frames"] += framed - started
        seconds["embed"] += embedded - framed
        seconds["index"] += indexed - embedded
        print(
            f"{name:<20} sim frames {len(sim_frames):>6}  frames {framed - started:6.1f} s  "
            f"embed {embedded - framed:6.1f} s  index {indexed - embedded:6.1f} s "
            f"({index.per_domain} per domain)",
            flush=True,
        )
    total = sum(seconds.values())
    figures = [
        benchlib.Figure("frames_sampled", counts["frames"], "frames", note=f"stride {args.stride}"),
        benchlib.Figure("latents_embedded", counts["latents"], "latents"),
        benchlib.Figure("frames_s", round(seconds["frames"], 1), "s", note="decode + resize"),
        benchlib.Figure("embed_s", round(seconds["embed"], 1), "s"),
        benchlib.Figure("index_s", round(seconds["index"], 1), "s"),
        benchlib.Figure("total_s", round(total, 1), "s", goal="<= 300"),
        benchlib.Figure(
            "embed_latents_per_s", round(counts["latents"] / max(seconds["embed"], 1e-9)), "1/s"
        ),
    ]
    benchlib.report("analysis", figures, title=f"latent analysis of {args.experiment}")
    return 0 if total <= 300 else 1


if __name__ == "__main__":
    raise SystemExit(main())
