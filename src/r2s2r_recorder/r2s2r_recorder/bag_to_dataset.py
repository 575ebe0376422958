"""Bag → dataset conversion: episode bags into one dataset file, crash-safe and resumable.

Each bag is converted by :class:`~r2s2r_recorder.bag_converter.BagConverter` (the streams
synchronised onto the control rate; its module docstring says how).

Bad input never shortens the dataset silently: each bag either converts whole, or is skipped
with a reason counted in the :class:`ConversionSummary` (missing topic, image encoding,
non-monotonic stamps, no outcome, an outcome lost with the damaged part of a repaired bag,
stale stream, too short, a NaN or Inf value), or fails with a reason naming the bag (a
:class:`BagReadError` naming the file and offset, or any error of the reader: rosbags'
``SerdeError`` and ``ReaderError``, a decompression or decoding error); the other bags still
convert.

A conversion never leaves a file that reads as complete when it is not
(:func:`convert_bags`):

- the output is written as ``.<name>.partial`` beside it and renamed to its name when every
  bag has been tried, so a killed conversion leaves no ``<name>`` at all; ``dataset info``
  names the leftover partial file;
- the file's manifest lists every episode with its bag's episode id and content hash (sha256
  of the bag's files), written in the same flush as the episode. A rerun of the same command
  resumes the partial file: bags already in it are kept, not converted again;
- ``--append`` copies the existing file to the partial name, appends there and renames: the
  existing episodes are never at risk (HDF5 has no journal, so a write killed inside a file
  can damage what was already in it, and groups cannot be renamed atomically across a
  crash). The copy costs one read and write of the file; a killed append leaves the original
  untouched and its rerun resumes the copy. Bags whose content is in the file already are
  refused (:class:`EpisodesPresentError`, nothing written);
- a bag given twice (the same content, by the same or another path) is converted once; the
  repeat is reported as a duplicate, not an error: the dataset is what was asked for.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import h5py
from r2s2r_common.files import move_into_place

from r2s2r_dataset import (
    DATA_GROUP,
    METADATA_ATTR,
    DatasetError,
    EpisodeMetadata,
    EpisodeWriter,
    ManifestEntry,
    episode_keys,
    partial_path,
    read_manifest,
)

from .bag_converter import BagConverter
from .bag_format import SIDECAR_NAME
from .bag_reading import BagReadError
from .config import ConversionConfig
from .conversion_summary import (
    READER_ERRORS,
    ConversionSummary,
    EpisodeSkippedError,
    EpisodesPresentError,
)


def bag_content_hash(bag_dir: str | Path) -> str:
    """``sha256:<hex>`` of an episode bag's bytes: its ``.mcap`` files (sorted) and sidecar.

    The same recording copied elsewhere hashes the same; a repaired bag does not.

    Raises:
        OSError: If a file cannot be read.

    """
    root = Path(bag_dir)
    digest = hashlib.sha256()
    files = sorted(root.glob("*.mcap"))
    if (root / SIDECAR_NAME).is_file():
        files.append(root / SIDECAR_NAME)
    for path in files:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _entries_of(final: Path) -> list[ManifestEntry]:
    """Return what an existing dataset file holds: its manifest, or (older files) provenance.

    Raises:
        DatasetError: If the file is not a readable dataset.

    """
    try:
        with h5py.File(final, "r") as handle:
            data = handle[DATA_GROUP]
            entries = read_manifest(data)
            if entries is not None:
                return entries
            made = []
            for key in episode_keys(data):
                meta = EpisodeMetadata.model_validate_json(data[key].attrs[METADATA_ATTR])
                made.append(
                    ManifestEntry(
                        group=key,
                        episode_id=str(meta.provenance.get("episode_id", "")),
                        content_hash="",
                        source=str(meta.provenance.get("bag_path", "")),
                    )
                )
            return made
    except (OSError, KeyError) as error:
        raise DatasetError(
            f"{final}: cannot read the dataset to append to: {error}; the file is cut short "
            "or not an r2s2r dataset: write the episodes to another file"
        ) from None


def _refuse_present(final: Path, base: list[ManifestEntry], todo: list[tuple[Path, str]]) -> None:
    by_hash = {entry.content_hash: entry for entry in base if entry.content_hash}
    by_source = {entry.source: entry for entry in base if not entry.content_hash and entry.source}
    present = []
    for bag, digest in todo:
        entry = by_hash.get(digest) or by_source.get(str(bag.resolve()))
        if entry is not None:
            present.append(f"{bag} (episode {entry.episode_id}, {entry.group})")
    if present:
        shown = ", ".join(present[:5]) + (
            f" and {len(present) - 5} more" if len(present) > 5 else ""
        )
        raise EpisodesPresentError(
            f"--append: {final} holds {len(present)} of these episodes already: {shown}; "
            "nothing written: give only the bags not converted yet"
        )


def _open_partial(
    partial: Path,
    final: Path,
    base: list[ManifestEntry],
    wanted: set[str],
    compression_level: int,
    summary: ConversionSummary,
) -> EpisodeWriter:
    """Open the partial file: resume what an interrupted run left, or start it afresh.

    A leftover partial file is resumed when it is readable and holds the existing file's
    episodes (``--append``) and otherwise only bags of this run; else it is discarded (noted).
    """
    if partial.exists():
        reason = ""
        writer: EpisodeWriter | None = None
        try:
            writer = EpisodeWriter(partial, compression_level, append_existing=True)
            kept = writer.keep_listed()
            groups = {entry.group: entry for entry in kept}
            if any(groups.get(entry.group) != entry for entry in base):
                reason = f"it does not hold the {len(base)} episodes of {final}"
            elif any(e.content_hash not in wanted for e in kept if e not in base):
                reason = "it holds episodes of bags not given this time"
        except (OSError, KeyError, ValueError, RuntimeError) as error:
            # HDF5's own lock held by a live writer ("unable to lock file"); not any message
            # with "lock" in it: a truncated file's says "sblock" (a killed writer's leftover).
            if "unable to lock file" in str(error).lower():
                raise DatasetError(
                    f"{partial}: in use (another conversion is writing {final}?); wait for it"
                ) from None
            reason = f"unreadable ({type(error).__name__}: {error})"
        if not reason and writer is not None:
            return writer
        if writer is not None:
            writer.close()
        summary.notes.append(f"discarded {partial} left by an interrupted run: {reason}")
        partial.unlink()
    if final.exists():
        shutil.copyfile(final, partial)
        writer = EpisodeWriter(partial, compression_level, append_existing=True)
        if not writer.manifest() and base:
            writer.set_manifest(base)
        return writer
    return EpisodeWriter(partial, compression_level)


def convert_bags(
    bag_dirs: Sequence[str | Path],
    output: str | Path,
    config: ConversionConfig | None = None,
    append_existing: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ConversionSummary:
    """Convert episode bags into one dataset shard, bag by bag (one episode in memory).

    The shard is written as :func:`~r2s2r_dataset.partial_path` of ``output`` and renamed to
    ``output`` when every bag has been tried (the module docstring says why and how a rerun
    resumes it). No file is made when no episode is.

    Args:
        bag_dirs: Episode bag directories.
        output: Shard file (``.hdf5``) to write.
        config: Conversion settings; defaults when None.
        append_existing: Extend an existing shard instead of refusing to overwrite it.
        progress: Called with one line per converted bag.

    Returns:
        The :class:`ConversionSummary`; a bag that fails is recorded there and the rest
        still convert.

    Raises:
        DatasetError: If ``output`` exists and ``append_existing`` is False, or the partial
            file is in use.
        EpisodesPresentError: If ``append_existing`` and ``output`` holds some of the bags.

    """
    converter = BagConverter(config or ConversionConfig())
    final = Path(output)
    partial = partial_path(final)
    summary = ConversionSummary(output=final)
    todo: list[tuple[Path, str]] = []
    first_of: dict[str, Path] = {}
    for bag in bag_dirs:
        bag_path = Path(bag)
        try:
            digest = bag_content_hash(bag_path)
        except OSError as error:
            summary.errors.append((bag_path, f"cannot read: {error}"))
            continue
        if digest in first_of:
            summary.duplicates.append((bag_path, first_of[digest]))
            continue
        first_of[digest] = bag_path
        todo.append((bag_path, digest))
    base: list[ManifestEntry] = []
    if final.exists():
        if not append_existing:
            raise DatasetError(
                f"{final}: exists already (not overwritten); append to it explicitly "
                "(bag2dataset --append) or write another file"
            )
        base = _entries_of(final)
        _refuse_present(final, base, todo)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _open_partial(
        partial, final, base, set(first_of), converter.config.compression_level, summary
    ) as writer:
        done = {entry.content_hash: entry.group for entry in writer.manifest()}
        for bag_path, digest in todo:
            if digest in done:
                summary.resumed.append((bag_path, done[digest]))
                continue
            try:
                episode = converter.convert_bag(bag_path)
            except EpisodeSkippedError as skipped:
                summary.skipped.append((bag_path, skipped.reason, skipped.detail))
                continue
            except READER_ERRORS as error:
                message = str(error)
                if not isinstance(error, BagReadError):
                    message = f"cannot read: {type(error).__name__}: {error}"
                summary.errors.append((bag_path, message))
                continue
            index = writer.append(episode, content_hash=digest, source=str(bag_path.resolve()))
            summary.converted.append((bag_path, episode.num_frames))
            if progress is not None:
                progress(f"converted {bag_path} → demo_{index} ({episode.num_frames} frames)")
        added = writer.num_episodes - len(base)
    if added == 0:
        partial.unlink(missing_ok=True)  # no empty shard, no rewrite of an unchanged one
        summary.written = final.exists()
        return summary
    move_into_place(partial, final)  # synced, renamed (atomic), its folder synced
    summary.written = True
    return summary


def find_episode_bags(root: str | Path) -> list[Path]:
    """Episode bag directories under ``root`` (directories holding an ``.mcap`` file), sorted.

    ``root`` may be one bag, a folder of bags, or a bag's ``.mcap`` file (its folder is taken).
    """
    base = Path(root)
    if base.is_file():
        return [base.parent] if base.suffix == ".mcap" else []
    if any(base.glob("*.mcap")):
        return [base]
    return sorted(p for p in base.iterdir() if p.is_dir() and any(p.glob("*.mcap")))
