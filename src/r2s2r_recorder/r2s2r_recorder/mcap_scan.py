"""Sequential MCAP scanner that reads what is readable from an unfinished or damaged file.

The rosbags reader needs the MCAP footer and summary, which a recorder killed mid-episode
never wrote. This scanner walks the records from the start, decodes every complete chunk,
and stops at the first incomplete or malformed record, reporting its byte offset.
"""

from __future__ import annotations

import struct
import sys
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
_OP_FOOTER = 0x02
_OP_DATA_END = 0x0F


class McapFormatError(ValueError):
    """An MCAP record is malformed; the message names the file and byte offset."""


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

    """

    path: Path
    schemas: dict[int, McapSchema] = field(default_factory=dict)
    channels: dict[int, McapChannel] = field(default_factory=dict)
    messages: int = 0
    valid_until_offset: int = 0
    file_size: int = 0
    complete: bool = False
    error: str | None = None


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


def iter_mcap(path: str | Path, scan: McapScan) -> Iterator[tuple[McapChannel, int, bytes]]:
    """Yield ``(channel, log_time_ns, cdr_bytes)`` for every readable message of an MCAP file.

    Stops at the footer, or at the first incomplete/malformed record, filling ``scan``
    (``valid_until_offset``, ``complete``, ``error``). Messages inside a chunk are yielded only
    once the whole chunk has been read and decoded.

    Args:
        path: The ``.mcap`` file.
        scan: Result object, updated while iterating.

    """
    file_path = Path(path)
    scan.path = file_path
    scan.file_size = file_path.stat().st_size
    with file_path.open("rb") as stream:
        if stream.read(8) != MCAP_MAGIC:
            scan.error = f"{file_path}: offset 0: not an MCAP file (bad magic)"
            return
        offset = 8
        scan.valid_until_offset = offset
        while True:
            head = _read_exact(stream, 9)
            if head is None:
                scan.error = f"{file_path}: offset {offset}: file ends inside a record header"
                return
            opcode = head[0]
            (length,) = struct.unpack_from("<Q", head, 1)
            if opcode == _OP_FOOTER:
                scan.complete = True
                scan.valid_until_offset = offset + 9 + length
                return
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
            try:
                if opcode == _OP_CHUNK:
                    yield from _decode_chunk(body, scan, offset)
                elif opcode in (_OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE):
                    yield from _parse_inner(head + body, scan, offset)
            except (McapFormatError, struct.error, UnicodeDecodeError, zstd.ZstdError) as error:
                scan.error = f"{file_path}: offset {offset}: bad record 0x{opcode:02x}: {error}"
                return
            offset += 9 + length
            scan.valid_until_offset = offset
            if opcode == _OP_DATA_END:
                continue


def _decode_chunk(
    body: bytes, scan: McapScan, offset: int
) -> Iterator[tuple[McapChannel, int, bytes]]:
    _start, _end, uncompressed_size, _crc = struct.unpack_from("<QQQI", body, 0)
    compression, pos = _string(body, 28)
    (records_len,) = struct.unpack_from("<Q", body, pos)
    pos += 8
    records = body[pos : pos + records_len]
    if compression == "zstd":
        records = zstd.decompress(records)
    elif compression:
        raise McapFormatError(f"unsupported chunk compression {compression!r}")
    if len(records) != uncompressed_size:
        raise McapFormatError(f"chunk holds {len(records)} bytes, header says {uncompressed_size}")
    # Decode the whole chunk before yielding, so a bad chunk yields nothing half-way.
    messages = list(_parse_inner(records, scan, offset + 9 + pos))
    yield from messages
