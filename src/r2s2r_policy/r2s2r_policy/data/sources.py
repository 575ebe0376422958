"""Episode sources: random access to the episodes of one dataset.

An :class:`EpisodeSource` gives random access to ``(episode, frame)`` observations and the
whole low-dimensional arrays of an episode (joint positions, belt speed, actions: small, so
they are cached in memory for chunking and statistics). Two implementations:

- :class:`InMemoryEpisodeSource`: episodes as dicts of arrays (tests, small experiments);
- :class:`HDF5EpisodeSource`: a thin adapter over :class:`r2s2r_dataset.EpisodeDataset`
  (the project's robomimic-style HDF5 datasets); images are read lazily per frame.

:class:`EpisodeSubset` exposes some episodes of a source (:func:`split_episodes` draws the
held-out ones) and :func:`check_source_features` checks sources against a policy spec before
training. The training samples made from a source are :mod:`r2s2r_policy.data.chunks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from r2s2r_dataset import (
    ACTIONS_KEY,
    BELT_SPEED_KEY,
    JOINT_POS_KEY,
    OBJECT_TRACK_KEY,
    OBS_GROUP,
    DatasetError,
    non_finite_problem,
    obs_path,
)

from ..spec import PolicySpec

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


class _StoredSource:
    """What a source that holds its own episodes keeps as given: its name, columns and rate.

    The base of :class:`InMemoryEpisodeSource` and :class:`HDF5EpisodeSource` (the properties of
    :class:`EpisodeSource` that both answer from what they were given or read).
    """

    def __init__(
        self,
        name: str,
        joint_names: Sequence[str],
        action_names: Sequence[str],
        control_rate_hz: float,
    ) -> None:
        self._name = name
        self._control_rate_hz = float(control_rate_hz)
        self._joint_names = list(joint_names)
        self._action_names = list(action_names)

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


class InMemoryEpisodeSource(_StoredSource):
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
        super().__init__(name, joint_names, action_names, control_rate_hz)
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


class HDF5EpisodeSource(_StoredSource):
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
        r2s2r_dataset.DatasetError: If the dataset cannot be read.
        ValueError: If it holds no episodes (none with a kept outcome) or episodes disagree on
            joint/action names.

    """

    def __init__(
        self, path: str | Path, name: str | None = None, outcomes: Sequence[str] | None = None
    ) -> None:
        from r2s2r_dataset import EpisodeDataset, dataset_info

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
        super().__init__(
            name if name is not None else str(first.source),
            first.joint_names,
            first.action_names,
            first.control_rate_hz,
        )
        info = dataset_info(self.path)
        # dataset_info names an observation obs/<key> (obs_path); a source names it <key>.
        self._features = {
            key.removeprefix(obs_path("")): value for key, value in info.features.items()
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
        return np.asarray(self._group(episode_index)[OBS_GROUP][key][frame_index])

    def episode_images(self, episode_index: int, key: str) -> np.ndarray:
        """Every image of one camera of one episode (one read of the whole dataset)."""
        return np.asarray(self._group(episode_index)[OBS_GROUP][key])

    def low_dim(self, episode_index: int) -> dict[str, np.ndarray]:
        """Whole-episode low-dimensional arrays (those present).

        Raises:
            r2s2r_dataset.DatasetError: If a value is NaN or Inf (naming the file,
                the episode and the field).

        """
        group = self._group(episode_index)
        out: dict[str, np.ndarray] = {}
        for key in (JOINT_POS_KEY, BELT_SPEED_KEY, OBJECT_TRACK_KEY):
            if key in group[OBS_GROUP]:
                out[key] = np.asarray(group[OBS_GROUP][key], dtype=np.float32)
        if ACTIONS_KEY in group:
            out[ACTIONS_KEY] = np.asarray(group[ACTIONS_KEY], dtype=np.float32)
        if BELT_SPEED_KEY in out:
            out[BELT_SPEED_KEY] = out[BELT_SPEED_KEY].reshape(-1, 1)
        for key, values in out.items():
            problem = non_finite_problem(values)
            if problem is not None:
                field = key if key == ACTIONS_KEY else obs_path(key)
                where = self._reader.where(self.episode_indices[episode_index])
                raise DatasetError(f"{where}: {field}: {problem}")
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
