"""Training images in memory vs in an on-disk store read per batch: peak RSS and batch time.

Run: ``python bench/bench_image_store.py DATASET [--image-px 64 128] [--batches 200]
[--batch-size 64]``.

For each image size, three child processes (each one's peak RSS is its own):

- ``cache``: today's in-memory cache (``ChunkDataset(cache_images=True)``): decode and resize
  every frame into RAM, then fetch random batches;
- ``build``: write the store (``r2s2r_policy.data.image_store.build_image_store``) into a
  temporary folder: one episode in RAM at a time;
- ``store``: open the store (positioned reads, ``StoredFrames``) and fetch the same batches,
  first with its files in the kernel's page cache (warm), then again after dropping them from
  it (``POSIX_FADV_DONTNEED``: cold, every frame read from the disk).

Prints per size the peak RSS of each and, after the batches, the process's own (anonymous)
memory and its mapped file pages, the images' bytes, the build time and the batch fetch times,
and checks the two paths' batches are equal. Issue 38: training memory bounded by a setting,
not by the dataset (at paper scale: bench/bench_training_memory.py).

Last line: ``{"benchmark": "image_store", "figures": [...]}``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
import numpy as np


def child(mode: str, dataset: str, image_px: int, batches: int, store: str, size: int) -> dict:
    """Run one path in this process; return its figures."""
    import torch
    from r2s2r_policy.data.chunks import ChunkDataset
    from r2s2r_policy.data.image_store import build_image_store, open_image_store, store_manifest
    from r2s2r_policy.data.sources import HDF5EpisodeSource
    from r2s2r_policy.training_config import PolicyOptions
    from r2s2r_policy.training_data import make_spec

    torch.set_num_threads(1)
    source = HDF5EpisodeSource(dataset, name="bench")
    options = PolicyOptions(image_height_px=image_px, image_width_px=image_px)
    spec = make_spec(options, source, source.control_rate_hz)
    started = time.perf_counter()
    out: dict = {}
    if mode == "build":
        build_image_store(source, spec, store, identity=dataset)
        out["build_s"] = time.perf_counter() - started
    else:
        if mode == "cache":
            data = ChunkDataset(source, spec, cache_images=True)
        else:
            arrays = open_image_store(store, store_manifest(source, spec, dataset))
            data = ChunkDataset(source, spec, image_store=arrays)
        out["ready_s"] = time.perf_counter() - started
        out["image_bytes"] = sum(len(data) * i.height_px * i.width_px * 3 for i in spec.images)
        out["batch_ms"], out["digest"] = fetch_batches(data, batches, size)
        if mode == "store":
            for image in spec.images:  # out of the page cache: the next reads go to the disk
                descriptor = os.open(Path(store) / f"{image.key}.npy", os.O_RDONLY)
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(descriptor)
            out["cold_batch_ms"], _ = fetch_batches(data, batches, size)
    source.close()
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out.update(memory_split())
    return out


def fetch_batches(data: Any, batches: int, size: int) -> tuple[float, int]:
    """Fetch ``batches`` random batches (seed 0); return ms per batch and a digest of them."""
    rng = np.random.default_rng(0)
    digest = 0
    key = data.spec.images[0].key
    fetch = time.perf_counter()
    for _ in range(batches):
        batch = data.batch(rng.integers(0, len(data), size))
        digest = (digest * 31 + int(batch[key].sum())) % (1 << 61)
    return 1e3 * (time.perf_counter() - fetch) / batches, digest


def memory_split() -> dict[str, float]:
    """Return this process's resident memory now: its own (anonymous) and mapped file pages.

    File pages of a memory-mapped store count in RSS once touched, but they are the kernel's
    page cache: clean, shared, dropped under memory pressure. Anonymous memory (the in-memory
    cache) is not.
    """
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            fields[key] = float(value.split()[0]) / 1024.0
    return {"anon_mib": fields["RssAnon"], "file_mib": fields["RssFile"]}


def run_child(*args: str) -> dict:
    """Run this script as a child with ``--child`` and return its JSON line."""
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    """Run the benchmark."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("dataset", help="An episode dataset (HDF5 file or shard folder).")
    parser.add_argument("--image-px", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64, help="Samples per batch.")
    parser.add_argument("--child", choices=["cache", "build", "store"], help=argparse_hidden())
    parser.add_argument("--store", default="", help=argparse_hidden())
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(
                child(
                    args.child,
                    args.dataset,
                    args.image_px[0],
                    args.batches,
                    args.store,
                    args.batch_size,
                )
            )
        )
        return 0
    figures: list[benchlib.Figure] = []
    equal = True
    for px in args.image_px:
        with tempfile.TemporaryDirectory() as folder:
            store = str(Path(folder) / "store")
            common = [args.dataset, "--image-px", str(px), "--batches", str(args.batches)]
            common += ["--batch-size", str(args.batch_size)]
            cache = run_child(*common, "--child", "cache")
            build = run_child(*common, "--child", "build", "--store", store)
            mapped = run_child(*common, "--child", "store", "--store", store)
        equal = equal and cache["digest"] == mapped["digest"]
        gib = cache["image_bytes"] / 2**30
        figures += [
            benchlib.Figure(f"images_gib_{px}px", round(gib, 2), "GiB", note="decoded, resized"),
            benchlib.Figure(f"cache_peak_rss_mib_{px}px", round(cache["peak_rss_mib"]), "MiB"),
            benchlib.Figure(f"cache_anon_mib_{px}px", round(cache["anon_mib"]), "MiB", note="own"),
            benchlib.Figure(
                f"store_build_peak_rss_mib_{px}px",
                round(build["peak_rss_mib"]),
                "MiB",
                note="+ file",
            ),
            benchlib.Figure(
                f"store_peak_rss_mib_{px}px", round(mapped["peak_rss_mib"]), "MiB", note="+ file"
            ),
            benchlib.Figure(f"store_anon_mib_{px}px", round(mapped["anon_mib"]), "MiB", note="own"),
            benchlib.Figure(
                f"store_file_mib_{px}px", round(mapped["file_mib"]), "MiB", note="mapped files"
            ),
            benchlib.Figure(f"cache_ready_s_{px}px", round(cache["ready_s"], 1), "s"),
            benchlib.Figure(f"store_build_s_{px}px", round(build["build_s"], 1), "s"),
            benchlib.Figure(f"cache_batch_ms_{px}px", round(cache["batch_ms"], 2), "ms"),
            benchlib.Figure(
                f"store_batch_ms_{px}px", round(mapped["batch_ms"], 2), "ms", note="page cache"
            ),
            benchlib.Figure(
                f"store_cold_batch_ms_{px}px",
                round(mapped["cold_batch_ms"], 2),
                "ms",
                note="from the disk",
            ),
        ]
    figures.append(benchlib.Figure("batches_equal", equal, "", goal="True"))
    benchlib.report(
        "image_store",
        figures,
        title=f"image store vs in-memory cache: {args.dataset}, batch {args.batch_size}",
    )
    return 0 if equal else 1


def argparse_hidden() -> str:
    """Help text of the internal flags (argparse.SUPPRESS)."""
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
