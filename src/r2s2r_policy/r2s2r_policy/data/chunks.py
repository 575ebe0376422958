"""The torch datasets of (observation, action chunk) samples made from episode sources.

:class:`ChunkDataset` turns one source (:mod:`r2s2r_policy.data.sources`) into training
samples: the observation at frame ``t`` and the action chunk ``actions[t + 1 : t + 1 + H]``
(``actions[t]`` is the target in force at frame ``t``, so chunk step ``k`` is the target
``k + 1`` control steps after the observation: the time rule of :mod:`r2s2r_policy.spec`),
padded past the episode end by repeating the last action, with a mask that is False on padded
steps. Images are decoded and resized once, when the dataset is built, and held in memory (a
few hundred MB at 64-96 px for thousands of episodes), so a training step costs the model, not
HDF5 decoding. :class:`MixtureDataset` concatenates the datasets of several sources,
:class:`BatchedDataset` and :func:`collate_batch` fetch whole batches, and
:func:`compute_normalization` makes the statistics of inputs and targets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from r2s2r_dataset import ACTIONS_KEY, BELT_SPEED_KEY, JOINT_POS_KEY, OBJECT_TRACK_KEY

from ..models.palm_frame import PalmObjectFeatures
from ..normalization import NormalizationStats, RunningStats
from ..spec import ACTION_MASK_KEY, PALM_OBJECT_DIM, PALM_OBJECT_KEY, PolicySpec
from .sources import EpisodeSource, check_source_features

Sample = dict[str, np.ndarray]


class FrameArray(Protocol):
    """Frames indexed like a ``(frames, H, W, 3)`` uint8 array.

    An array, or a store's reader (:class:`~r2s2r_policy.data.image_store.StoredFrames`)
    that reads what is indexed.
    """

    @property
    def shape(self) -> tuple[int, ...]:
        """``(frames, H, W, 3)``."""
        ...

    @property
    def dtype(self) -> np.dtype[Any]:
        """uint8."""
        ...

    def __getitem__(self, index: Any) -> np.ndarray: ...


def resize_image(image: np.ndarray, height_px: int, width_px: int) -> np.ndarray:
    """Resize a uint8 ``(H, W, 3)`` image with area interpolation (no-op when already sized)."""
    if image.shape[0] == height_px and image.shape[1] == width_px:
        return image
    return cv2.resize(image, (width_px, height_px), interpolation=cv2.INTER_AREA)


def action_chunk(actions: np.ndarray, start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``actions[start : start + length]`` padded with the last action, and its mask.

    Args:
        actions: ``(T, A)`` actions of one episode.
        start: First frame of the chunk, ``0 <= start < T``.
        length: Chunk length ``H``.

    Returns:
        ``(chunk (H, A), mask (H,))``; mask is False where the step was padded.

    """
    total = actions.shape[0]
    stop = min(start + length, total)
    valid = stop - start
    chunk = np.empty((length, actions.shape[1]), dtype=np.float32)
    chunk[:valid] = actions[start:stop]
    chunk[valid:] = actions[total - 1]
    mask = np.zeros(length, dtype=bool)
    mask[:valid] = True
    return chunk, mask


class ChunkDataset(Dataset[Sample]):
    """Training samples of one source: observation at ``t`` and the action chunk after ``t``.

    The chunk is ``actions[t + 1 : t + 1 + H]`` (the time rule of :mod:`r2s2r_policy.spec`);
    with ``spec.action_representation == 'delta'`` the measured positions of the action joints
    at ``t`` are subtracted. Low-dimensional arrays of all episodes are cached at construction
    (a few MB for thousands of episodes), and so are the images, decoded once per episode and
    resized to the spec's size (``cache_images``; off: read and resize per sample).

    Args:
        source: The episode source (checked with
            :func:`~r2s2r_policy.data.sources.check_source_features` first).
        spec: Policy spec (image keys and sizes, chunk length, inputs).
        cache_images: Hold every resized image in memory.
        image_store: The resized images already made, camera key → ``(frames, H, W, 3)``
            uint8 in the cache's layout (e.g. read from disk per batch,
            :func:`~r2s2r_policy.data.image_store.open_image_store`); used instead of the
            in-memory cache, whatever ``cache_images`` says.

    Raises:
        MissingFeatureError: If the source lacks a feature.
        ValueError: If the store's arrays do not fit the source and spec.

    """

    def __init__(
        self,
        source: EpisodeSource,
        spec: PolicySpec,
        cache_images: bool = True,
        image_store: Mapping[str, FrameArray] | None = None,
    ) -> None:
        check_source_features([source], spec)
        self.source = source
        self.spec = spec
        self._low_dim = [source.low_dim(e) for e in range(source.num_episodes())]
        lengths = np.array([len(d[ACTIONS_KEY]) for d in self._low_dim], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._action_in_state = [spec.joint_names.index(n) for n in spec.action_names]
        self._images: dict[str, FrameArray] | None = None
        self._flat: dict[str, np.ndarray] | None = None
        if image_store is not None:
            total = int(self._starts[-1])
            for image_spec in spec.images:
                array = image_store.get(image_spec.key)
                wanted = (total, image_spec.height_px, image_spec.width_px, 3)
                if array is None or array.shape != wanted or array.dtype != np.uint8:
                    got = None if array is None else (array.dtype, array.shape)
                    raise ValueError(f"image store: {image_spec.key} is {got}, expected {wanted}")
            self._images = {i.key: image_store[i.key] for i in spec.images}
        elif cache_images:
            self._images = {}
            total = int(self._starts[-1])
            for image_spec in spec.images:
                height, width = image_spec.height_px, image_spec.width_px
                cache = np.empty((total, height, width, 3), dtype=np.uint8)
                for episode in range(source.num_episodes()):
                    frames = source.episode_images(episode, image_spec.key)
                    start = int(self._starts[episode])
                    for index, frame in enumerate(frames):
                        cache[start + index] = resize_image(frame, height, width)
                self._images[image_spec.key] = cache

    def __len__(self) -> int:
        return int(self._starts[-1])

    @property
    def image_cache_bytes(self) -> int:
        """Memory held by the image cache (a store on disk holds none of its own)."""
        arrays = (self._images or {}).values()
        return sum(
            a.nbytes for a in arrays if isinstance(a, np.ndarray) and not isinstance(a, np.memmap)
        )

    def locate(self, index: int) -> tuple[int, int]:
        """Map a sample index to ``(episode_index, frame_index)``."""
        if not 0 <= index < len(self):
            raise IndexError(f"sample index {index}: expected 0..{len(self) - 1}")
        episode = int(np.searchsorted(self._starts, index, side="right") - 1)
        return episode, int(index - self._starts[episode])

    def chunk_at(self, episode: int, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the training target of one frame: ``(chunk (H, A), mask (H,))``."""
        low = self._low_dim[episode]
        chunk, mask = action_chunk(low[ACTIONS_KEY], frame + 1, self.spec.chunk_length)
        if self.spec.action_representation == "delta":
            chunk = chunk - low[JOINT_POS_KEY][frame][self._action_in_state]
        return chunk, mask

    def __getitem__(self, index: int) -> Sample:
        index = int(index)
        episode, frame = self.locate(index)
        low = self._low_dim[episode]
        sample: Sample = {}
        for image_spec in self.spec.images:
            if self._images is not None:
                sample[image_spec.key] = self._images[image_spec.key][index]
                continue
            image = self.source.image(episode, frame, image_spec.key)
            sample[image_spec.key] = np.ascontiguousarray(
                resize_image(image, image_spec.height_px, image_spec.width_px)
            )
        sample[JOINT_POS_KEY] = low[JOINT_POS_KEY][frame]
        if self.spec.use_belt_speed:
            sample[BELT_SPEED_KEY] = low[BELT_SPEED_KEY][frame]
        if self.spec.uses_object_track:
            sample[OBJECT_TRACK_KEY] = low[OBJECT_TRACK_KEY][frame]
        chunk, mask = self.chunk_at(episode, frame)
        sample[ACTIONS_KEY] = chunk
        sample[ACTION_MASK_KEY] = mask
        return sample

    def batch(self, indices: Sequence[int] | np.ndarray) -> Sample:
        """Return a whole batch at once, ``{key: (B, ...) array}``: the samples stacked.

        The batched path the trainer takes (through :class:`BatchedDataset`): cached
        images by one gather per camera, low-dimensional inputs and action chunks by index
        arithmetic over all episodes (one Python call per batch instead of per sample; a
        quarter of the cached trainer's data time was per-sample collation).

        Raises:
            IndexError: If an index is outside ``0 .. len(self) - 1``.

        """
        index = np.asarray(indices, dtype=np.int64).reshape(-1)
        if index.size and (index.min() < 0 or index.max() >= len(self)):
            bad = index[(index < 0) | (index >= len(self))][0]
            raise IndexError(f"sample index {int(bad)}: expected 0..{len(self) - 1}")
        flat = self._flat_low_dim()
        batch: Sample = {}
        for image_spec in self.spec.images:
            if self._images is not None:
                batch[image_spec.key] = self._images[image_spec.key][index]
                continue
            size = (len(index), image_spec.height_px, image_spec.width_px, 3)
            images = np.empty(size, dtype=np.uint8)
            for row, sample_index in enumerate(index):
                episode_index, frame = self.locate(int(sample_index))
                image = self.source.image(episode_index, frame, image_spec.key)
                images[row] = resize_image(image, image_spec.height_px, image_spec.width_px)
            batch[image_spec.key] = images
        batch[JOINT_POS_KEY] = flat[JOINT_POS_KEY][index]
        if self.spec.use_belt_speed:
            batch[BELT_SPEED_KEY] = flat[BELT_SPEED_KEY][index]
        if self.spec.uses_object_track:
            batch[OBJECT_TRACK_KEY] = flat[OBJECT_TRACK_KEY][index]
        # Chunk step k of frame t is action t + 1 + k of its episode, the last one past the end.
        episode = np.searchsorted(self._starts, index, side="right") - 1
        last = self._starts[episode + 1] - 1
        wanted = index[:, None] + 1 + np.arange(self.spec.chunk_length)
        batch[ACTION_MASK_KEY] = wanted <= last[:, None]
        chunk = flat[ACTIONS_KEY][np.minimum(wanted, last[:, None])]
        if self.spec.action_representation == "delta":
            chunk = chunk - batch[JOINT_POS_KEY][:, None, self._action_in_state]
        batch[ACTIONS_KEY] = chunk.astype(np.float32, copy=False)
        return batch

    def _flat_low_dim(self) -> dict[str, np.ndarray]:
        """Return the episodes' low-dimensional arrays end to end (built on first use)."""
        if self._flat is None:
            keys = self._low_dim[0].keys() if self._low_dim else ()
            self._flat = {key: np.concatenate([low[key] for low in self._low_dim]) for key in keys}
        return self._flat

    def update_stats(self, stats: dict[str, RunningStats]) -> None:
        """Add this source's inputs and action targets to running statistics."""
        palm_features = (
            PalmObjectFeatures(self.spec.joint_names) if PALM_OBJECT_KEY in stats else None
        )
        for episode, low in enumerate(self._low_dim):
            for key, running in stats.items():
                if key == PALM_OBJECT_KEY and palm_features is not None:
                    running.update(
                        palm_features(
                            torch.from_numpy(low[JOINT_POS_KEY]),
                            torch.from_numpy(low[OBJECT_TRACK_KEY]),
                        ).numpy()
                    )
                    continue
                if key == ACTIONS_KEY:
                    targets = [self.chunk_at(episode, f) for f in range(len(low[ACTIONS_KEY]))]
                    values = np.concatenate([c[m] for c, m in targets if m.any()])
                    if len(values):
                        running.update(values)
                    continue
                running.update(low[key].reshape(len(low[key]), -1))


def compute_normalization(datasets: Sequence[ChunkDataset], spec: PolicySpec) -> NormalizationStats:
    """Streaming statistics of inputs and action targets over every dataset (unweighted).

    Action statistics are over the training targets (chunk steps, deltas when the spec says so).

    Raises:
        ValueError: If ``datasets`` is empty.

    """
    if not datasets:
        raise ValueError("compute_normalization: expected at least one dataset")
    stats = {
        JOINT_POS_KEY: RunningStats(len(spec.joint_names)),
        ACTIONS_KEY: RunningStats(spec.action_dim),
    }
    if spec.use_belt_speed:
        stats[BELT_SPEED_KEY] = RunningStats(1)
    if spec.uses_object_track:
        stats[OBJECT_TRACK_KEY] = RunningStats(len(spec.object_track_fields))
    if spec.palm_object_features:
        stats[PALM_OBJECT_KEY] = RunningStats(PALM_OBJECT_DIM)
    for dataset in datasets:
        dataset.update_stats(stats)
    return NormalizationStats(features={key: value.finish() for key, value in stats.items()})


class MixtureDataset(Dataset[Sample]):
    """Concatenation of per-source datasets; global index = source offset + local index.

    Args:
        datasets: Source name → dataset, in a fixed order (the sampler uses the same order).

    """

    def __init__(self, datasets: Mapping[str, ChunkDataset]) -> None:
        if not datasets:
            raise ValueError("MixtureDataset: expected at least one dataset")
        self.names = list(datasets)
        self.datasets = [datasets[name] for name in self.names]
        sizes = np.array([len(d) for d in self.datasets], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def sizes(self) -> list[int]:
        """Samples per source, in ``names`` order."""
        return [len(d) for d in self.datasets]

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def source_of(self, index: int) -> int:
        """Index (in ``names``) of the source that holds global sample ``index``."""
        return int(np.searchsorted(self.offsets, index, side="right") - 1)

    def __getitem__(self, index: int) -> Sample:
        source = self.source_of(int(index))
        return self.datasets[source][int(index - self.offsets[source])]

    def batch(self, indices: Sequence[int] | np.ndarray) -> Sample:
        """Return a whole batch in the order of ``indices``, each source's part batched."""
        index = np.asarray(indices, dtype=np.int64).reshape(-1)
        sources = np.searchsorted(self.offsets, index, side="right") - 1
        batch: Sample = {}
        for source in np.unique(sources):
            rows = np.flatnonzero(sources == source)
            part = self.datasets[source].batch(index[rows] - self.offsets[source])
            for key, values in part.items():
                if key not in batch:
                    batch[key] = np.empty((len(index), *values.shape[1:]), dtype=values.dtype)
                batch[key][rows] = values
        return batch


def collate_batch(data: Sample | Sequence[Sample]) -> dict[str, torch.Tensor]:
    """Turn a batch into tensors: the ``collate_fn`` of a DataLoader over these datasets.

    A batch from a ``batch`` method (``{key: (B, ...) array}``) becomes tensors sharing its
    memory; a list of samples is stacked as torch's default collation does.
    """
    if isinstance(data, Mapping):
        return {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in data.items()}
    return cast(dict[str, torch.Tensor], default_collate(list(data)))


class BatchedDataset(Dataset[Sample]):
    """A :class:`ChunkDataset` or :class:`MixtureDataset` whose DataLoader fetches whole batches.

    A :class:`~torch.utils.data.DataLoader` with a ``batch_size`` calls ``__getitems__`` with
    the batch's indices when a dataset has it; this adapter answers with the dataset's
    ``batch`` (one dict of stacked arrays), so use it with ``collate_fn=``
    :func:`collate_batch`. The datasets themselves keep torch's per-sample protocol (their
    samples collate with the default collation).

    Args:
        dataset: The dataset.

    """

    def __init__(self, dataset: ChunkDataset | MixtureDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Sample:
        return self.dataset[index]

    def __getitems__(self, indices: Sequence[int]) -> Sample:
        """Return the batch of ``indices`` (the DataLoader's batched fetch)."""
        return self.dataset.batch(indices)
