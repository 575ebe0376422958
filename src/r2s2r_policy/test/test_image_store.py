"""The on-disk image store: the cache's samples bit for bit, stale stores refused, no partials."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import make_source, tiny_options
from r2s2r_policy.data.chunks import ChunkDataset, collate_batch
from r2s2r_policy.data.image_store import (
    ImageStoreError,
    build_image_store,
    open_image_store,
    store_manifest,
)
from r2s2r_policy.training import make_spec


def test_a_store_gives_the_in_memory_caches_samples_bit_for_bit(tmp_path: Path) -> None:
    source = make_source("sim", [2, 3, 4], frames=9)
    spec = make_spec(tiny_options(chunk_length=6), source, 10.0)
    seen: list[int] = []
    store = build_image_store(
        source, spec, tmp_path / "store", "sha-1", lambda done, _: seen.append(done)
    )
    assert seen == [1, 2, 3]
    arrays = open_image_store(store, store_manifest(source, spec, "sha-1"))
    assert all(isinstance(a, np.memmap) for a in arrays.values())
    cached = ChunkDataset(source, spec, cache_images=True)
    stored = ChunkDataset(source, spec, image_store=arrays)
    assert stored.image_cache_bytes == 0 < cached.image_cache_bytes
    rows = np.random.default_rng(0).integers(0, len(cached), 16)
    expected, got = collate_batch(cached.batch(rows)), collate_batch(stored.batch(rows))
    for key, value in expected.items():
        assert torch.equal(got[key], value), key
    for index in (0, len(cached) - 1):
        for key, value in cached[index].items():
            assert np.array_equal(stored[index][key], value), key
    # Built again for the same data: kept as it is.
    before = (store / "head_camera_rgb.npy").stat().st_mtime_ns
    build_image_store(source, spec, store, "sha-1")
    assert (store / "head_camera_rgb.npy").stat().st_mtime_ns == before


def test_a_stale_store_is_refused_in_one_line_and_rebuilt(tmp_path: Path) -> None:
    source = make_source("sim", [2, 3], frames=6)
    spec = make_spec(tiny_options(), source, 10.0)
    store = build_image_store(source, spec, tmp_path / "store", "sha-1")
    other_size = tiny_options()
    other_size.image_height_px = other_size.image_width_px = 16
    small = make_spec(other_size, source, 10.0)
    cases = {
        "cameras or image size": store_manifest(source, small, "sha-1"),
        "dataset": store_manifest(source, spec, "sha-2"),
        "episodes": store_manifest(make_source("sim", [2, 3], frames=7), spec, "sha-1"),
    }
    for what, manifest in cases.items():
        with pytest.raises(ImageStoreError, match=f"stale: its {what} differ") as error:
            open_image_store(store, manifest)
        assert "\n" not in str(error.value)
    rebuilt = build_image_store(source, small, store, "sha-1")
    arrays = open_image_store(rebuilt, store_manifest(source, small, "sha-1"))
    assert arrays["head_camera_rgb"].shape[1:] == (16, 16, 3)
    with pytest.raises(ImageStoreError, match="none there"):
        open_image_store(tmp_path / "nothing", store_manifest(source, spec, "sha-1"))
    with pytest.raises(ValueError, match="image store: head_camera_rgb"):
        ChunkDataset(source, spec, image_store=arrays)  # 16 px arrays for a 32 px spec


def test_an_interrupted_build_leaves_no_store(tmp_path: Path) -> None:
    source = make_source("sim", [2, 3, 4], frames=5)
    spec = make_spec(tiny_options(), source, 10.0)

    def stop(done: int, _: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_image_store(source, spec, tmp_path / "store", "sha-1", stop)
    assert list(tmp_path.iterdir()) == []


def test_training_on_stores_gives_the_cached_runs_losses(tmp_path: Path) -> None:
    from policy_fixtures import tiny_config
    from r2s2r_policy.training import train
    from r2s2r_testing.episodes import write_hdf5

    real = write_hdf5(tmp_path / "real.hdf5", "real", [0, 1, 2])
    sim = write_hdf5(tmp_path / "sim.hdf5", "sim", [5, 6, 7, 8])
    common = {
        "real_dataset": str(real),
        "sim_dataset": str(sim),
        "sim_ratio": 0.5,
        "steps": 6,
        "checkpoint_every_steps": 6,
        "validation_fraction": 0.25,  # the stores hold the training subsets
    }
    cached = train(tiny_config(**common), tmp_path / "cached")
    stores = tmp_path / "stores"
    stored = train(tiny_config(**common, image_store_dir=str(stores)), tmp_path / "stored")
    assert stored.losses == cached.losses
    built = sorted(p.name for p in stores.iterdir())
    assert len(built) == 2 and built[0].startswith("real-32px-") and built[1].startswith("sim-")
    stamps = {p: (p / "head_camera_rgb.npy").stat().st_mtime_ns for p in stores.iterdir()}
    again = train(tiny_config(**common, image_store_dir=str(stores)), tmp_path / "again")
    assert again.losses == cached.losses
    assert {p: (p / "head_camera_rgb.npy").stat().st_mtime_ns for p in stores.iterdir()} == stamps
