"""One way to write the policy package's ``.npz`` files: a JSON header and arrays, whole or not.

Inference traces, frame sets and latent indexes are each one ``.npz`` whose ``header`` entry is
a JSON object (format version, names, metadata) beside the arrays. :func:`write_npz` writes one
through a hidden partial file that is synced and renamed into place, so a crash leaves the old
file or none, never a half-written one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.files import move_into_place

HEADER = "header"
"""Name of the JSON header entry."""


def write_npz(
    path: str | Path,
    header: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    compressed: bool = False,
) -> Path:
    """Write ``header`` (as JSON) and ``arrays`` to ``path`` whole or not at all; ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    payload: dict[str, Any] = {HEADER: np.array(json.dumps(header)), **arrays}
    save = np.savez_compressed if compressed else np.savez
    try:
        with open(partial, "wb") as stream:
            save(stream, **payload)
        move_into_place(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
