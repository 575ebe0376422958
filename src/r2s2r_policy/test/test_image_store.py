"""The on-disk image store: the cache's samples bit for bit (in this process and in DataLoader
workers), stale stores refused or rebuilt, no partials, room made on a full disk."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import make_source, tiny_options
from r2s2r_policy.data import image_store
from r2s2r_policy.data.chunks import ChunkDataset, collate_batch
from r2s2r_policy.data.image_store import (
    ImageStoreError,
    StoredFrames,
    build_image_store,
    open_image_store,
    store_bytes,
    store_manifest,
)
from r2s2r_policy.training_data import make_spec


def test_a_store_gives_the_in_memory_caches_samples_bit_for_bit(tmp_path: Path) -> None:
    source = make_source("sim", [2, 3, 4], frames=9)
    spec = make_spec(tiny_options(chunk_length=6), source, 10.0)
    seen: list[int] = []
    store = build_image_store(
        source, spec, tmp_path / "store", "sha-1", lambda done, _: seen.append(done)
    )
    assert seen == [1, 2, 3]
    arrays = open_image_store(store, store_manifest(source, spec, "sha-1"))
    assert all(isinstance(a, StoredFrames) for a in arrays.values())
    cached = ChunkDataset(source, spec, cache_images=True)
    stored = ChunkDataset(source, spec, image_store=arrays)
    assert stored.image_cache_bytes == 0 < cached.image_cache_bytes
    rows = np.random.default_rng(0).integers(0, len(cached), 16)
    expected, got = collate_batch(cached.batch(rows)), collate_batch(stored.batch(rows))
    for key, value in expected.items():
        assert torch.equal(got[key], value), key
    for index in (0, len(cached) - 1):
        for key, array in cached[index].items():
            assert np.array_equal(stored[index][key], array), key
    frames = arrays["head_camera_rgb"]
    assert np.array_equal(frames[-1], frames[len(frames) - 1])
    assert frames[np.array([], dtype=np.int64)].shape == (0, *frames.shape[1:])
    with pytest.raises(IndexError, match=f"frame {len(frames)}: expected 0..{len(frames) - 1}"):
        frames[np.array([0, len(frames)])]
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


def test_pixels_overwritten_in_place_are_refused_and_rebuilt(tmp_path: Path) -> None:
    """Same size, same header, other pixels (a black head camera): refused, then rebuilt."""
    source = make_source("sim", [2, 3], frames=6)
    spec = make_spec(tiny_options(), source, 10.0)
    manifest = store_manifest(source, spec, "sha-1")
    store = build_image_store(source, spec, tmp_path / "store", "sha-1")
    camera = store / "head_camera_rgb.npy"
    size = camera.stat().st_size
    with camera.open("r+b") as handle:
        handle.seek(size - 3 * 32 * 32 * 3)
        handle.write(bytes(3 * 32 * 32 * 3))  # the last three frames black
    assert camera.stat().st_size == size
    with pytest.raises(ImageStoreError, match=r"head_camera_rgb\.npy's pixels are not the ones"):
        open_image_store(store, manifest)
    messages: list[str] = []
    build_image_store(source, spec, store, "sha-1", log=messages.append)
    assert open_image_store(store, manifest)["head_camera_rgb"][-1].any()
    assert any("rebuilding" in line for line in messages)


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


@pytest.mark.graph  # DataLoader worker processes
def test_dataloader_workers_read_a_store_as_the_cache_gives_it(tmp_path: Path) -> None:
    from r2s2r_policy.data.chunks import BatchedDataset
    from torch.utils.data import DataLoader

    source = make_source("sim", [2, 3, 4, 5], frames=8)
    spec = make_spec(tiny_options(), source, 10.0)
    store = build_image_store(source, spec, tmp_path / "store", "sha-1")
    cached = ChunkDataset(source, spec, cache_images=True)
    stored = ChunkDataset(
        source, spec, image_store=open_image_store(store, store_manifest(source, spec, "sha-1"))
    )
    stored.batch(np.arange(4))  # the parent has opened its descriptors before the workers fork
    batches = np.random.default_rng(1).integers(0, len(cached), (6, 8)).tolist()

    def load(dataset: ChunkDataset, workers: int) -> list[dict[str, torch.Tensor]]:
        loader = DataLoader(
            BatchedDataset(dataset),
            batch_sampler=batches,
            collate_fn=collate_batch,
            num_workers=workers,
            multiprocessing_context="fork" if workers else None,
        )
        return list(loader)

    expected = load(cached, 0)
    for got in (load(stored, 2), load(stored, 0)):
        assert len(got) == len(expected)
        for want, have in zip(expected, got, strict=True):
            for key, value in want.items():
                assert torch.equal(have[key], value), key
    reader = open_image_store(store, store_manifest(source, spec, "sha-1"))["head_camera_rgb"]
    reader[0]
    frames = pickle.loads(pickle.dumps(reader))  # as a spawned worker gets it: opens its own
    assert np.array_equal(frames[np.arange(3)], cached.batch(np.arange(3))["head_camera_rgb"])


def test_a_stale_store_in_place_is_rebuilt_with_one_line(tmp_path: Path) -> None:
    source = make_source("sim", [2, 3], frames=6)
    spec = make_spec(tiny_options(), source, 10.0)
    store = build_image_store(source, spec, tmp_path / "store", "sha-1")
    lines: list[str] = []
    build_image_store(source, spec, store, "sha-2", log=lines.append)
    assert lines == [
        f"image store {store} is stale: its dataset differ from the data asked for: rebuilding it"
    ]
    open_image_store(store, store_manifest(source, spec, "sha-2"))
    (store / "head_camera_rgb.npy").write_bytes(b"")  # damaged: refused in one line, rebuilt
    with pytest.raises(ImageStoreError, match=r"unreadable head_camera_rgb\.npy"):
        open_image_store(store, store_manifest(source, spec, "sha-2"))


def test_a_full_disk_removes_the_oldest_stores_then_refuses_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_source("sim", [2, 3], frames=6)
    spec = make_spec(tiny_options(), source, 10.0)
    old = build_image_store(source, spec, tmp_path / "old", "sha-1")
    newer = build_image_store(source, spec, tmp_path / "newer", "sha-2")
    open_image_store(newer, store_manifest(source, spec, "sha-2"))  # opened last: kept longest
    needed = store_bytes(store_manifest(source, spec, "sha-3")) + image_store.DISK_MARGIN_BYTES
    real_usage = image_store.shutil.disk_usage

    def usage(path: Path) -> object:
        stores = sum(1 for p in tmp_path.iterdir() if (p / "manifest.json").is_file())
        return real_usage(path)._replace(free=needed - 1 if stores == 2 else needed)

    monkeypatch.setattr(image_store.shutil, "disk_usage", usage)
    lines: list[str] = []
    build_image_store(source, spec, tmp_path / "new", "sha-3", log=lines.append)
    assert lines == [f"image store {old}: removed to make room for new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "newer"]
    monkeypatch.setattr(image_store.shutil, "disk_usage", lambda p: real_usage(p)._replace(free=0))
    with pytest.raises(ImageStoreError, match=r"GiB free$") as error:
        build_image_store(source, spec, tmp_path / "more", "sha-4")
    assert "\n" not in str(error.value) and not (tmp_path / "more").exists()
