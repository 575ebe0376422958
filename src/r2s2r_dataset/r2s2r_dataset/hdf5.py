"""Robomimic-style HDF5 episode storage: shard writer, lazy reader, shard merge, info.

Why HDF5 and not LeRobot v3: the maintained LeRobot v3 writer on PyPI (``lerobot-dataset``
0.4.4) does not pull torch, but ``pip install --dry-run`` shows it would downgrade numpy
(2.4 → 2.2), PyAV (18 → 15), setuptools and packaging, and install ``opencv-python-headless``
4.12 over our ``opencv-contrib-python-headless`` 5 (both own the ``cv2`` package directory,
so the second install silently breaks the first). It also brings pandas, pyarrow, ``datasets``
and the HF hub client. That does not install *cleanly* beside the workspace environment, so
we write robomimic-style HDF5 through h5py, which every robot-learning toolkit that reads
robomimic data can open. ``r2s2r dataset export-lerobot`` (:mod:`r2s2r_dataset.lerobot_export`)
writes a LeRobot v3.0 copy for those who load that format (pyarrow and PyAV only).

Layout of one file (a *shard*; every name is a constant of :mod:`.schema`)::

    /data                        attrs: r2s2r_schema_version, total (frames), env_args (JSON),
                                        r2s2r_manifest (JSON, files made from bags: group,
                                        episode_id, content_hash, source of each episode)
    /data/demo_<k>               attrs: num_samples, metadata (JSON of EpisodeMetadata),
                                        source, behavior_source, outcome, task, object_type
    /data/demo_<k>/obs/<key>     per-frame observations (see :mod:`.schema`)
    /data/demo_<k>/actions       float32 (T, J)
    /data/demo_<k>/timestamps_s  float64 (T,)

Images are stored chunked one frame per chunk and gzip-compressed, so random access to one
(episode, frame) reads one small chunk. Episodes are appended one at a time under a temporary
name and renamed to ``demo_<k>`` when complete, so a reader never sees half an episode. A
dataset is either one ``.hdf5`` file or a directory of shard files (``*.hdf5``), read in sorted
order. A whole file being written is ``.<name>.partial`` beside its name (:func:`partial_path`)
until it is complete; :func:`dataset_info` reports such a file, and episodes that disagree with
the file's manifest, in :attr:`DatasetInfo.problems`.
"""

from __future__ import annotations

import abc
import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import h5py
import numpy as np

from .schema import (
    ACTIONS_KEY,
    BELT_SPEED_KEY,
    CAMERA_KEYS,
    DATA_GROUP,
    ENV_ARGS_ATTR,
    EPISODE_PREFIX,
    JOINT_POS_KEY,
    MANIFEST_ATTR,
    METADATA_ATTR,
    NUM_SAMPLES_ATTR,
    OBJECT_POSE_KEY,
    OBJECT_POSE_VALID_KEY,
    OBS_GROUP,
    PARTIAL_SUFFIX,
    SCHEMA_VERSION,
    SCHEMA_VERSION_ATTR,
    SUMMARY_ATTRS,
    TIMESTAMPS_KEY,
    TOTAL_ATTR,
    Episode,
    EpisodeMetadata,
    episode_group,
    episode_group_index,
    obs_path,
)

_PARTIAL_PREFIX = "_partial_"


_REWRITE_HINT = (
    "the file is cut short or not an r2s2r dataset: write it again (bag2dataset, r2s2r "
    "generate or record-demos)"
)


class DatasetError(ValueError):
    """A dataset file or directory is missing, unreadable, or does not follow the schema."""


def partial_path(path: str | Path) -> Path:
    """Where ``path`` is written until it is complete: ``.<name>.partial`` beside it.

    The same folder, so the final rename is atomic; the name does not end in ``.hdf5``, so no
    reader of a shard directory takes it for a shard.
    """
    final = Path(path)
    return final.with_name(f".{final.name}{PARTIAL_SUFFIX}")


def _final_of_partial(path: Path) -> Path | None:
    """Return the final path of a ``.<name>.partial`` file, or None for another name."""
    name = path.name
    if name.startswith(".") and name.endswith(PARTIAL_SUFFIX):
        return path.with_name(name[1 : -len(PARTIAL_SUFFIX)])
    return None


def _partial_note(partial: Path) -> str:
    """Say what a leftover partial file holds, for a one-line message."""
    try:
        with h5py.File(partial, "r") as handle:
            held = len(episode_keys(handle[DATA_GROUP])) if DATA_GROUP in handle else 0
        return f"{partial} is an unfinished write ({held} episodes so far)"
    except (OSError, KeyError):
        return f"{partial} is an unfinished write (unreadable, or still being written)"


def _dataset_files(path: str | Path) -> list[Path]:
    """Return the shard files of a dataset path (a file or a directory of ``*.hdf5``)."""
    root = Path(path)
    if root.is_file():
        return [root]
    if root.is_dir():
        files = sorted(p for p in root.iterdir() if p.suffix in (".hdf5", ".h5") and p.is_file())
        if not files:
            raise DatasetError(f"{root}: directory holds no .hdf5 shard files")
        return files
    partial = partial_path(root)
    if partial.is_file():
        raise DatasetError(
            f"{root}: not written: {_partial_note(partial)}; rerun the same command "
            "(bag2dataset resumes it) or delete it"
        )
    raise DatasetError(f"{root}: dataset path not found (expected a .hdf5 file or a directory)")


@dataclass(frozen=True)
class ManifestEntry:
    """One episode of a file's manifest (:data:`~.schema.MANIFEST_ATTR`).

    Attributes:
        group: Its group in the file (``demo_<k>``).
        episode_id: The source's episode id (the bag's ``episode_id``).
        content_hash: ``sha256:<hex>`` of the source's bytes (the bag's files).
        source: Where it came from (the bag directory), for people to read.

    """

    group: str
    episode_id: str
    content_hash: str
    source: str = ""

    def as_dict(self) -> dict[str, str]:
        """JSON-friendly form."""
        return {
            "group": self.group,
            "episode_id": self.episode_id,
            "content_hash": self.content_hash,
            "source": self.source,
        }


def read_manifest(data: h5py.Group) -> list[ManifestEntry] | None:
    """Return the manifest of a file's ``data`` group, or None when the file has none.

    Raises:
        DatasetError: If the attribute is not a manifest.

    """
    if MANIFEST_ATTR not in data.attrs:
        return None
    try:
        raw = json.loads(data.attrs[MANIFEST_ATTR])
        return [ManifestEntry(**entry) for entry in raw]
    except (TypeError, ValueError) as error:
        raise DatasetError(
            f"{data.file.filename}: /{DATA_GROUP}.{MANIFEST_ATTR}: {error}"
        ) from None


def _write_manifest(data: h5py.Group, entries: Sequence[ManifestEntry]) -> None:
    data.attrs[MANIFEST_ATTR] = json.dumps([entry.as_dict() for entry in entries])


def manifest_problems(data: h5py.Group) -> list[str]:
    """How a file's episodes disagree with its manifest (empty: they agree, or no manifest)."""
    entries = read_manifest(data)
    if entries is None:
        return []
    problems = []
    listed = [entry.group for entry in entries]
    present = episode_keys(data)
    missing = [g for g in listed if g not in present]
    unlisted = [g for g in present if g not in listed]
    if missing:
        problems.append(f"manifest lists {len(listed)} episodes, {missing} are not in the file")
    if unlisted:
        problems.append(f"episodes {unlisted} are not in the manifest")
    hashes = Counter(entry.content_hash for entry in entries)
    twice = sorted(
        entry.episode_id
        for entry in entries
        if entry.content_hash and hashes[entry.content_hash] > 1
    )
    if twice:
        problems.append(f"episodes stored more than once (same content): {twice}")
    return problems


def episode_keys(data: h5py.Group) -> list[str]:
    """Return the complete episode group names of a file's ``data`` group in index order.

    ``demo_0``, ``demo_1``, ...: a half-written episode (a temporary name) is not one of them.
    """
    keys = [k for k in data if k.startswith(EPISODE_PREFIX)]
    return sorted(keys, key=episode_group_index)


class _ClosedOnExit(abc.ABC):
    """``with`` support for a class whose :meth:`close` releases its files: closed on exit."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the files (each class says which)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class EpisodeWriter(_ClosedOnExit):
    """Appends episodes one at a time to one HDF5 shard file.

    Use as a context manager. Each :meth:`append` writes one episode and flushes the file, so
    memory use is one episode, whatever the dataset size.

    Args:
        path: Shard file to create (or extend when ``append_existing``).
        compression_level: gzip level 0-9 for image datasets (0 disables compression).
        append_existing: Continue an existing shard, numbering after its last episode.

    Raises:
        DatasetError: If the file exists and ``append_existing`` is False.

    """

    def __init__(
        self, path: str | Path, compression_level: int = 1, append_existing: bool = False
    ) -> None:
        self.path = Path(path)
        if not 0 <= compression_level <= 9:
            raise DatasetError(f"compression_level = {compression_level}: expected 0..9")
        if self.path.exists() and not append_existing:
            raise DatasetError(
                f"{self.path}: exists already (not overwritten); append to it explicitly "
                "(bag2dataset --append) or write another file"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._compression_level = compression_level
        self._file = h5py.File(self.path, "a" if append_existing else "w-")
        data = self._file.require_group(DATA_GROUP)
        for key in list(data):
            if key.startswith(_PARTIAL_PREFIX):
                del data[key]
        data.attrs[SCHEMA_VERSION_ATTR] = SCHEMA_VERSION
        data.attrs.setdefault(ENV_ARGS_ATTR, json.dumps({"env_name": "r2s2r", "type": 0}))
        keys = episode_keys(data)
        self._next_index = episode_group_index(keys[-1]) + 1 if keys else 0
        self._total = int(sum(int(data[k].attrs[NUM_SAMPLES_ATTR]) for k in keys))
        data.attrs[TOTAL_ATTR] = self._total

    @property
    def num_episodes(self) -> int:
        """Episodes in the shard so far."""
        return len(episode_keys(self._file[DATA_GROUP]))

    def manifest(self) -> list[ManifestEntry]:
        """Return the shard's manifest (empty when it has none)."""
        return read_manifest(self._file[DATA_GROUP]) or []

    def set_manifest(self, entries: Sequence[ManifestEntry]) -> None:
        """Replace the shard's manifest (listing episodes written before manifests existed)."""
        _write_manifest(self._file[DATA_GROUP], entries)
        self._file.flush()

    def keep_listed(self) -> list[ManifestEntry]:
        """Make episodes and manifest agree after an interrupted write; return the manifest.

        An episode group and its manifest entry are written in one flush, but HDF5 has no
        transaction: after a kill either may be there without the other. A group without an
        entry (its source unknown) is deleted, an entry without a group dropped.
        """
        data = self._file[DATA_GROUP]
        present = set(episode_keys(data))
        entries = [entry for entry in self.manifest() if entry.group in present]
        listed = {entry.group for entry in entries}
        for key in sorted(present - listed):
            del data[key]
        _write_manifest(data, entries)
        keys = episode_keys(data)
        self._next_index = episode_group_index(keys[-1]) + 1 if keys else 0
        self._total = int(sum(int(data[k].attrs[NUM_SAMPLES_ATTR]) for k in keys))
        data.attrs[TOTAL_ATTR] = self._total
        self._file.flush()
        return entries

    def append(self, episode: Episode, content_hash: str | None = None, source: str = "") -> int:
        """Validate and write one episode; returns its index in this shard.

        Args:
            episode: The episode.
            content_hash: Hash of the episode's source (a bag's bytes); when given, the episode
                is listed in the file's manifest (:data:`~.schema.MANIFEST_ATTR`) with its
                ``metadata.provenance["episode_id"]``, in the same flush as the episode.
            source: Where the episode came from (the bag directory), for the manifest.

        Raises:
            ValueError: If the episode does not follow the schema.

        """
        episode.validate()
        data = self._file[DATA_GROUP]
        index = self._next_index
        partial = f"{_PARTIAL_PREFIX}{episode_group(index)}"
        group = data.create_group(partial)
        obs = group.create_group(OBS_GROUP)
        image_opts: dict[str, Any] = {}
        if self._compression_level > 0:
            image_opts = {"compression": "gzip", "compression_opts": self._compression_level}
        for key, images in episode.images.items():
            obs.create_dataset(key, data=images, chunks=(1, *images.shape[1:]), **image_opts)
        obs.create_dataset(JOINT_POS_KEY, data=episode.joint_pos_rad.astype(np.float32))
        obs.create_dataset(
            BELT_SPEED_KEY, data=episode.belt_speed_mps.reshape(-1, 1).astype(np.float32)
        )
        if episode.object_pose is not None and episode.object_pose_valid is not None:
            obs.create_dataset(OBJECT_POSE_KEY, data=episode.object_pose.astype(np.float32))
            obs.create_dataset(
                OBJECT_POSE_VALID_KEY, data=episode.object_pose_valid.astype(np.bool_)
            )
        for key, values in episode.extra_obs.items():
            obs.create_dataset(key, data=values)
        group.create_dataset(ACTIONS_KEY, data=episode.actions.astype(np.float32))
        group.create_dataset(TIMESTAMPS_KEY, data=episode.timestamps_s.astype(np.float64))
        meta = episode.metadata
        group.attrs[NUM_SAMPLES_ATTR] = episode.num_frames
        group.attrs[METADATA_ATTR] = meta.model_dump_json()
        for name in SUMMARY_ATTRS:
            group.attrs[name] = str(getattr(meta, name))
        if content_hash is not None:
            entries = read_manifest(data) or []
            entries.append(
                ManifestEntry(
                    group=episode_group(index),
                    episode_id=str(meta.provenance.get("episode_id", "")),
                    content_hash=content_hash,
                    source=source,
                )
            )
            _write_manifest(data, entries)
        data.move(partial, episode_group(index))
        self._total += episode.num_frames
        data.attrs[TOTAL_ATTR] = self._total
        self._file.flush()
        self._next_index += 1
        return index

    def close(self) -> None:
        """Flush and close the shard file."""
        if self._file.id.valid:
            self._file.close()


@dataclass(frozen=True)
class _EpisodeRef:
    file_index: int
    key: str
    num_frames: int


class EpisodeDataset(_ClosedOnExit):
    """Lazy reader: iterate episodes, or index (episode, frame) for training.

    Files are opened on first use and reopened after a ``fork`` (e.g. in DataLoader workers),
    so the object can be handed to worker processes. Only the index (episode → file, frame
    count) is held in memory.

    Args:
        path: A ``.hdf5`` file or a directory of shard files.

    Raises:
        DatasetError: If the path holds no readable dataset.

    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._files = _dataset_files(path)
        self._handles: dict[int, h5py.File] = {}
        self._pid = os.getpid()
        refs: list[_EpisodeRef] = []
        for file_index, file_path in enumerate(self._files):
            try:
                with h5py.File(file_path, "r") as handle:
                    if DATA_GROUP not in handle:
                        raise DatasetError(
                            f"{file_path}: no /{DATA_GROUP} group (not an r2s2r dataset)"
                        )
                    data = handle[DATA_GROUP]
                    for key in episode_keys(data):
                        refs.append(
                            _EpisodeRef(file_index, key, int(data[key].attrs[NUM_SAMPLES_ATTR]))
                        )
            except OSError as error:
                raise DatasetError(
                    f"{file_path}: cannot read HDF5 file: {error}; {_REWRITE_HINT}"
                ) from None
        self._refs = refs
        counts = np.array([r.num_frames for r in refs], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def __len__(self) -> int:
        return len(self._refs)

    @property
    def num_frames(self) -> int:
        """Total frames over all episodes."""
        return int(self._starts[-1])

    def episode_length(self, episode_index: int) -> int:
        """Frames in one episode."""
        return self._ref(episode_index).num_frames

    def _ref(self, episode_index: int) -> _EpisodeRef:
        if not 0 <= episode_index < len(self._refs):
            raise IndexError(f"episode_index = {episode_index}: expected 0..{len(self._refs) - 1}")
        return self._refs[episode_index]

    def _group(self, episode_index: int) -> h5py.Group:
        ref = self._ref(episode_index)
        if os.getpid() != self._pid:
            # h5py handles must not cross a fork; drop the parent's and reopen.
            self._handles = {}
            self._pid = os.getpid()
        handle = self._handles.get(ref.file_index)
        if handle is None:
            handle = h5py.File(self._files[ref.file_index], "r")
            self._handles[ref.file_index] = handle
        return handle[DATA_GROUP][ref.key]

    def where(self, episode_index: int) -> str:
        """Name one episode for a message: ``<file> episode demo_<k>``."""
        ref = self._ref(episode_index)
        return f"{self._files[ref.file_index]} episode {ref.key}"

    def metadata(self, episode_index: int) -> EpisodeMetadata:
        """Metadata of one episode."""
        return EpisodeMetadata.model_validate_json(self._group(episode_index).attrs[METADATA_ATTR])

    def locate(self, global_frame: int) -> tuple[int, int]:
        """Map a frame index over the whole dataset to ``(episode_index, frame_index)``."""
        if not 0 <= global_frame < self.num_frames:
            raise IndexError(f"global_frame = {global_frame}: expected 0..{self.num_frames - 1}")
        episode = int(np.searchsorted(self._starts, global_frame, side="right") - 1)
        return episode, int(global_frame - self._starts[episode])

    def frame(self, episode_index: int, frame_index: int) -> dict[str, np.ndarray]:
        """Read one frame: ``obs/<key>`` arrays, ``actions`` and ``timestamp_s``.

        Raises:
            IndexError: If either index is out of range.

        """
        group = self._group(episode_index)
        length = self._ref(episode_index).num_frames
        if not 0 <= frame_index < length:
            raise IndexError(f"frame_index = {frame_index}: expected 0..{length - 1}")
        out: dict[str, np.ndarray] = {
            obs_path(key): np.asarray(group[OBS_GROUP][key][frame_index])
            for key in group[OBS_GROUP]
        }
        out[ACTIONS_KEY] = np.asarray(group[ACTIONS_KEY][frame_index])
        out["timestamp_s"] = np.asarray(group[TIMESTAMPS_KEY][frame_index])
        return out

    def observation(self, episode_index: int, key: str) -> h5py.Dataset | None:
        """One episode's ``obs/<key>`` array as stored (read lazily), or None when absent."""
        obs = self._group(episode_index)[OBS_GROUP]
        return obs.get(key)

    def episode(self, episode_index: int) -> Episode:
        """Load one whole episode into memory."""
        group = self._group(episode_index)
        obs = group[OBS_GROUP]
        images = {k: np.asarray(obs[k]) for k in CAMERA_KEYS if k in obs}
        known = {*CAMERA_KEYS, JOINT_POS_KEY, BELT_SPEED_KEY, OBJECT_POSE_KEY}
        known.add(OBJECT_POSE_VALID_KEY)
        return Episode(
            metadata=self.metadata(episode_index),
            timestamps_s=np.asarray(group[TIMESTAMPS_KEY]),
            images=images,
            joint_pos_rad=np.asarray(obs[JOINT_POS_KEY]),
            belt_speed_mps=np.asarray(obs[BELT_SPEED_KEY]).reshape(-1),
            actions=np.asarray(group[ACTIONS_KEY]),
            object_pose=np.asarray(obs[OBJECT_POSE_KEY]) if OBJECT_POSE_KEY in obs else None,
            object_pose_valid=(
                np.asarray(obs[OBJECT_POSE_VALID_KEY]) if OBJECT_POSE_VALID_KEY in obs else None
            ),
            extra_obs={k: np.asarray(obs[k]) for k in obs if k not in known},
        )

    def __iter__(self) -> Iterator[Episode]:
        for index in range(len(self)):
            yield self.episode(index)

    def close(self) -> None:
        """Close every open file handle."""
        for handle in self._handles.values():
            if handle.id.valid:
                handle.close()
        self._handles = {}


def _features_of(group: h5py.Group) -> dict[str, tuple[tuple[int, ...], str]]:
    """Per-frame shape and dtype of every array of one episode group."""
    features: dict[str, tuple[tuple[int, ...], str]] = {}
    for key in group[OBS_GROUP]:
        dset = group[OBS_GROUP][key]
        features[obs_path(key)] = (tuple(int(d) for d in dset.shape[1:]), str(dset.dtype))
    for key in (ACTIONS_KEY, TIMESTAMPS_KEY):
        dset = group[key]
        features[key] = (tuple(int(d) for d in dset.shape[1:]), str(dset.dtype))
    return features


def _check_episode(group: h5py.Group) -> None:
    """Read the last frame of every array, which fails on a truncated or corrupt file."""
    length = int(group.attrs[NUM_SAMPLES_ATTR])
    EpisodeMetadata.model_validate_json(group.attrs[METADATA_ATTR])
    obs = group[OBS_GROUP]
    arrays = [obs[k] for k in obs] + [group[ACTIONS_KEY], group[TIMESTAMPS_KEY]]
    for dset in arrays:
        if dset.shape[0] != length:
            raise DatasetError(
                f"{dset.name}: {dset.shape[0]} frames, {NUM_SAMPLES_ATTR} says {length}"
            )
        _ = dset[length - 1]
        _ = dset[0]


@dataclass
class MergeReport:
    """Outcome of :func:`merge_shards`.

    Attributes:
        output: The merged file.
        episodes: Episodes written.
        frames: Frames written.
        merged_shards: Shards whose episodes were copied.
        excluded: ``(shard path, reason)`` for each shard left out.

    """

    output: Path
    episodes: int = 0
    frames: int = 0
    merged_shards: list[Path] = field(default_factory=list)
    excluded: list[tuple[Path, str]] = field(default_factory=list)


def merge_shards(shards: Sequence[str | Path], output: str | Path) -> MergeReport:
    """Merge shard files into one dataset file, excluding corrupt or inconsistent shards.

    A shard is excluded whole (and reported with the reason) when it cannot be opened, an
    episode in it fails to read, or its features (keys, per-frame shapes, dtypes) differ from
    the first good shard's. Copying is done by HDF5 group copy, chunk by chunk, never
    holding an episode in Python memory.

    Args:
        shards: Shard files, merged in the order given.
        output: File to create.

    Returns:
        A :class:`MergeReport`.

    Raises:
        DatasetError: If ``output`` exists already.

    """
    out_path = Path(output)
    if out_path.exists():
        raise DatasetError(f"{out_path}: exists already, not overwriting")
    report = MergeReport(output=out_path)
    reference: dict[str, tuple[tuple[int, ...], str]] | None = None
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(out_path, "w-") as out:
        out_data = out.create_group(DATA_GROUP)
        out_data.attrs[SCHEMA_VERSION_ATTR] = SCHEMA_VERSION
        out_data.attrs[ENV_ARGS_ATTR] = json.dumps({"env_name": "r2s2r", "type": 0})
        for shard in shards:
            shard_path = Path(shard)
            try:
                with h5py.File(shard_path, "r") as src:
                    data = src[DATA_GROUP]
                    keys = episode_keys(data)
                    for key in keys:
                        _check_episode(data[key])
                        features = _features_of(data[key])
                        if reference is None:
                            reference = features
                        elif features != reference:
                            diff = sorted(set(features.items()) ^ set(reference.items()))
                            raise DatasetError(f"{key}: features differ from first shard: {diff}")
                    for key in keys:
                        name = episode_group(report.episodes)
                        src.copy(data[key], out_data, name=name)
                        report.episodes += 1
                        report.frames += int(data[key].attrs[NUM_SAMPLES_ATTR])
                report.merged_shards.append(shard_path)
            except (OSError, KeyError, ValueError, RuntimeError) as error:
                report.excluded.append((shard_path, f"{type(error).__name__}: {error}"))
        out_data.attrs[TOTAL_ATTR] = report.frames
    return report


@dataclass
class DatasetInfo:
    """Summary of a dataset.

    Attributes:
        path: Dataset path.
        episodes: Number of episodes.
        frames: Number of frames.
        features: ``key → (per-frame shape, dtype)``.
        per_source: Episode counts keyed ``"<source>/<behavior_source>"``.
        per_outcome: Episode counts keyed by outcome.
        files: Shard files read.
        problems: Why the dataset is incomplete (a leftover partial file, a manifest that
            does not match the episodes); empty when it is not.

    """

    path: Path
    episodes: int
    frames: int
    features: dict[str, tuple[tuple[int, ...], str]]
    per_source: dict[str, int]
    per_outcome: dict[str, int]
    files: list[Path]
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "path": str(self.path),
            "episodes": self.episodes,
            "frames": self.frames,
            "features": {k: {"shape": list(s), "dtype": d} for k, (s, d) in self.features.items()},
            "per_source": self.per_source,
            "per_outcome": self.per_outcome,
            "files": [str(f) for f in self.files],
            "problems": list(self.problems),
        }


def dataset_info(path: str | Path) -> DatasetInfo:
    """Summarise a dataset from attributes only (no image data is read).

    Raises:
        DatasetError: If the path holds no readable dataset.

    """
    files = _dataset_files(path)
    problems = _leftover_partials(Path(path))
    episodes = 0
    frames = 0
    features: dict[str, tuple[tuple[int, ...], str]] = {}
    per_source: Counter[str] = Counter()
    per_outcome: Counter[str] = Counter()
    for file_path in files:
        try:
            with h5py.File(file_path, "r") as handle:
                data = handle[DATA_GROUP]
                problems += [f"{file_path}: {p}" for p in manifest_problems(data)]
                for key in episode_keys(data):
                    group = data[key]
                    episodes += 1
                    frames += int(group.attrs[NUM_SAMPLES_ATTR])
                    per_source[f"{group.attrs['source']}/{group.attrs['behavior_source']}"] += 1
                    per_outcome[str(group.attrs["outcome"])] += 1
                    if not features:
                        features = _features_of(group)
        except (OSError, KeyError) as error:
            raise DatasetError(
                f"{file_path}: cannot read dataset: {error}; {_REWRITE_HINT}"
            ) from None
    return DatasetInfo(
        path=Path(path),
        episodes=episodes,
        frames=frames,
        features=features,
        per_source=dict(sorted(per_source.items())),
        per_outcome=dict(sorted(per_outcome.items())),
        files=files,
        problems=problems,
    )


def _leftover_partials(root: Path) -> list[str]:
    """Lines for the partial files of a dataset path: the path itself, beside it, inside it."""
    if _final_of_partial(root) is not None and root.is_file():
        return [f"{_partial_note(root)}; rerun the command that wrote {_final_of_partial(root)}"]
    if root.is_dir():
        return [
            f"{_partial_note(p)}; rerun the command that wrote {_final_of_partial(p)} or delete it"
            for p in sorted(root.iterdir())
            if _final_of_partial(p) is not None and p.is_file()
        ]
    beside = partial_path(root)
    if beside.is_file():
        return [
            f"{_partial_note(beside)}: an append to {root} was interrupted ({root} holds what it "
            "held before); rerun the same bag2dataset --append to finish it, or delete it"
        ]
    return []
