"""Episode sources and the torch dataset of (observation, action chunk) samples.

An :class:`EpisodeSource` gives random access to ``(episode, frame)`` observations and the
whole low-dimensional arrays of an episode (joint positions, belt speed, actions: small, so
they are cached in memory for chunking and statistics). Two implementations:

- :class:`InMemoryEpisodeSource`: episodes as dicts of arrays (tests, small experiments);
- :class:`HDF5EpisodeSource`: a thin adapter over :class:`r2s2r_recorder.dataset.EpisodeDataset`
  (the project's robomimic-style HDF5 datasets); images are read lazily per frame.

:class:`ChunkDataset` turns one source into training samples: the observation at frame ``t``
and the action chunk ``actions[t + 1 : t + 1 + H]`` (``actions[t]`` is the target in force at
frame ``t``, so chunk step ``k`` is the target ``k + 1`` control steps after the observation:
the time rule of :mod:`r2s2r_policy.spec`), padded past the episode end by repeating the last
action, with a mask that is False on padded steps. Images are decoded and resized once, when
the dataset is built, and held in memory (a few hundred MB at 64-96 px for thousands of
episodes), so a training step costs the model, not HDF5 decoding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from .models.palm_frame import PalmObjectFeatures
from .normalization import NormalizationStats, RunningStats
from .spec import (
    ACTION_MASK_KEY,
    ACTIONS_KEY,
    BELT_SPEED_KEY,
    JOINT_POS_KEY,
    OBJECT_TRACK_KEY,
    PALM_OBJECT_DIM,
    PALM_OBJECT_KEY,
    PolicySpec,
)

Sample = dict[str, np.ndarray]

LOW_DIM_KEYS: tuple[str, ...] = (JOINT_POS_KEY, BELT_SPEED_KEY, OBJECT_TRACK_KEY, ACTIONS_KEY)
"""Whole-episode arrays cached in memory."""


@dataclass(frozen=True)
class ObservationSemantics:
    """What made a source's belt-speed and tracked-object observations (episode metadata).

    Attributes:
        belt_speed_source: e.g. ``belt_speed`` (the estimator) or ``commanded``.
        object_track_source: e.g. ``object_tracker``; empty without a tracked-object input.
        object_track_fields: Columns of ``object_track``.

    """

    belt_speed_source: str = ""
    object_track_source: str = ""
    object_track_fields: tuple[str, ...] = ()


class MissingFeatureError(ValueError):
    """A dataset source lacks a feature the policy needs (or has it with the wrong shape).

    Attributes:
        problems: One line per problem, each naming the source and the feature.

    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n  - ".join(self.problems)
        super().__init__(f"dataset sources do not provide what the policy needs:\n  - {lines}")


@runtime_checkable
class EpisodeSource(Protocol):
    """Random access to the episodes of one dataset (real or one simulated configuration)."""

    @property
    def name(self) -> str:
        """Source name, e.g. 'real' or 'sim'."""
        ...

    @property
    def joint_names(self) -> list[str]:
        """Columns of ``joint_pos_rad``."""
        ...

    @property
    def action_names(self) -> list[str]:
        """Columns of ``actions``."""
        ...

    @property
    def control_rate_hz(self) -> float:
        """Frame rate of the episodes (Hz)."""
        ...

    def num_episodes(self) -> int:
        """Return the number of episodes."""
        ...

    def episode_length(self, episode_index: int) -> int:
        """Frames in one episode."""
        ...

    def frame_features(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Per-frame ``key → (shape, dtype)`` of every observation key and ``actions``."""
        ...

    def image(self, episode_index: int, frame_index: int, key: str) -> np.ndarray:
        """One uint8 ``(H, W, 3)`` RGB image."""
        ...

    def episode_images(self, episode_index: int, key: str) -> np.ndarray:
        """Every uint8 ``(T, H, W, 3)`` RGB image of one camera of one episode."""
        ...

    def low_dim(self, episode_index: int) -> dict[str, np.ndarray]:
        """Return the whole-episode low-dimensional arrays.

        ``joint_pos_rad (T, J)``, ``belt_speed_mps (T, 1)``, ``actions (T, A)`` and, when
        present, ``object_track (T, F)``.
        """
        ...

    def semantics(self) -> ObservationSemantics:
        """Return what made the belt-speed and tracked-object observations."""
        ...


class InMemoryEpisodeSource:
    """Episodes held in memory as dicts of arrays.

    Each episode dict holds ``(T, ...)`` arrays: camera keys (uint8 ``(T, H, W, 3)``),
    ``joint_pos_rad`` ``(T, J)``, ``belt_speed_mps`` ``(T,)`` or ``(T, 1)``, ``actions``
    ``(T, A)``. A missing key is allowed here and reported by :func:`check_source_features`.

    Args:
        name: Source name.
        episodes: The episodes.
        joint_names: Names of the joint position columns.
        action_names: Names of the action columns.
        control_rate_hz: Frame rate of the episodes.
        semantics: What made belt speed and the tracked object (default: the belt_speed
            estimator; tracked-object source ``object_tracker`` when episodes have one and
            ``object_track_fields`` are given).

    Raises:
        ValueError: If there are no episodes or arrays of one episode differ in length.

    """

    def __init__(
        self,
        name: str,
        episodes: Sequence[Mapping[str, np.ndarray]],
        joint_names: Sequence[str],
        action_names: Sequence[str],
        control_rate_hz: float = 10.0,
        semantics: ObservationSemantics | None = None,
    ) -> None:
        if not episodes:
            raise ValueError(f"source {name!r}: expected at least one episode, got 0")
        if control_rate_hz <= 0:
            raise ValueError(f"control_rate_hz = {control_rate_hz}: expected > 0")
        self._name = name
        self._control_rate_hz = float(control_rate_hz)
        self._joint_names = list(joint_names)
        self._action_names = list(action_names)
        self._semantics = semantics or ObservationSemantics(belt_speed_source="belt_speed")
        self._episodes: list[dict[str, np.ndarray]] = []
        for index, episode in enumerate(episodes):
            lengths = {key: int(np.shape(value)[0]) for key, value in episode.items()}
            if len(set(lengths.values())) != 1:
                raise ValueError(
                    f"source {name!r} episode {index}: arrays differ in length: {lengths}"
                )
            arrays = {key: np.asarray(value) for key, value in episode.items()}
            if BELT_SPEED_KEY in arrays:
                arrays[BELT_SPEED_KEY] = arrays[BELT_SPEED_KEY].reshape(-1, 1).astype(np.float32)
            self._episodes.append(arrays)

    @property
    def name(self) -> str:
        """Source name."""
        return self._name

    @property
    def joint_names(self) -> list[str]:
        """Columns of ``joint_pos_rad``."""
        return list(self._joint_names)

    @property
    def control_rate_hz(self) -> float:
        """Frame rate of the episodes (Hz)."""
        return self._control_rate_hz

    @property
    def action_names(self) -> list[str]:
        """Columns of ``actions``."""
        return list(self._action_names)

    def num_episodes(self) -> int:
        """Return the number of episodes."""
        return len(self._episodes)

    def episode_length(self, episode_index: int) -> int:
        """Frames in one episode."""
        return int(next(iter(self._episodes[episode_index].values())).shape[0])

    def frame_features(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Per-frame shape and dtype of every key (from the first episode)."""
        return {
            key: (tuple(int(d) for d in value.shape[1:]), str(value.dtype))
            for key, value in self._episodes[0].items()
        }

    def image(self, episode_index: int, frame_index: int, key: str) -> np.ndarray:
        """One uint8 ``(H, W, 3)`` image."""
        return self._episodes[episode_index][key][frame_index]

    def episode_images(self, episode_index: int, key: str) -> np.ndarray:
        """Every image of one camera of one episode."""
        return self._episodes[episode_index][key]

    def low_dim(self, episode_index: int) -> dict[str, np.ndarray]:
        """Whole-episode low-dimensional arrays (those present)."""
        episode = self._episodes[episode_index]
        return {key: episode[key].astype(np.float32) for key in LOW_DIM_KEYS if key in episode}

    def semantics(self) -> ObservationSemantics:
        """Return what made belt speed and the tracked object (as given at construction)."""
        return self._semantics


class HDF5EpisodeSource:
    """Adapter from an r2s2r HDF5 dataset (file or shard directory) to :class:`EpisodeSource`.

    Joint and action names come from the first episode's metadata; every episode must agree.
    Episodes whose ``metadata.outcome`` is not in ``outcomes`` are left out (behaviour cloning
    on failed demonstrations teaches the failure: a timed-out demo is mostly flailing); the
    kept reader indices are :attr:`episode_indices`, the left-out count per outcome
    :attr:`excluded_outcomes`.

    Args:
        path: Dataset file or directory.
        name: Source name (defaults to the first episode's ``metadata.source``).
        outcomes: Outcomes to keep (e.g. ``["success"]``); None keeps every episode.

    Raises:
        r2s2r_recorder.dataset.DatasetError: If the dataset cannot be read.
        ValueError: If it holds no episodes (none with a kept outcome) or episodes disagree on
            joint/action names.

    """

    def __init__(
        self, path: str | Path, name: str | None = None, outcomes: Sequence[str] | None = None
    ) -> None:
        from r2s2r_recorder.dataset import EpisodeDataset, dataset_info

        self.path = Path(path)
        self._reader = EpisodeDataset(self.path)
        if len(self._reader) == 0:
            raise ValueError(f"{self.path}: dataset holds no episodes")
        first = self._reader.metadata(0)
        kept: list[int] = []
        excluded: dict[str, int] = {}
        for index in range(len(self._reader)):
            meta = self._reader.metadata(index)
            if meta.joint_names != first.joint_names or meta.action_names != first.action_names:
                raise ValueError(
                    f"{self.path}: episode {index} joint/action names differ from episode 0 "
                    f"({meta.joint_names}/{meta.action_names} vs "
                    f"{first.joint_names}/{first.action_names})"
                )
            if outcomes is None or meta.outcome in outcomes:
                kept.append(index)
            else:
                excluded[meta.outcome] = excluded.get(meta.outcome, 0) + 1
        if not kept:
            raise ValueError(
                f"{self.path}: no episode has an outcome in {sorted(outcomes or [])} "
                f"({len(self._reader)} episodes: {excluded}); record successful episodes or "
                "widen the kept outcomes (TrainConfig.episode_outcomes)"
            )
        self.episode_indices: list[int] = kept
        self.excluded_outcomes: dict[str, int] = excluded
        semantics = {self._semantics_of(self._reader.metadata(i)) for i in kept}
        if len(semantics) > 1:
            raise ValueError(
                f"{self.path}: episodes disagree on what made their observations "
                f"({sorted(map(str, semantics))}); a dataset must be made one way"
            )
        self._semantics = semantics.pop()
        self._name = name if name is not None else str(first.source)
        self._control_rate_hz = float(first.control_rate_hz)
        self._joint_names = list(first.joint_names)
        self._action_names = list(first.action_names)
        info = dataset_info(self.path)
        self._features = {
            (key[len("obs/") :] if key.startswith("obs/") else key): value
            for key, value in info.features.items()
        }

    @staticmethod
    def _semantics_of(meta: Any) -> ObservationSemantics:
        return ObservationSemantics(
            belt_speed_source=meta.belt_speed_source,
            object_track_source=meta.object_track_source,
            object_track_fields=tuple(meta.object_track_fields),
        )

    def semantics(self) -> ObservationSemantics:
        """Return what made belt speed and the tracked object (episode metadata)."""
        return self._semantics

    @property
    def name(self) -> str:
        """Source name."""
        return self._name

    @property
    def joint_names(self) -> list[str]:
        """Columns of ``joint_pos_rad``."""
        return list(self._joint_names)

    @property
    def control_rate_hz(self) -> float:
        """Frame rate of the episodes (Hz)."""
        return self._control_rate_hz

    @property
    def action_names(self) -> list[str]:
        """Columns of ``actions``."""
        return list(self._action_names)

    def num_episodes(self) -> int:
        """Return the number of kept episodes."""
        return len(self.episode_indices)

    def episode_length(self, episode_index: int) -> int:
        """Frames in one (kept) episode."""
        return self._reader.episode_length(self.episode_indices[episode_index])

    def frame_features(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Per-frame shape and dtype of every key (``obs/`` prefix dropped)."""
        return dict(self._features)

    def _group(self, episode_index: int) -> Any:
        # The reader exposes whole episodes or whole frames (all keys); one array of one
        # episode is read through its HDF5 group so chunking does not decode images.
        return self._reader._group(self.episode_indices[episode_index])

    def image(self, episode_index: int, frame_index: int, key: str) -> np.ndarray:
        """One uint8 ``(H, W, 3)`` image (reads one compressed chunk)."""
        return np.asarray(self._group(episode_index)["obs"][key][frame_index])

    def episode_images(self, episode_index: int, key: str) -> np.ndarray:
        """Every image of one camera of one episode (one read of the whole dataset)."""
        return np.asarray(self._group(episode_index)["obs"][key])

    def low_dim(self, episode_index: int) -> dict[str, np.ndarray]:
        """Whole-episode low-dimensional arrays (those present)."""
        group = self._group(episode_index)
        out: dict[str, np.ndarray] = {}
        for key in (JOINT_POS_KEY, BELT_SPEED_KEY, OBJECT_TRACK_KEY):
            if key in group["obs"]:
                out[key] = np.asarray(group["obs"][key], dtype=np.float32)
        if ACTIONS_KEY in group:
            out[ACTIONS_KEY] = np.asarray(group[ACTIONS_KEY], dtype=np.float32)
        if BELT_SPEED_KEY in out:
            out[BELT_SPEED_KEY] = out[BELT_SPEED_KEY].reshape(-1, 1)
        return out

    def close(self) -> None:
        """Close the dataset files."""
        self._reader.close()


class EpisodeSubset:
    """Some episodes of a source (e.g. the held-out validation episodes), as a source.

    Args:
        source: The full source.
        indices: Episode indices of ``source`` to expose, in order.
        name: Name of the subset (default: the source's).

    Raises:
        ValueError: If ``indices`` is empty or out of range.

    """

    def __init__(
        self, source: EpisodeSource, indices: Sequence[int], name: str | None = None
    ) -> None:
        if not indices:
            raise ValueError(f"source {source.name!r}: an episode subset needs episodes")
        bad = [i for i in indices if not 0 <= i < source.num_episodes()]
        if bad:
            raise ValueError(
                f"source {source.name!r}: episode indices {bad} out of 0..{source.num_episodes()}"
            )
        self._source = source
        self.indices = list(indices)
        self._name = name or source.name

    @property
    def name(self) -> str:
        """Subset name."""
        return self._name

    @property
    def joint_names(self) -> list[str]:
        """Columns of ``joint_pos_rad``."""
        return self._source.joint_names

    @property
    def action_names(self) -> list[str]:
        """Columns of ``actions``."""
        return self._source.action_names

    @property
    def control_rate_hz(self) -> float:
        """Frame rate of the episodes (Hz)."""
        return self._source.control_rate_hz

    def num_episodes(self) -> int:
        """Return the number of episodes in the subset."""
        return len(self.indices)

    def episode_length(self, episode_index: int) -> int:
        """Frames in one episode of the subset."""
        return self._source.episode_length(self.indices[episode_index])

    def frame_features(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Per-frame shape and dtype of every key."""
        return self._source.frame_features()

    def image(self, episode_index: int, frame_index: int, key: str) -> np.ndarray:
        """One image."""
        return self._source.image(self.indices[episode_index], frame_index, key)

    def episode_images(self, episode_index: int, key: str) -> np.ndarray:
        """Every image of one camera of one episode."""
        return self._source.episode_images(self.indices[episode_index], key)

    def low_dim(self, episode_index: int) -> dict[str, np.ndarray]:
        """Whole-episode low-dimensional arrays."""
        return self._source.low_dim(self.indices[episode_index])

    def semantics(self) -> ObservationSemantics:
        """Return what made belt speed and the tracked object (the source's)."""
        return self._source.semantics()


def split_episodes(count: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Split ``count`` episodes into (training, held-out) indices, deterministically.

    ``fraction`` of the episodes (at least one when ``fraction > 0`` and there are two or more)
    are held out, drawn with ``seed``.
    """
    if fraction <= 0.0 or count < 2:
        return list(range(count)), []
    held = max(1, round(fraction * count))
    held = min(held, count - 1)
    rng = np.random.default_rng([seed, 0x5EED])
    chosen = set(rng.choice(count, size=held, replace=False).tolist())
    train = [i for i in range(count) if i not in chosen]
    return train, sorted(chosen)


def check_source_features(sources: Sequence[EpisodeSource], spec: PolicySpec) -> None:
    """Check that every source provides every feature ``spec`` needs, before training.

    Checks camera keys (uint8 ``(H, W, 3)``; any size, resized to the spec), joint positions and
    actions (names and widths equal to the spec's), belt speed when used, non-empty episodes,
    one control rate across sources (a chunk step must mean the same time everywhere), and
    that belt speed and the tracked object are made the way the spec says in every source
    (a real source with tracker output and a simulated one with simulator truth would teach the
    policy two meanings of one input).

    Raises:
        MissingFeatureError: Listing every problem of every source.

    """
    problems: list[str] = []
    rates = {source.name: source.control_rate_hz for source in sources}
    if len(set(rates.values())) > 1:
        problems.append(f"sources differ in control_rate_hz {rates}: chunks would mix time steps")
    for source in sources:
        features = source.frame_features()
        prefix = f"source {source.name!r}"
        if source.num_episodes() == 0:
            problems.append(f"{prefix}: no episodes")
        for key in spec.image_keys:
            if key not in features:
                problems.append(f"{prefix}: missing camera {key!r} (has {sorted(features)})")
                continue
            shape, dtype = features[key]
            if len(shape) != 3 or shape[2] != 3 or dtype != "uint8":
                problems.append(
                    f"{prefix}: {key!r} is {dtype} {shape}, expected uint8 (H, W, 3) RGB"
                )
        required = [(JOINT_POS_KEY, len(spec.joint_names)), (ACTIONS_KEY, spec.action_dim)]
        if spec.use_belt_speed:
            required.append((BELT_SPEED_KEY, 1))
        for key, width in required:
            if key not in features:
                problems.append(f"{prefix}: missing {key!r} (has {sorted(features)})")
                continue
            shape, _ = features[key]
            if int(np.prod(shape)) != width:
                problems.append(f"{prefix}: {key!r} has per-frame shape {shape}, expected {width}")
        semantics = source.semantics()
        if spec.use_belt_speed and semantics.belt_speed_source != spec.belt_speed_source:
            problems.append(
                f"{prefix}: belt speed made by {semantics.belt_speed_source or 'unknown'!r}, "
                f"policy expects {spec.belt_speed_source!r} (regenerate or re-convert the data "
                "with the cell's belt_speed estimator)"
            )
        if spec.uses_object_track:
            if OBJECT_TRACK_KEY not in features:
                problems.append(
                    f"{prefix}: missing {OBJECT_TRACK_KEY!r} (has {sorted(features)}); data made "
                    "before tracked-object observations must be regenerated or re-converted"
                )
            elif list(semantics.object_track_fields) != list(spec.object_track_fields):
                problems.append(
                    f"{prefix}: object_track columns {list(semantics.object_track_fields)} != "
                    f"policy {spec.object_track_fields}"
                )
            if semantics.object_track_source != spec.object_track_source:
                problems.append(
                    f"{prefix}: object_track made by {semantics.object_track_source or 'unknown'!r}"
                    f", policy expects {spec.object_track_source!r}"
                )
        if source.joint_names != spec.joint_names:
            problems.append(
                f"{prefix}: joint_names {source.joint_names} != policy {spec.joint_names}"
            )
        if source.action_names != spec.action_names:
            problems.append(
                f"{prefix}: action_names {source.action_names} != policy {spec.action_names}"
            )
    if problems:
        raise MissingFeatureError(problems)


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
        source: The episode source (checked with :func:`check_source_features` first).
        spec: Policy spec (image keys and sizes, chunk length, inputs).
        cache_images: Hold every resized image in memory.

    Raises:
        MissingFeatureError: If the source lacks a feature.

    """

    def __init__(self, source: EpisodeSource, spec: PolicySpec, cache_images: bool = True) -> None:
        check_source_features([source], spec)
        self.source = source
        self.spec = spec
        self._low_dim = [source.low_dim(e) for e in range(source.num_episodes())]
        lengths = np.array([len(d[ACTIONS_KEY]) for d in self._low_dim], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._action_in_state = [spec.joint_names.index(n) for n in spec.action_names]
        self._images: dict[str, np.ndarray] | None = None
        self._flat: dict[str, np.ndarray] | None = None
        if cache_images:
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
        """Memory held by the image cache."""
        return sum(a.nbytes for a in (self._images or {}).values())

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
