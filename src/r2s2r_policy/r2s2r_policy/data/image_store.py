"""A pre-resized on-disk image store: training images read from disk per batch, not held in RAM.

Issue 38's data path: at the paper's scale (≈ 1,600 episodes × ~120 frames × 2 cameras) the
in-memory image cache of :class:`~r2s2r_policy.data.chunks.ChunkDataset` would not fit the
machine. A store holds the same decoded, resized frames as that cache, one ``<camera>.npy`` per
camera (``(frames, H, W, 3)`` uint8, every episode end to end in source order), written once
and then read by every policy that trains on the same dataset at the same size (and by every
DDP rank and DataLoader worker). :class:`StoredFrames` reads a batch's frames with positioned
reads (``os.preadv`` into the batch's own array) instead of a memory map: a process holds the
batch it asked for and nothing else, so its resident memory is bounded by the batch size, not
the dataset (a memory map's touched pages count in RSS; the kernel's page cache does not). The
arrays are the cache's layout, so a :class:`ChunkDataset` given a store draws the very samples
it draws from its cache (bit-identical, tested).

``manifest.json`` says what the store was made from (the dataset's identity as the caller
states it, e.g. its content hash; the episode lengths; the cameras and their size; the store
format, and each camera's SHA-256 over its pixels). :func:`open_image_store` refuses a store of
another dataset, size or version (a stale cache) in one line naming what differs, and one whose
pixels are not the ones written (overwritten or damaged in place: same size, same header).
:func:`build_image_store` writes into a hidden partial
folder renamed into place: an interrupted build leaves no store to be mistaken for one, and
RAM during a build is bounded by one episode's frames. Stores are a cache: when the disk lacks
room for a new one, the least recently used complete stores beside it are removed first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.files import move_into_place

from ..spec import PolicySpec
from .chunks import resize_image
from .sources import EpisodeSource

STORE_FORMAT = 2
"""Version of the store layout (2: the manifest holds each camera file's pixel SHA-256)."""
CONTENT_KEY = "sha256"
"""Manifest key of each camera's SHA-256 over its pixel bytes, checked at every open."""
HASH_BLOCK_BYTES = 1 << 24
"""Bytes hashed per read when a store is verified."""
MANIFEST = "manifest.json"
DISK_MARGIN_BYTES = 1 << 30
"""Free disk left beside a new store (the datasets and checkpoints still need room)."""


class ImageStoreError(ValueError):
    """A store is missing, incomplete, was made from other data (stale), or has no room."""


class StoredFrames:
    """One camera's frames in a store, read with positioned reads (no memory map).

    Indexing (an integer, or an array of them, as an array is indexed) returns a new uint8
    array of those frames, read from the file with one ``os.preadv`` per frame straight into
    it. The file is opened once per process (a forked DataLoader worker or a DDP rank opens
    its own; pickling drops the descriptor), read-only, with random-access advice (no
    read-ahead of frames nobody asked for).

    Args:
        path: The camera's ``.npy`` file.
        offset: Where its data starts (after the ``.npy`` header).
        shape: ``(frames, H, W, 3)``.

    """

    dtype = np.dtype(np.uint8)

    def __init__(self, path: Path, offset: int, shape: tuple[int, ...]) -> None:
        self.path = path
        self.offset = offset
        self.shape = shape
        self._frame_bytes = int(np.prod(shape[1:]))
        self._fd: int | None = None
        self._pid = -1

    def __len__(self) -> int:
        return self.shape[0]

    def _descriptor(self) -> int:
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)
            self._pid = os.getpid()
        return self._fd

    def __getitem__(self, index: Any) -> np.ndarray:
        rows = np.asarray(index)
        if rows.dtype.kind not in "iu":
            raise IndexError(f"{self.path.name}: frames are indexed by integers, got {index!r}")
        single = rows.ndim == 0
        rows = rows.astype(np.int64).reshape(-1)
        count = self.shape[0]
        if rows.size and (rows.min() < -count or rows.max() >= count):
            bad = rows[(rows < -count) | (rows >= count)][0]
            raise IndexError(f"{self.path.name}: frame {int(bad)}: expected 0..{count - 1}")
        rows = np.where(rows < 0, rows + count, rows)
        out = np.empty((rows.size, *self.shape[1:]), dtype=np.uint8)
        flat = out.reshape(rows.size, self._frame_bytes)
        descriptor = self._descriptor()
        for row, frame in enumerate(rows.tolist()):
            position = self.offset + frame * self._frame_bytes
            if os.preadv(descriptor, [flat[row]], position) != self._frame_bytes:
                raise ImageStoreError(f"image store {self.path}: truncated at frame {frame}")
        return out[0] if single else out

    def close(self) -> None:
        """Close this process's descriptor (reopened on the next read)."""
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, _fd=None, _pid=-1)

    def __del__(self) -> None:
        self.close()


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


def store_bytes(manifest: dict[str, Any]) -> int:
    """Return the bytes of image data a store of ``manifest`` holds."""
    frames = int(sum(manifest["episode_lengths"]))
    return sum(frames * height * width * 3 for height, width in manifest["images"].values())


def build_image_store(
    source: EpisodeSource,
    spec: PolicySpec,
    directory: str | Path,
    identity: str,
    progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Decode and resize every frame of ``source`` into a store at ``directory``.

    An existing store of the same manifest is kept as it is (returned at once); one of other
    data is replaced (``log`` says why, in one line). When the disk lacks room for the new
    store (its bytes + :data:`DISK_MARGIN_BYTES`), the least recently opened complete stores
    in the same parent folder are removed first.

    Args:
        source: The dataset.
        spec: The policy spec (cameras and their size).
        directory: The store's folder.
        identity: What identifies the dataset's content (see :func:`store_manifest`).
        progress: Called with (episodes done, episodes) after each episode.
        log: Told about a stale store replaced and stores removed for room.

    Raises:
        ImageStoreError: The dataset has no frame, the disk has no room even after removing
            the other stores, or writing failed (the disk filled): nothing is left behind.

    """
    target = Path(directory)
    say = log or (lambda _: None)
    manifest = store_manifest(source, spec, identity)
    try:
        open_image_store(target, manifest)
        return target
    except ImageStoreError as error:
        if (target / MANIFEST).is_file():
            say(f"{str(error).partition(' (')[0]}: rebuilding it")
    lengths = manifest["episode_lengths"]
    total = int(sum(lengths))
    if total == 0:
        raise ImageStoreError(f"image store {target}: the dataset {source.name!r} has no frame")
    partial = target.with_name(f".{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _make_room(target, store_bytes(manifest), say)
    partial.mkdir(parents=True)
    try:
        # Plain sequential writes, not a memory map: written pages are the kernel's page
        # cache, never this process's resident memory (the build runs in the trainer).
        with contextlib.ExitStack() as stack:
            files = {
                image.key: stack.enter_context((partial / f"{image.key}.npy").open("wb"))
                for image in spec.images
            }
            digests = {image.key: hashlib.sha256() for image in spec.images}
            for image in spec.images:
                header = {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)),
                    "fortran_order": False,
                    "shape": (total, image.height_px, image.width_px, 3),
                }
                np.lib.format.write_array_header_1_0(files[image.key], header)
            for episode, length in enumerate(lengths):
                for image in spec.images:
                    frames = source.episode_images(episode, image.key)
                    size = (length, image.height_px, image.width_px, 3)
                    resized = np.empty(size, dtype=np.uint8)
                    for index in range(length):
                        resized[index] = resize_image(
                            frames[index], image.height_px, image.width_px
                        )
                    files[image.key].write(resized.data)
                    digests[image.key].update(resized.data)
                if progress is not None:
                    progress(episode + 1, len(lengths))
        written = {**manifest, CONTENT_KEY: {k: d.hexdigest() for k, d in digests.items()}}
        (partial / MANIFEST).write_text(json.dumps(written))
        move_into_place(partial, target)  # every file synced, then renamed
    except OSError as error:  # e.g. the disk filled: no store, one line
        shutil.rmtree(partial, ignore_errors=True)
        raise ImageStoreError(f"image store {target}: could not be built ({error})") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def _make_room(target: Path, needed: int, say: Callable[[str], None]) -> None:
    """Remove the least recently opened stores beside ``target`` until ``needed`` bytes fit."""
    wanted = needed + DISK_MARGIN_BYTES
    others = sorted(
        (p for p in target.parent.iterdir() if p != target and (p / MANIFEST).is_file()),
        key=lambda p: (p / MANIFEST).stat().st_mtime_ns,
    )
    while shutil.disk_usage(target.parent).free < wanted and others:
        oldest = others.pop(0)
        say(f"image store {oldest}: removed to make room for {target.name}")
        shutil.rmtree(oldest, ignore_errors=True)
    free = shutil.disk_usage(target.parent).free
    if free < wanted:
        raise ImageStoreError(
            f"image store {target}: needs {wanted / 2**30:.1f} GiB "
            f"({needed / 2**30:.1f} GiB of images + {DISK_MARGIN_BYTES / 2**30:.0f} GiB spare), "
            f"the disk has {free / 2**30:.1f} GiB free"
        )


def open_image_store(directory: str | Path, expected: dict[str, Any]) -> dict[str, StoredFrames]:
    """Open a store's images for positioned reads, after checking it was made from ``expected``.

    Args:
        directory: The store's folder.
        expected: :func:`store_manifest` of the data and size wanted.

    Returns:
        Camera key → its :class:`StoredFrames` (``(frames, H, W, 3)`` uint8).

    Raises:
        ImageStoreError: No store there, one of other data (naming what differs), or a
            damaged one.

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
    frames: dict[str, StoredFrames] = {}
    for key, (height, width) in expected["images"].items():
        shape = (total, height, width, 3)
        file = folder / f"{key}.npy"
        try:
            with file.open("rb") as handle:
                version = np.lib.format.read_magic(handle)
                header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                got_shape, fortran, dtype = header(handle)
                offset = handle.tell()
        except (OSError, ValueError) as error:
            raise ImageStoreError(f"image store {folder}: unreadable {key}.npy ({error})") from None
        size = file.stat().st_size
        if (
            got_shape != shape
            or dtype != np.uint8
            or fortran
            or size != offset + int(np.prod(shape))
        ):
            raise ImageStoreError(
                f"image store {folder}: {key}.npy is {dtype} {got_shape} ({size} bytes), "
                f"expected uint8 {shape}"
            )
        if _pixel_digest(file, offset) != stored.get(CONTENT_KEY, {}).get(key):
            raise ImageStoreError(
                f"image store {folder}: {key}.npy's pixels are not the ones it was built with "
                "(overwritten or damaged; rebuild it, or remove the folder)"
            )
        frames[key] = StoredFrames(file, offset, shape)
    # When it was last opened (the stores removed first for room are the oldest); a read-only
    # store is still read.
    with contextlib.suppress(OSError):
        os.utime(path)
    return frames


def _pixel_digest(file: Path, offset: int) -> str:
    """SHA-256 of a camera file's bytes after its header (its pixels)."""
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        handle.seek(offset)
        while block := handle.read(HASH_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()
