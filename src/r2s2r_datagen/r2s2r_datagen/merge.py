"""Shard bookkeeping: which episodes the shards hold, and the per-configuration merge.

Episodes carry their job identity in ``metadata.provenance["job"]`` (configuration, episode
index, seed), so the shards can be checked against the ledger: a success whose shard is
unreadable is *lost* (re-run on resume), and an episode the ledger does not list as a success
(written by a worker killed before its report reached the ledger, or a duplicate) is left out
of the merged dataset.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import h5py
from r2s2r_common.files import move_into_place

from r2s2r_datagen.ledger import EpisodeKey
from r2s2r_dataset import (
    DATA_GROUP,
    EPISODE_PREFIX,
    METADATA_ATTR,
    NUM_SAMPLES_ATTR,
    TOTAL_ATTR,
    MergeReport,
    episode_group,
    episode_keys,
    merge_shards,
)


@dataclass
class ShardScan:
    """What the shards of a run hold.

    Attributes:
        present: Episode key → shard files holding it.
        unreadable: ``(shard, reason)`` for shards that cannot be opened.

    """

    present: dict[EpisodeKey, list[Path]] = field(default_factory=dict)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)


def _job_key(metadata_json: str) -> EpisodeKey | None:
    try:
        job = json.loads(metadata_json)["provenance"]["job"]
        return (str(job["configuration"]), int(job["episode_index"]))
    except (KeyError, TypeError, ValueError):
        return None


def shard_files(run_dir: str | Path, configuration: str | None = None) -> list[Path]:
    """Shard files of the run (of one configuration if given), sorted."""
    root = Path(run_dir) / "shards"
    pattern = f"{configuration}/shard_*.hdf5" if configuration else "*/shard_*.hdf5"
    return sorted(root.glob(pattern))


def scan_shards(run_dir: str | Path) -> ShardScan:
    """Read the episode keys of every shard (attributes only; no image data)."""
    scan = ShardScan()
    for path in shard_files(run_dir):
        try:
            with h5py.File(path, "r") as handle:
                data = handle[DATA_GROUP]
                for name in data:
                    if not name.startswith(EPISODE_PREFIX):
                        continue
                    key = _job_key(str(data[name].attrs[METADATA_ATTR]))
                    if key is not None:
                        scan.present.setdefault(key, []).append(path)
        except (OSError, KeyError, ValueError, RuntimeError) as error:
            scan.unreadable.append((path, f"{type(error).__name__}: {error}"))
    return scan


@dataclass
class ConfigurationMerge:
    """Outcome of merging one configuration's shards.

    Attributes:
        output: The merged dataset file.
        episodes: Episodes in it.
        frames: Frames in it.
        excluded_shards: ``(shard, reason)`` left out (corrupt or inconsistent).
        dropped: Episodes left out because the ledger does not list them as successes, or
            duplicates.
        missing: Ledger successes that are in no merged shard (lost).

    """

    output: Path
    episodes: int = 0
    frames: int = 0
    excluded_shards: list[tuple[Path, str]] = field(default_factory=list)
    dropped: list[EpisodeKey] = field(default_factory=list)
    missing: list[EpisodeKey] = field(default_factory=list)


def merge_configuration(
    run_dir: str | Path, configuration: str, successes: Collection[EpisodeKey]
) -> ConfigurationMerge:
    """Merge a configuration's shards into ``<run_dir>/datasets/<configuration>.hdf5``.

    Uses :func:`r2s2r_dataset.merge_shards` (corrupt shards are reported and
    excluded), then keeps exactly one copy of each ledger success, in episode-index order
    (whichever worker or session wrote it), numbering the kept episodes ``demo_0..``. The
    previous merged file is replaced atomically.
    """
    out_dir = Path(run_dir) / "datasets"
    output = out_dir / f"{configuration}.hdf5"
    tmp = out_dir / f".{configuration}.merging.hdf5"
    if tmp.exists():
        tmp.unlink()
    shards = shard_files(run_dir, configuration)
    result = ConfigurationMerge(output=output)
    wanted = {key for key in successes if key[0] == configuration}
    if not shards:
        result.missing = sorted(wanted)
        return result
    try:
        return _merge_into(tmp, output, shards, result, wanted, configuration)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk: no half-merged file is left
        raise


def _merge_into(
    tmp: Path,
    output: Path,
    shards: list[Path],
    result: ConfigurationMerge,
    wanted: set[EpisodeKey],
    configuration: str,
) -> ConfigurationMerge:
    report: MergeReport = merge_shards(shards, tmp)
    result.excluded_shards = list(report.excluded)
    seen: set[EpisodeKey] = set()
    with h5py.File(tmp, "a") as handle:
        data = handle[DATA_GROUP]
        names = episode_keys(data)
        kept: list[tuple[int, str]] = []
        for name in names:
            key = _job_key(str(data[name].attrs[METADATA_ATTR]))
            if key is None or key not in wanted or key in seen:
                result.dropped.append(key if key is not None else (configuration, -1))
                del data[name]
                continue
            seen.add(key)
            kept.append((key[1], name))
        # Episode-index order: which worker (or session, after a resume) wrote an episode must
        # not change the dataset, or a resumed or rescheduled run would train differently.
        kept = sorted(kept)
        # Renumber through temporary names so no target name collides with a source name.
        for index, (_, name) in enumerate(kept):
            data.move(name, f"_renumber_{index}")
        total = 0
        for index in range(len(kept)):
            data.move(f"_renumber_{index}", episode_group(index))
            total += int(data[episode_group(index)].attrs[NUM_SAMPLES_ATTR])
        data.attrs[TOTAL_ATTR] = total
        result.episodes, result.frames = len(kept), total
    move_into_place(tmp, output)
    result.missing = sorted(wanted - seen)
    return result
