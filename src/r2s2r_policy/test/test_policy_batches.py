"""The trainer's batched data path equals per-sample fetching and torch's default collation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import make_source, tiny_options
from r2s2r_policy.data.chunks import BatchedDataset, ChunkDataset, MixtureDataset, collate_batch
from r2s2r_policy.data.sources import HDF5EpisodeSource
from r2s2r_policy.training_data import make_spec
from r2s2r_testing.episodes import write_hdf5
from torch.utils.data import DataLoader, default_collate


def assert_same_batch(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> None:
    assert set(expected) == set(got)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize("representation", ["absolute", "delta"])
@pytest.mark.parametrize("cache_images", [True, False])
def test_batch_equals_stacked_samples(representation: str, cache_images: bool) -> None:
    # Episodes of different lengths; chunks of 6 run past the ends of the short ones.
    sources = {
        "real": make_source("real", [0, 1], frames=5),
        "sim": make_source("sim", [2, 3, 4], frames=9),
    }
    options = tiny_options(chunk_length=6)
    options.action_representation = representation  # type: ignore[assignment]
    spec = make_spec(options, sources["real"], 10.0)
    datasets = {
        name: ChunkDataset(source, spec, cache_images=cache_images)
        for name, source in sources.items()
    }
    mixture = MixtureDataset(datasets)
    rng = np.random.default_rng(0)
    # Sources interleaved, repeats, the first and last frame of every episode.
    indices = [*rng.integers(0, len(mixture), 40).tolist(), 0, 4, 5, 9, 10, len(mixture) - 1]
    expected = default_collate([mixture[i] for i in indices])
    assert_same_batch(expected, collate_batch(mixture.batch(indices)))
    single = datasets["sim"]
    local = [0, 8, 9, len(single) - 1]
    expected = default_collate([single[i] for i in local])
    assert_same_batch(expected, collate_batch(single.batch(local)))


def test_batch_refuses_out_of_range_indices() -> None:
    spec = make_spec(tiny_options(), make_source("real", [0]), 10.0)
    dataset = ChunkDataset(make_source("real", [0], frames=5), spec)
    with pytest.raises(IndexError, match=r"sample index 5: expected 0\.\.4"):
        dataset.batch([0, 5])
    with pytest.raises(IndexError, match="sample index -1"):
        dataset.batch([-1])


def test_dataloader_over_batched_dataset_matches_default_loader(tmp_path: Path) -> None:
    source = HDF5EpisodeSource(write_hdf5(tmp_path / "real.hdf5", "real", [0, 1, 2]), name="real")
    spec = make_spec(tiny_options(), source, 10.0)
    dataset = ChunkDataset(source, spec)
    order = np.random.default_rng(1).permutation(len(dataset)).tolist()
    plain = DataLoader(dataset, batch_size=7, sampler=order, drop_last=True)
    batched = DataLoader(
        BatchedDataset(dataset),
        batch_size=7,
        sampler=order,
        drop_last=True,
        collate_fn=collate_batch,
    )
    count = 0
    for expected, got in zip(plain, batched, strict=True):
        assert_same_batch(expected, got)
        count += 1
    assert count == len(dataset) // 7
    # The datasets keep torch's per-sample protocol: default collation still works on them.
    assert not hasattr(dataset, "__getitems__")
    source.close()
