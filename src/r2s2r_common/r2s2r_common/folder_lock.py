"""One process at a time in an output folder: an advisory lock held while the process runs.

Two ``r2s2r experiment`` (or two trainings) writing one folder would each do every stage and
overwrite each other's files. :func:`hold_folder_lock` takes an exclusive ``flock`` on a file
in the folder for the life of the process (the kernel frees it when the process dies, however it
dies: no stale lock to clear by hand) and refuses, naming the holder, when another process has
it. The lock file's descriptor is not inherited by child processes.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from r2s2r_common.errors import BadInputError

LOCK_NAME = ".r2s2r.lock"
"""The lock file in a locked folder (it holds the holder's pid and what it does)."""

_HELD: dict[Path, IO[str]] = {}
"""Locks this process holds, by folder (kept open: closing a descriptor frees its lock)."""


class FolderInUseError(BadInputError):
    """Another process is writing the folder (exit code 2: wait for it, or use another)."""


def hold_folder_lock(folder: str | Path, what: str) -> None:
    """Lock ``folder`` for this process until it exits (again in the same process: a no-op).

    Args:
        folder: The output folder (created when missing).
        what: What this process does there, shown to a second one (e.g. ``r2s2r experiment``).

    Raises:
        FolderInUseError: Another process holds the lock.

    """
    root = Path(folder).resolve()
    if root in _HELD:
        return
    root.mkdir(parents=True, exist_ok=True)
    handle = open(root / LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - held until exit
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise FolderInUseError(
            f"{root} is in use by {holder}; wait for it to finish (or stop it), or give "
            "another folder"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{what} (pid {os.getpid()})\n")
    handle.flush()
    _HELD[root] = handle
