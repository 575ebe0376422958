"""Weighted multi-source sampling for co-training, deterministic, resumable and shardable.

Each sample of the global stream picks a source with the configured probability (e.g. sim
with probability ``sim_ratio``) and then a frame of that source uniformly (with replacement).
The stream is cut into fixed blocks; block ``b`` is drawn from a NumPy generator seeded with
``(seed, b)``. So sample ``k`` of the stream depends only on ``(seed, k)``: a resumed run
starts at sample ``k`` and sees exactly what an uninterrupted run would, and under DDP rank
``r`` of ``R`` takes samples ``r, r + R, r + 2R, ...`` (disjoint shards whose union is the
single-process stream), as ``DistributedSampler`` does for a plain dataset.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from torch.utils.data import Sampler


class MixtureSampler(Sampler[int]):
    """Torch sampler drawing global indices of a :class:`~r2s2r_policy.data.chunks.MixtureDataset`.

    Args:
        source_sizes: Samples per source, in the dataset's source order.
        weights: Sampling probability per source (normalised here; zero excludes a source).
        num_samples: Samples this rank yields in total (from sample 0).
        seed: Stream seed.
        rank: This process's rank.
        num_replicas: Number of processes sharing the stream.
        start_sample: First sample (of this rank) to yield, for resuming.
        block_size: Samples of the global stream drawn per generator call.

    Raises:
        ValueError: On a length mismatch, negative or all-zero weights, an empty source with
            a positive weight, or an out-of-range rank/start.

    """

    def __init__(
        self,
        source_sizes: Sequence[int],
        weights: Sequence[float],
        num_samples: int,
        seed: int,
        rank: int = 0,
        num_replicas: int = 1,
        start_sample: int = 0,
        block_size: int = 4096,
    ) -> None:
        if len(source_sizes) != len(weights) or not source_sizes:
            raise ValueError(
                f"MixtureSampler: {len(source_sizes)} source sizes but {len(weights)} weights"
            )
        weight_array = np.asarray(weights, dtype=np.float64)
        if np.any(weight_array < 0) or not np.isfinite(weight_array).all():
            raise ValueError(f"MixtureSampler.weights = {list(weights)}: expected finite >= 0")
        if weight_array.sum() <= 0:
            raise ValueError(f"MixtureSampler.weights = {list(weights)}: expected a positive sum")
        for index, (size, weight) in enumerate(zip(source_sizes, weights, strict=True)):
            if weight > 0 and size <= 0:
                raise ValueError(
                    f"MixtureSampler: source {index} has weight {weight} but 0 samples"
                )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"MixtureSampler.rank = {rank}: expected 0..{num_replicas - 1}")
        if not 0 <= start_sample <= num_samples:
            raise ValueError(
                f"MixtureSampler.start_sample = {start_sample}: expected 0..{num_samples}"
            )
        if block_size < 1:
            raise ValueError(f"MixtureSampler.block_size = {block_size}: expected >= 1")
        self.sizes = np.asarray(source_sizes, dtype=np.int64)
        self.probabilities = weight_array / weight_array.sum()
        self._cumulative = np.cumsum(self.probabilities)
        self._cumulative[-1] = 1.0
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.num_samples = num_samples
        self.seed = seed
        self.rank = rank
        self.num_replicas = num_replicas
        self.start_sample = start_sample
        self.block_size = block_size

    def __len__(self) -> int:
        return self.num_samples - self.start_sample

    def _block(self, block_index: int) -> np.ndarray:
        """Global indices of one block of the global stream."""
        rng = np.random.default_rng([self.seed, block_index])
        sources = np.searchsorted(self._cumulative, rng.random(self.block_size), side="right")
        sources = np.minimum(sources, len(self.sizes) - 1)
        local = np.floor(rng.random(self.block_size) * self.sizes[sources]).astype(np.int64)
        return self.offsets[sources] + local

    def global_indices(self, start: int, stop: int) -> np.ndarray:
        """Return indices of global-stream samples ``start .. stop-1`` (all ranks interleaved)."""
        out = np.empty(max(stop - start, 0), dtype=np.int64)
        position = start
        while position < stop:
            block, offset = divmod(position, self.block_size)
            take = min(self.block_size - offset, stop - position)
            out[position - start : position - start + take] = self._block(block)[
                offset : offset + take
            ]
            position += take
        return out

    def __iter__(self) -> Iterator[int]:
        chunk = self.block_size
        for first in range(self.start_sample, self.num_samples, chunk):
            last = min(first + chunk, self.num_samples)
            stream = self.global_indices(first * self.num_replicas, last * self.num_replicas)
            yield from stream[self.rank :: self.num_replicas].tolist()

    def source_of(self, index: int) -> int:
        """Source (in the dataset's order) of a global index."""
        return int(np.searchsorted(self.offsets, index, side="right") - 1)
