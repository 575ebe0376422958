"""Reading episode bags: their metadata, what is readable, and the rosbags reader.

Complete bags open with the rosbags reader (:func:`open_reader`, :func:`opened_bag`); any bag,
finished or not, is scanned by :func:`inspect_bag` (the layout is
:mod:`r2s2r_recorder.bag_format`; an unfinished bag is rewritten by
:mod:`r2s2r_recorder.bag_repair`).

Integrity: :func:`open_reader` checks every CRC-32 of the MCAP file first
(:func:`~r2s2r_recorder.mcap_scan.verify_mcap`: chunks, data section, summary, attachments) and
refuses a damaged bag with :class:`BagDamagedError`, one line naming the bag and the damaged
record's offset; :func:`inspect_bag` lists every damaged record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from r2s2r_common.errors import BadInputError
from rosbags.rosbag2 import Reader
from rosbags.rosbag2.errors import ReaderError

from .bag_format import CUSTOM_DATA_KEY, INCOMPLETE_MARKER, SIDECAR_NAME, EpisodeInfo
from .mcap_scan import McapScan, iter_mcap, verify_mcap


class BagReadError(BadInputError, RuntimeError):
    """A bag cannot be read; the message names the file and, when known, the byte offset."""


class BagDamagedError(BagReadError):
    """A finished bag's bytes are damaged: a CRC fails, or the file is cut or malformed.

    The message names the bag, the MCAP file and the damaged record's offset.
    """


def read_episode_info(bag_dir: str | Path) -> EpisodeInfo | None:
    """Episode metadata of a bag: ``custom_data`` in metadata.yaml, else the sidecar.

    Returns:
        None when neither holds episode metadata (e.g. a bag recorded by ``ros2 bag``).

    """
    root = Path(bag_dir)
    meta_path = root / "metadata.yaml"
    if meta_path.is_file():
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
        custom = (meta.get("rosbag2_bagfile_information") or {}).get("custom_data") or {}
        if CUSTOM_DATA_KEY in custom:
            return EpisodeInfo.model_validate_json(custom[CUSTOM_DATA_KEY])
    sidecar = root / SIDECAR_NAME
    if sidecar.is_file():
        data = yaml.safe_load(sidecar.read_text(encoding="utf-8")) or {}
        if "episode" in data:
            return EpisodeInfo.model_validate(data["episode"])
    return None


@dataclass
class BagInspection:
    """What :func:`inspect_bag` found.

    Attributes:
        bag_dir: The bag directory.
        complete: Closed cleanly (metadata.yaml present, no INCOMPLETE marker, footer read).
        topic_counts: Readable messages per topic.
        readable_messages: Total readable messages.
        valid_until_offset: Bytes of the MCAP file that could be read.
        file_size: Size of the MCAP file.
        error: Why reading stopped early (file and offset), or None.
        damage: Every record whose CRC fails (one phrase each, with its offset).
        checksums: What the CRCs covered and whether they matched, in words.

    """

    bag_dir: Path
    complete: bool
    topic_counts: dict[str, int]
    readable_messages: int
    valid_until_offset: int
    file_size: int
    error: str | None
    damage: list[str] = field(default_factory=list)
    checksums: str = ""

    @property
    def state(self) -> str:
        """``complete`` (closed, every CRC matches), ``DAMAGED`` or ``UNFINISHED``.

        A bag is damaged when a CRC fails, or when it was closed (metadata.yaml, no
        ``INCOMPLETE`` marker) and yet its file stops short or holds a malformed record;
        unfinished when the recorder stopped before closing it.
        """
        if self.damage:
            return "DAMAGED"
        if self.complete:
            return "complete"
        closed = (self.bag_dir / "metadata.yaml").is_file() and not (
            self.bag_dir / INCOMPLETE_MARKER
        ).exists()
        malformed = self.error is not None and "bad record" in self.error
        return "DAMAGED" if closed or malformed else "UNFINISHED"

    @property
    def usable(self) -> bool:
        """Whether the bag is complete and intact (what the conversion accepts)."""
        return self.state == "complete"


def mcap_file_of(bag_dir: str | Path) -> Path:
    """Return the ``.mcap`` storage file of a bag directory.

    Raises:
        BagReadError: If there is none.

    """
    root = Path(bag_dir)
    if root.is_file():
        hint = f"; give its folder {root.parent}" if root.suffix == ".mcap" else ""
        raise BagReadError(
            f"{root}: a file, expected an episode bag directory (episode_NNNNNN/ holding the "
            f".mcap file and metadata.yaml){hint}"
        )
    if not root.is_dir():
        raise BagReadError(f"{root}: no such bag directory")
    files = sorted(root.glob("*.mcap"))
    if not files:
        raise BagReadError(
            f"{root}: no .mcap file in the bag directory (expected an episode bag recorded by "
            "the recorder: episode_NNNNNN/episode_NNNNNN.mcap)"
        )
    return files[0]


def inspect_bag(bag_dir: str | Path) -> BagInspection:
    """Scan a bag (complete or not) and report what is readable.

    Raises:
        BagReadError: If the directory holds no MCAP file.

    """
    root = Path(bag_dir)
    mcap = mcap_file_of(root)
    scan = McapScan(path=mcap)
    counts: dict[str, int] = {}
    for channel, _stamp, _data in iter_mcap(mcap, scan, past_damage=True):
        counts[channel.topic] = counts.get(channel.topic, 0) + 1
    complete = (
        scan.complete
        and (root / "metadata.yaml").is_file()
        and not (root / INCOMPLETE_MARKER).exists()
    )
    return BagInspection(
        bag_dir=root,
        complete=complete,
        topic_counts=counts,
        readable_messages=scan.messages,
        valid_until_offset=scan.valid_until_offset,
        file_size=scan.file_size,
        error=scan.error,
        damage=[d.format() for d in scan.damage],
        checksums=scan.checksums(),
    )


def check_bag_integrity(bag_dir: str | Path) -> McapScan:
    """Check every CRC of a finished bag's MCAP file, and that the file is whole.

    Returns:
        The scan (``chunks_checked``, ``sections_checked``: what was verified; a bag written
        without CRCs passes with nothing checked).

    Raises:
        BagDamagedError: One line naming the bag, the MCAP file and the first damaged record
            (offset, length, CRCs), how many more there are, and what to run.
        BagReadError: The directory holds no MCAP file.

    """
    root = Path(bag_dir)
    scan = verify_mcap(mcap_file_of(root))
    if scan.damage:
        more = len(scan.damage) - 1
        also = f" (and {more} more damaged record{'s' if more > 1 else ''})" if more else ""
        raise BagDamagedError(
            f"{root}: damaged bag: {scan.path}: {scan.damage[0].format()}{also}; "
            f"`r2s2r bag inspect {root}` lists the damage, `r2s2r bag repair {root}` keeps "
            "the intact part before it"
        )
    if scan.error or not scan.complete:
        raise BagDamagedError(
            f"{root}: damaged bag: {scan.error or f'{scan.path}: no footer'}; the bag was "
            f"closed but its file is not whole; `r2s2r bag repair {root}` keeps the readable part"
        )
    return scan


def open_reader(bag_dir: str | Path, *, verify: bool = True) -> Reader:
    """Open a finalised bag with the rosbags reader, turning failures into named errors.

    Args:
        bag_dir: The bag directory.
        verify: Check the MCAP file's CRCs first (:func:`check_bag_integrity`); a bag whose
            checksums fail is never read.

    Raises:
        BagDamagedError: A CRC fails, or the file is cut or malformed (bag, file, offset).
        BagReadError: Naming the file and, via a scan, the offset where the data stops.

    """
    root = Path(bag_dir)
    if (root / INCOMPLETE_MARKER).exists():
        raise BagReadError(
            f"{root}: episode bag is marked {INCOMPLETE_MARKER} (recorder stopped before "
            f"closing it); run repair_bag() to recover the readable part"
        )
    if verify:
        check_bag_integrity(root)
    reader = Reader(root)
    try:
        reader.open()
    except (ReaderError, OSError, KeyError, ValueError) as error:
        raise BagReadError(describe_read_failure(root, error)) from None
    return reader


def describe_read_failure(root: Path, error: BaseException) -> str:
    """Combine a reader error with the byte offset where a scan of the MCAP file stops.

    Args:
        root: Bag directory.
        error: The reader's exception.

    Returns:
        One line naming the bag, the error, and the file and offset.

    """
    detail = f"{root}: cannot read bag: {error}"
    try:
        mcap = mcap_file_of(root)
    except BagReadError:
        return detail
    scan = McapScan(path=mcap)
    for _ in iter_mcap(mcap, scan):
        pass
    if scan.error:
        return f"{detail}; {scan.error}"
    return f"{detail}; {mcap}: readable up to offset {scan.valid_until_offset} of {scan.file_size}"


@contextmanager
def opened_bag(bag_dir: str | Path) -> Iterator[Reader]:
    """Context manager around :func:`open_reader` that closes the reader.

    Raises:
        BagReadError: See :func:`open_reader`.

    """
    reader = open_reader(bag_dir)
    try:
        yield reader
    finally:
        reader.close()
