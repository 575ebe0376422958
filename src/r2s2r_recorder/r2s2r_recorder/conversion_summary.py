"""What a bag → dataset conversion reports: why a bag is skipped or fails, and the run's summary.

A bag either converts whole, is skipped with one of :data:`SKIP_REASONS`
(:class:`EpisodeSkippedError`), or fails with one of :data:`READER_ERRORS`; the
:class:`ConversionSummary` of :func:`~r2s2r_recorder.bag_to_dataset.convert_bags` lists each.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rosbags.rosbag2.errors import ReaderError
from rosbags.serde import SerdeError
from rosbags.typesys import TypesysError

from r2s2r_dataset import DatasetError

SKIP_REASONS: tuple[str, ...] = (
    "missing_topic",
    "image_encoding",
    "non_monotonic",
    "no_outcome",
    "lost_outcome",
    "stale_stream",
    "too_short",
    "joint_mismatch",
    "non_finite",
)

READER_ERRORS: tuple[type[BaseException], ...] = (
    ReaderError,
    SerdeError,
    TypesysError,
    ValueError,
    LookupError,
    struct.error,
    EOFError,
    OSError,
    RuntimeError,  # lz4's decompression errors; BagReadError is one too
)
"""What reading one bag may raise on damaged bytes: caught per bag, named, the rest convert.

Broad on purpose (a damaged record reaches rosbags' parser, its CDR decoder or a
decompressor, each with errors of its own: rosbags' ``SerdeError`` is not a ``ValueError``),
but not everything: a bug of the converter (``TypeError``, ``AttributeError``) still stops
the run.
"""


class EpisodesPresentError(DatasetError):
    """``--append`` of bags whose episodes the output holds already (nothing is written)."""


class EpisodeSkippedError(Exception):
    """A bag is well-formed but unusable as an episode; ``reason`` is in SKIP_REASONS."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class ConversionSummary:
    """What happened to every bag.

    Attributes:
        converted: ``(bag, frames)`` for each converted bag.
        skipped: ``(bag, reason, detail)`` for each skipped bag.
        errors: ``(bag, message)`` for each unreadable bag.
        duplicates: ``(bag, first)`` for each bag with the content of a bag given before it
            (converted once, as ``first``).
        resumed: ``(bag, group)`` for each bag an interrupted run had converted already.
        notes: Other lines for the user (a partial file discarded, and why).
        output: The dataset file written.

    """

    output: Path
    converted: list[tuple[Path, int]] = field(default_factory=list)
    skipped: list[tuple[Path, str, str]] = field(default_factory=list)
    errors: list[tuple[Path, str]] = field(default_factory=list)
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)
    resumed: list[tuple[Path, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    written: bool = False

    @property
    def frames(self) -> int:
        """Frames written."""
        return sum(n for _, n in self.converted)

    @property
    def skip_counts(self) -> dict[str, int]:
        """Skipped bags per reason."""
        return dict(Counter(reason for _, reason, _ in self.skipped))

    def format(self) -> str:
        """Readable summary, one line per problem."""
        head = (
            f"bag2dataset → {self.output}: {len(self.converted)} converted ({self.frames} "
            f"frames), {len(self.skipped)} skipped {self.skip_counts}, {len(self.errors)} errors"
        )
        if self.resumed:
            head += f", {len(self.resumed)} kept from the interrupted run"
        if self.duplicates:
            head += f", {len(self.duplicates)} duplicates"
        lines = [head]
        lines += [f"  note    {note}" for note in self.notes]
        lines += [f"  kept    {bag}: already converted ({group})" for bag, group in self.resumed]
        lines += [
            f"  duplicate {bag}: same content as {first}, converted once"
            for bag, first in self.duplicates
        ]
        lines += [f"  skipped {bag}: {reason}: {detail}" for bag, reason, detail in self.skipped]
        lines += [f"  error   {bag}: {message}" for bag, message in self.errors]
        return "\n".join(lines)
