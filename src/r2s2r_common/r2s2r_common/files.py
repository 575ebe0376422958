"""Crash-safe files: written whole or not at all, on disk before they are named.

Every file a user keeps (a record, a manifest, a report, a configuration) is written here:
:func:`write_atomic` writes the bytes to a hidden temporary file beside the target, flushes
and fsyncs it, renames it over the target (``os.replace``, atomic on one filesystem) and
fsyncs the folder, so a crash, a kill or a full disk leaves the previous file (or none), never
a half-written one, and a machine that loses power after the call keeps the new one. A
failed write removes its temporary file. :func:`write_json_atomic` and
:func:`write_yaml_atomic` format first; :func:`move_into_place` is the last step alone, for a
file or folder that a library streamed under a temporary name of its own (HDF5 shards and
datasets, safetensors checkpoints, ``.npz`` traces).

``tests/test_house_rules.py`` fails when a module renames files itself (``os.replace``,
``os.rename``, ``Path.replace``/``Path.rename``) outside this module and its allow-list.

ROS-free; ``yaml`` is imported only by :func:`write_yaml_atomic`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any


def _temporary_name(target: Path) -> Path:
    """Return a hidden name beside ``target`` that no other writer uses (``.NAME.<hex>.tmp``)."""
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")


def _sync_folder(folder: Path) -> None:
    """Make the folder's entries (a rename into it) durable; a no-op where not supported."""
    with contextlib.suppress(OSError):
        handle = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def write_atomic(path: str | Path, data: bytes | str, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` whole or not at all, synced before it is named; ``path``.

    ``data`` is written to a temporary file in the same folder, which is flushed, fsynced and
    renamed over ``path``; then the folder is fsynced. On any failure the temporary file is
    removed and ``path`` is as it was. The folder must exist. The file gets the mode a plain
    ``open(path, "w")`` would give it (the umask applies).

    Args:
        path: The file to write (replaced if it exists).
        data: Bytes, or text encoded with ``encoding``.
        encoding: Encoding of text ``data``.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: The write failed (a missing folder, a full disk, no permission).

    """
    target = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    while True:
        temporary = _temporary_name(target)
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise
    _sync_folder(target.parent)
    return target


def write_json_atomic(path: str | Path, data: Any, indent: int | None = 2) -> Path:
    """Write ``data`` as JSON (``indent``, one final newline) with :func:`write_atomic`."""
    return write_atomic(path, json.dumps(data, indent=indent) + "\n")


def write_yaml_atomic(path: str | Path, data: Any, header: str = "") -> Path:
    """Write ``data`` as YAML (keys in their order) with :func:`write_atomic`.

    Args:
        path: The file to write.
        data: Plain data (dicts, lists, scalars).
        header: Text written before the YAML (``# ...`` comment lines, each ending in a
            newline).

    """
    import yaml

    return write_atomic(path, header + yaml.safe_dump(data, sort_keys=False))


def _sync_tree(path: Path) -> None:
    """Sync a file, or every file and folder under a folder, to disk."""
    if not path.is_dir():
        with path.open("rb") as stream:
            os.fsync(stream.fileno())
        return
    for folder, _, names in os.walk(path):
        for name in names:
            entry = Path(folder) / name
            if entry.is_file() and not entry.is_symlink():
                with entry.open("rb") as stream:
                    os.fsync(stream.fileno())
        _sync_folder(Path(folder))


def move_into_place(partial: str | Path, final: str | Path) -> Path:
    """Rename a finished ``partial`` file or folder to ``final``, synced first; ``final``.

    For what a library streamed under a temporary name (an HDF5 file, a checkpoint folder):
    the data is fsynced (a folder's every file), ``partial`` is renamed over ``final``
    (``os.replace``: a file is replaced, a folder only replaces an empty one) and the folder
    holding ``final`` is fsynced. ``partial`` must be on ``final``'s filesystem; removing it
    when the rename fails stays the caller's (it knows whether it is a file or a folder).
    """
    source, target = Path(partial), Path(final)
    _sync_tree(source)
    os.replace(source, target)
    _sync_folder(target.parent)
    return target
