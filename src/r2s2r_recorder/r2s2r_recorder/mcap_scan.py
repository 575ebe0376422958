"""Sequential MCAP scanner that reads what is readable from an unfinished or damaged file.

The rosbags reader needs the MCAP footer and summary, which a recorder killed mid-episode
never wrote. This scanner walks the records from the start, decodes every complete chunk,
and stops at the first incomplete or malformed record, reporting its byte offset.

It also checks every CRC-32 the file holds (a stored CRC of 0 means "not computed"): each
chunk's ``uncompressed_crc`` over its decompressed records, the data-section CRC in the
DataEnd record (every byte from the file's magic up to DataEnd), the summary CRC in the
footer and each attachment's CRC. A failed check is a :class:`McapDamage` naming the record,
its offset and its length; a chunk that fails is never decoded (its messages are not
yielded). :func:`verify_mcap` runs the checks alone, without decoding any message.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

MCAP_MAGIC = b"\x89MCAP0\r\n"
_OP_SCHEMA = 0x03
_OP_CHANNEL = 0x04
_OP_MESSAGE = 0x05
_OP_CHUNK = 0x06
_OP_ATTACHMENT = 0x09
_OP_FOOTER = 0x02
_OP_DATA_END = 0x0F


class McapFormatError(ValueError):
    """An MCAP record is malformed; the message names the file and byte offset."""


@dataclass(frozen=True)
class McapDamage:
    """A record whose stored CRC-32 does not match its bytes.

    Attributes:
        what: ``chunk``, ``data section``, ``summary`` or ``attachment``.
        offset: File offset of the record (of the section's first byte for a section).
        length: Bytes covered by the CRC's record or section.
        stored: The CRC the file holds.
        computed: The CRC of the bytes as read.
        detail: What the damaged part held (a chunk's time range), or ''.

    """

    what: str
    offset: int
    length: int
    stored: int
    computed: int
    detail: str = ""

    def format(self) -> str:
        """One phrase: which record, where, and the two CRCs."""
        detail = f", {self.detail}" if self.detail else ""
        where = (
            f"bytes {self.offset}..{self.offset + self.length}"
            if self.what in ("data section", "summary")
            else f"offset {self.offset} ({self.length} bytes{detail})"
        )
        return (
            f"{self.what} at {where} fails its CRC (stored 0x{self.stored:08x}, "
            f"computed 0x{self.computed:08x})"
        )


@dataclass(frozen=True)
class McapSchema:
    """Schema record: message type name, encoding (``ros2msg``) and definition text."""

    id: int
    name: str
    encoding: str
    data: str


@dataclass(frozen=True)
class McapChannel:
    """Channel record: topic, schema id, and metadata (``offered_qos_profiles``)."""

    id: int
    schema_id: int
    topic: str
    message_encoding: str
    metadata: dict[str, str]


@dataclass
class McapScan:
    """Result of a scan.

    Attributes:
        path: The file scanned.
        schemas: Schema id → schema.
        channels: Channel id → channel.
        messages: Number of messages yielded.
        valid_until_offset: Byte offset up to which the file was read successfully.
        file_size: Size of the file in bytes.
        complete: True when the footer was reached (the file was closed properly).
        error: Why the scan stopped early, naming the offset; None when complete.
        damage: Every record whose CRC fails, in file order.
        chunks: Chunks met.
        chunks_checked: Chunks whose CRC was stored (and so checked).
        sections_checked: CRCs checked besides the chunks' (``data section``, ``summary``,
            ``attachment``).
        start_ns: Log time of the first chunk's first message (damage is placed from it).

    """

    path: Path
    schemas: dict[int, McapSchema] = field(default_factory=dict)
    channels: dict[int, McapChannel] = field(default_factory=dict)
    messages: int = 0
    valid_until_offset: int = 0
    file_size: int = 0
    complete: bool = False
    error: str | None = None
    damage: list[McapDamage] = field(default_factory=list)
    chunks: int = 0
    chunks_checked: int = 0
    sections_checked: list[str] = field(default_factory=list)
    start_ns: int | None = None

    @property
    def damaged(self) -> bool:
        """Whether any CRC failed."""
        return bool(self.damage)

    def checksums(self) -> str:
        """Say what the CRCs covered and whether they matched (for ``bag inspect``)."""
        if not self.chunks_checked and not self.sections_checked:
            return "none stored (written without checksums: nothing verified)"
        parts = [f"{self.chunks_checked}/{self.chunks} chunks", *self.sections_checked]
        verdict = f"{len(self.damage)} FAILED" if self.damage else "all match"
        return f"checked {', '.join(parts)}: {verdict}"


def _string(buf: bytes | memoryview, pos: int) -> tuple[str, int]:
    (size,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    if pos + size > len(buf):
        raise McapFormatError("string runs past its record")
    return bytes(buf[pos : pos + size]).decode("utf-8"), pos + size


def _parse_inner(
    buf: bytes | memoryview, scan: McapScan, base_offset: int
) -> Iterator[tuple[McapChannel, int, bytes]]:
    """Parse schema, channel and message records from ``buf`` (file or chunk content)."""
    pos = 0
    while pos < len(buf):
        if pos + 9 > len(buf):
            raise McapFormatError(f"record header cut at offset {base_offset + pos}")
        opcode = buf[pos]
        (length,) = struct.unpack_from("<Q", buf, pos + 1)
        body_start = pos + 9
        body_end = body_start + length
        if body_end > len(buf):
            raise McapFormatError(f"record 0x{opcode:02x} cut at offset {base_offset + pos}")
        body = buf[body_start:body_end]
        _handle_record(opcode, body, scan)
        if opcode == _OP_MESSAGE:
            channel_id, _seq, log_time, _pub = struct.unpack_from("<HIQQ", body, 0)
            channel = scan.channels.get(channel_id)
            if channel is None:
                raise McapFormatError(
                    f"message for unknown channel {channel_id} at offset {base_offset + pos}"
                )
            scan.messages += 1
            yield channel, int(log_time), bytes(body[22:])
        pos = body_end


def _handle_record(opcode: int, body: bytes | memoryview, scan: McapScan) -> None:
    if opcode == _OP_SCHEMA:
        (schema_id,) = struct.unpack_from("<H", body, 0)
        name, pos = _string(body, 2)
        encoding, pos = _string(body, pos)
        data, _ = _string(body, pos)
        scan.schemas[schema_id] = McapSchema(schema_id, name, encoding, data)
    elif opcode == _OP_CHANNEL:
        channel_id, schema_id = struct.unpack_from("<HH", body, 0)
        topic, pos = _string(body, 4)
        encoding, pos = _string(body, pos)
        (meta_len,) = struct.unpack_from("<I", body, pos)
        pos += 4
        end = pos + meta_len
        metadata: dict[str, str] = {}
        while pos < end:
            key, pos = _string(body, pos)
            value, pos = _string(body, pos)
            metadata[key] = value
        scan.channels[channel_id] = McapChannel(channel_id, schema_id, topic, encoding, metadata)


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def iter_mcap(
    path: str | Path, scan: McapScan, *, past_damage: bool = False, decode: bool = True
) -> Iterator[tuple[McapChannel, int, bytes]]:
    """Yield ``(channel, log_time_ns, cdr_bytes)`` for every readable message of an MCAP file.

    Stops at the footer, or at the first incomplete/malformed record, filling ``scan``
    (``valid_until_offset``, ``complete``, ``error``). Messages inside a chunk are yielded only
    once the whole chunk has been read, decoded and its CRC (when stored) matched.

    Args:
        path: The ``.mcap`` file.
        scan: Result object, updated while iterating.
        past_damage: At a chunk whose CRC fails, record it in ``scan.damage`` and go on with
            the next record (its messages are skipped); when False, stop there with
            ``scan.error`` naming it (what was yielded is the intact part before it).
        decode: Parse the records inside chunks (False: only check CRCs, yield nothing).

    """
    file_path = Path(path)
    scan.path = file_path
    scan.file_size = file_path.stat().st_size
    with file_path.open("rb") as stream:
        magic = stream.read(8)
        if magic != MCAP_MAGIC:
            scan.error = f"{file_path}: offset 0: not an MCAP file (bad magic)"
            return
        data_crc = zlib.crc32(magic)
        in_data = True
        if past_damage and decode:
            _channels_from_summary(stream, scan)
        offset = 8
        scan.valid_until_offset = offset
        while True:
            head = _read_exact(stream, 9)
            if head is None:
                scan.error = f"{file_path}: offset {offset}: file ends inside a record header"
                return
            opcode = head[0]
            (length,) = struct.unpack_from("<Q", head, 1)
            if length > scan.file_size - offset:
                scan.error = (
                    f"{file_path}: offset {offset}: record 0x{opcode:02x} of {length} bytes "
                    f"runs past the end of the file ({scan.file_size} bytes); truncated"
                )
                return
            body = _read_exact(stream, length)
            if body is None:
                scan.error = f"{file_path}: offset {offset}: file ends inside a record"
                return
            if opcode == _OP_FOOTER:
                _check_summary(stream, scan, offset, head + body)
                scan.complete = True
                scan.valid_until_offset = offset + 9 + length
                return
            if opcode == _OP_DATA_END:
                if in_data:
                    _check_data_section(scan, offset, body, data_crc)
                in_data = False
            elif in_data:
                data_crc = zlib.crc32(body, zlib.crc32(head, data_crc))
            try:
                if opcode == _OP_CHUNK:
                    damage, records, pos = _check_chunk(body, scan, offset)
                    if damage is not None and not past_damage:
                        scan.error = f"{file_path}: {damage.format()}"
                        return
                    if damage is None and decode:
                        # Decode the whole chunk before yielding: a bad one yields nothing.
                        yield from list(_parse_inner(records, scan, offset + 9 + pos))
                elif opcode == _OP_ATTACHMENT:
                    _check_attachment(body, scan, offset)
                elif decode and opcode in (_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE):
                    yield from _parse_inner(head + body, scan, offset)
            except (McapFormatError, struct.error, UnicodeDecodeError, zstd.ZstdError) as error:
                scan.error = f"{file_path}: offset {offset}: bad record 0x{opcode:02x}: {error}"
                return
            offset += 9 + length
            scan.valid_until_offset = offset


def _channels_from_summary(stream: BinaryIO, scan: McapScan) -> None:
    """Take schemas and channels from a closed file's summary, when it has one.

    Past a damaged chunk, the channels it defined are still known, so that later intact
    chunks can be read. Any trouble reading the summary leaves ``scan`` as it was.
    """
    position = stream.tell()
    footer_size = 9 + 20 + len(MCAP_MAGIC)
    schemas, channels = dict(scan.schemas), dict(scan.channels)
    try:
        if scan.file_size < 8 + footer_size:
            return
        stream.seek(scan.file_size - footer_size)
        tail = stream.read(footer_size)
        if tail[0] != _OP_FOOTER or tail[-8:] != MCAP_MAGIC:
            return
        (summary_start,) = struct.unpack_from("<Q", tail, 9)
        end = scan.file_size - footer_size
        if not 8 <= summary_start < end:
            return
        stream.seek(summary_start)
        summary = stream.read(end - summary_start)
        for _ in _parse_inner(summary, scan, summary_start):
            pass
    except (McapFormatError, struct.error, UnicodeDecodeError):
        scan.schemas, scan.channels = schemas, channels
    finally:
        stream.seek(position)


def verify_mcap(path: str | Path) -> McapScan:
    """Check every CRC of an MCAP file without decoding its messages.

    Returns:
        The scan: ``damage`` (every failed CRC), ``error`` (framing: truncated or malformed),
        ``complete`` (footer reached).

    """
    scan = McapScan(path=Path(path))
    for _ in iter_mcap(path, scan, past_damage=True, decode=False):
        pass
    return scan


def _chunk_records(body: bytes) -> tuple[bytes | memoryview, int, int, int, int]:
    """Return ``(records, stored_crc, records_offset_in_body, start_ns, end_ns)`` of a chunk."""
    start, end, uncompressed_size, crc = struct.unpack_from("<QQQI", body, 0)
    compression, pos = _string(body, 28)
    (records_len,) = struct.unpack_from("<Q", body, pos)
    pos += 8
    if pos + records_len > len(body):
        raise McapFormatError("chunk records run past the chunk record")
    records: bytes | memoryview = memoryview(body)[pos : pos + records_len]
    if compression == "zstd":
        records = zstd.decompress(records)
    elif compression:
        raise McapFormatError(f"unsupported chunk compression {compression!r}")
    if len(records) != uncompressed_size:
        raise McapFormatError(f"chunk holds {len(records)} bytes, header says {uncompressed_size}")
    return records, crc, pos, start, end


def _check_chunk(
    body: bytes, scan: McapScan, offset: int
) -> tuple[McapDamage | None, bytes | memoryview, int]:
    """Check a chunk's CRC: ``(damage or None, its records, their offset in the body)``."""
    scan.chunks += 1
    records, stored, pos, start, end = _chunk_records(body)
    if scan.start_ns is None:
        scan.start_ns = start
    base = scan.start_ns
    if stored == 0:
        return None, records, pos
    scan.chunks_checked += 1
    computed = zlib.crc32(records)
    if computed == stored:
        return None, records, pos
    damage = McapDamage(
        "chunk",
        offset,
        9 + len(body),
        stored,
        computed,
        f"messages logged {(start - base) * 1e-9:.3f}..{(end - base) * 1e-9:.3f} s into the bag",
    )
    scan.damage.append(damage)
    return damage, records, pos


def _check_data_section(scan: McapScan, offset: int, body: bytes, computed: int) -> None:
    (stored,) = struct.unpack_from("<I", body, 0) if len(body) >= 4 else (0,)
    if stored == 0:
        return
    scan.sections_checked.append("data section")
    if stored != computed:
        scan.damage.append(McapDamage("data section", 0, offset, stored, computed))


def _check_summary(stream: BinaryIO, scan: McapScan, offset: int, footer: bytes) -> None:
    if len(footer) < 9 + 20:
        return
    summary_start, _summary_offset_start, stored = struct.unpack_from("<QQI", footer, 9)
    if stored == 0 or summary_start == 0 or summary_start > offset:
        return
    scan.sections_checked.append("summary")
    position = stream.tell()
    stream.seek(summary_start)
    summary = stream.read(offset - summary_start)
    stream.seek(position)
    computed = zlib.crc32(footer[: 9 + 16], zlib.crc32(summary))
    if computed != stored:
        scan.damage.append(
            McapDamage("summary", summary_start, offset - summary_start, stored, computed)
        )


def _check_attachment(body: bytes, scan: McapScan, offset: int) -> None:
    if len(body) < 4:
        raise McapFormatError("attachment record too short")
    (stored,) = struct.unpack_from("<I", body, len(body) - 4)
    if stored == 0:
        return
    if "attachment" not in scan.sections_checked:
        scan.sections_checked.append("attachment")
    computed = zlib.crc32(body[:-4])
    if computed != stored:
        _log, _create = struct.unpack_from("<QQ", body, 0)
        name, _ = _string(body, 16)
        scan.damage.append(
            McapDamage("attachment", offset, 9 + len(body), stored, computed, f"named {name!r}")
        )
