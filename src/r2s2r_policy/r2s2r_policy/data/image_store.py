"""A pre-resized on-disk image store: training images memory-mapped, not held in RAM.

Issue 38's data path: at the paper's scale (≈ 1,600 episodes × ~120 frames × 2 cameras) the
in-memory image cache of :class:`~r2s2r_policy.data.chunks.ChunkDataset` would not fit the
machine. A store holds the same decoded, resized frames as that cache, one ``<camera>.npy`` per
camera (``(frames, H, W, 3)`` uint8, every episode end to end in source order), written once
and then memory-mapped read-only by every policy that trains on the same dataset at the same
size (and by every DDP rank): resident memory is what the operating system keeps of it, not
the dataset's size. The arrays are the cache's layout, so a :class:`ChunkDataset` given a store
draws the very samples it draws from its cache (bit-identical, tested).

``manifest.json`` says what the store was made from (the dataset's identity as the caller
states it, e.g. its content hash; the episode lengths; the cameras and their size; the store
format). :func:`open_image_store` refuses a store of another dataset, size or version (a stale
cache) in one line naming what differs. :func:`build_image_store` writes into a hidden partial
folder renamed into place: an interrupted build leaves no store to be mistaken for one, and
RAM during a build is bounded by one episode's frames.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..spec import PolicySpec
from .chunks import resize_image
from .sources import EpisodeSource

STORE_FORMAT = 1
"""Version of the store layout."""
MANIFEST = "manifest.json"


class ImageStoreError(ValueError):
    """A store is missing, incomplete, or was made from other data (stale)."""


def store_manifest(source: EpisodeSource, spec: PolicySpec, identity: str) -> dict[str, Any]:
    """Return what a store of ``source`` at ``spec``'s image size must record.

    Args:
        source: The dataset (its episodes in order).
        spec: The policy spec (cameras and their size).
        identity: What identifies the dataset's content (e.g. a content hash of its file).

    """
    return {
        "format": STORE_FORMAT,
        "identity": identity,
        "episode_lengths": [source.episode_length(e) for e in range(source.num_episodes())],
        "images": {i.key: [i.height_px, i.width_px] for i in spec.images},
    }


def build_image_store(
    source: EpisodeSource,
    spec: PolicySpec,
    directory: str | Path,
    identity: str,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Decode and resize every frame of ``source`` into a store at ``directory``.

    An existing store of the same manifest is kept as it is (returned at once); one of other
    data is replaced.

    Args:
        source: The dataset.
        spec: The policy spec (cameras and their size).
        directory: The store's folder.
        identity: What identifies the dataset's content (see :func:`store_manifest`).
        progress: Called with (episodes done, episodes) after each episode.

    Raises:
        ImageStoreError: The dataset has no frame.

    """
    target = Path(directory)
    manifest = store_manifest(source, spec, identity)
    try:
        open_image_store(target, manifest)
        return target
    except ImageStoreError:
        pass
    lengths = manifest["episode_lengths"]
    total = int(sum(lengths))
    if total == 0:
        raise ImageStoreError(f"image store {target}: the dataset {source.name!r} has no frame")
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        arrays = {
            image.key: np.lib.format.open_memmap(
                partial / f"{image.key}.npy",
                mode="w+",
                dtype=np.uint8,
                shape=(total, image.height_px, image.width_px, 3),
            )
            for image in spec.images
        }
        start = 0
        for episode, length in enumerate(lengths):
            for image in spec.images:
                frames = source.episode_images(episode, image.key)
                out = arrays[image.key]
                for index in range(length):
                    out[start + index] = resize_image(
                        frames[index], image.height_px, image.width_px
                    )
            start += length
            if progress is not None:
                progress(episode + 1, len(lengths))
        for array in arrays.values():
            array.flush()
        del arrays
        (partial / MANIFEST).write_text(json.dumps(manifest))
        if target.exists():
            shutil.rmtree(target)
        os.replace(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def open_image_store(directory: str | Path, expected: dict[str, Any]) -> dict[str, np.ndarray]:
    """Memory-map a store's images read-only, after checking it was made from ``expected``.

    Args:
        directory: The store's folder.
        expected: :func:`store_manifest` of the data and size wanted.

    Returns:
        Camera key → ``(frames, H, W, 3)`` uint8 read-only memory map.

    Raises:
        ImageStoreError: No store there, or one of other data (naming what differs).

    """
    folder = Path(directory)
    path = folder / MANIFEST
    if not path.is_file():
        raise ImageStoreError(f"image store {folder}: none there (no {MANIFEST})")
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ImageStoreError(f"image store {folder}: unreadable {MANIFEST} ({error})") from None
    differ = [key for key in expected if stored.get(key) != expected[key]]
    if differ:
        what = {
            "format": "store format",
            "identity": "dataset",
            "episode_lengths": "episodes",
            "images": "cameras or image size",
        }
        names = ", ".join(what.get(key, key) for key in differ)
        raise ImageStoreError(
            f"image store {folder} is stale: its {names} differ from the data asked for "
            "(rebuild it, or remove the folder)"
        )
    total = int(sum(expected["episode_lengths"]))
    arrays: dict[str, np.ndarray] = {}
    for key, (height, width) in expected["images"].items():
        array = np.load(folder / f"{key}.npy", mmap_mode="r")
        if array.shape != (total, height, width, 3) or array.dtype != np.uint8:
            raise ImageStoreError(
                f"image store {folder}: {key}.npy is {array.dtype} {array.shape}, expected "
                f"uint8 {(total, height, width, 3)}"
            )
        arrays[key] = array
    return arrays
