"""Disk space: free bytes of a folder, a full disk recognised, and the one-line error.

ENOSPC reaches Python in two shapes: an ``OSError`` with ``errno == 28`` (``open``, ``write``,
``os.replace``...) and h5py's wrapping of the HDF5 error stack, an ``OSError`` (or
``RuntimeError``) without an errno whose text carries ``errno = 28`` or ``No space left on
device``. :func:`is_disk_full` knows both.

ROS-free and dependency-free, so every package can use it.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from r2s2r_common.errors import RunFailedError

_DISK_FULL_TEXTS = ("no space left on device", "errno = 28", "disk quota exceeded")


class DiskSpaceError(RunFailedError):
    """The disk is full, or too full for what a command is about to write (exit code 1).

    Its message is one line naming the folder, the space it has and the space needed.
    """


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is a full disk (ENOSPC/EDQUOT)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiskSpaceError):
            return True
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(current).lower() for text in _DISK_FULL_TEXTS):
            return True
        current = current.__cause__ or current.__context__
    return False


def existing_parent(path: str | Path) -> Path:
    """``path`` or its nearest existing ancestor (whose file system a new file would use)."""
    current = Path(path).absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def free_bytes(path: str | Path) -> int:
    """Bytes an unprivileged writer can still use on the file system of ``path``."""
    return int(shutil.disk_usage(existing_parent(path)).free)


def size_text(size_bytes: float) -> str:
    """``512 B``, ``3.4 MB``, ``1.2 GB`` (powers of 1000, as ``df -H``)."""
    value = float(size_bytes)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1000.0:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000.0
    return f"{value:.1f} TB"


def disk_full_message(folder: str | Path, needed_bytes: float | None = None) -> str:
    """One line: the folder, what it has free and (when known) what is needed."""
    try:
        free = size_text(free_bytes(folder))
    except OSError:
        free = "unknown"
    needed = f", about {size_text(needed_bytes)} needed" if needed_bytes else ""
    return f"{folder}: no space left on device ({free} free{needed})"
