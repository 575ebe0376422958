"""What the experiment's stages hand on: each product typed as what it is, or why it is missing.

A product is a file (or shard folder) and the *fingerprint* the stages that read it put in
their cache key (:mod:`r2s2r.pipeline.cache`): the producing stage's inputs hash, the content
hash of a small file, or the size and modification time of a file given from outside.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Product:
    """A stage's output file and its fingerprint."""

    path: str
    fingerprint: str


@dataclass(frozen=True)
class DatasetProduct(Product):
    """Episodes (HDF5 file or shard folder): the real demonstrations or a simulated set."""


@dataclass(frozen=True)
class ArtifactProduct(Product):
    """The grounding artifact (``r2s2r ground``); its fingerprint is its content hash."""


@dataclass(frozen=True)
class Checkpoint(Product):
    """A trained policy's checkpoint."""


@dataclass(frozen=True)
class Unavailable:
    """An input that could not be produced, and why (nothing is substituted for it)."""

    reason: str


def given_file(path: str | Path, what: str, file_only: bool = False) -> Path | Unavailable:
    """Return a file (or folder) given from outside, resolved, or why it cannot be used."""
    resolved = Path(path).resolve()
    found = resolved.is_file() if file_only else resolved.exists()
    return resolved if found else Unavailable(f"{what} {resolved}: not found")
