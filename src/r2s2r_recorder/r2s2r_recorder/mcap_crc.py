"""MCAP bags written with their CRC-32s, so that damage can be found later.

rosbags' MCAP writer (pinned, ``rosbags==0.11.9``) stores 0 ("not computed") in every CRC
field: chunk ``uncompressed_crc``, the data-section CRC of DataEnd and the summary CRC of the
footer. :class:`ChecksummedWriter` is rosbags' :class:`~rosbags.rosbag2.Writer` with a storage
plugin that fills all three: each chunk's CRC when the chunk is closed (so a recorder killed
mid-episode leaves its flushed chunks checkable), the other two when the bag is closed.
:func:`~r2s2r_recorder.mcap_scan.verify_mcap` checks them; rosbags' reader also checks the chunk
CRC when it reads a chunk.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path
from typing import Any, BinaryIO

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.storage_mcap import (
    McapWriter,
    PendingChunk,
    write_record,
    write_string,
    write_uint16,
    write_uint32,
    write_uint64,
)

_DATA_END_SIZE = 1 + 8 + 4
_FOOTER_SIZE = 1 + 8 + 8 + 8 + 4
_MAGIC_SIZE = 8


class _CrcFile:
    """Write-through file that keeps the CRC-32 of every byte written to it.

    ``marks`` (offset → CRC of the bytes before it) is kept once :attr:`marking` is set: the
    writer sets it when closing, to find the CRC up to the DataEnd record.
    """

    def __init__(self, raw: BinaryIO, crc: int, position: int) -> None:
        self.raw = raw
        self.crc = crc
        self.position = position
        self.marking = False
        self.marks: dict[int, int] = {}

    def write(self, data: bytes | bytearray | memoryview) -> int:
        written = self.raw.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.position += memoryview(data).nbytes
        if self.marking:
            self.marks[self.position] = self.crc
        return written

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.raw.close()


class ChecksummedMcapWriter(McapWriter):
    """rosbags' MCAP storage writer, storing the chunk, data-section and summary CRCs."""

    def __init__(self, path: Path, compression: CompressionMode) -> None:
        super().__init__(path, compression)
        raw: Any = self.bio
        raw.flush()
        header = self.path.read_bytes()  # the magic and header record written so far
        self._crc_file = _CrcFile(raw, zlib.crc32(header), len(header))
        self.bio = self._crc_file  # type: ignore[assignment]

    def close_chunk(self) -> None:
        """Close the pending chunk (rosbags' ``close_chunk`` with its CRC filled in)."""
        records = self.chunk.bio.getbuffer()
        rec = BytesIO()
        write_uint64(rec, self.chunk.message_start_time)
        write_uint64(rec, self.chunk.message_end_time)
        write_uint64(rec, len(records))
        write_uint32(rec, zlib.crc32(records))
        compressed = self.compressor(bytes(records))
        del records  # release the export before the buffer is replaced
        write_string(rec, self.compression)
        write_uint64(rec, len(compressed))
        rec.write(compressed)

        chunk_start = self.bio.tell()
        write_record(self.bio, 0x06, rec)
        chunk_end = self.bio.tell()

        offsets: list[tuple[int, int]] = []
        for cid, msgs in self.chunk.msgs.items():
            offsets.append((cid, self.bio.tell()))
            rec = BytesIO()
            write_uint16(rec, cid)
            write_uint32(rec, len(msgs) * 16)
            for ts, offset in msgs:
                write_uint64(rec, ts)
                write_uint64(rec, offset)
            write_record(self.bio, 0x07, rec)

        rec = BytesIO()
        write_uint64(rec, self.chunk.message_start_time)
        write_uint64(rec, self.chunk.message_end_time)
        write_uint64(rec, chunk_start)
        write_uint64(rec, chunk_end - chunk_start)
        write_uint32(rec, len(offsets) * 10)
        for cid, offset in offsets:
            write_uint16(rec, cid)
            write_uint64(rec, offset)
        write_uint64(rec, self.bio.tell() - chunk_end)
        write_string(rec, self.compression)
        write_uint64(rec, len(compressed))
        write_uint64(rec, self.chunk.bio.tell())
        self.chunks.append(rec)

        self.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))

    def close(self, version: int, metadata: str) -> None:
        """Close as rosbags does, then fill in the data-section and summary CRCs."""
        self._crc_file.marking = True
        super().close(version, metadata)
        with self.path.open("r+b") as stream:
            size = stream.seek(0, 2)
            footer_start = size - _MAGIC_SIZE - _FOOTER_SIZE
            stream.seek(footer_start + 9)
            summary_start = int.from_bytes(stream.read(8), "little")
            data_end = summary_start - _DATA_END_SIZE
            data_crc = self._crc_file.marks.get(data_end)
            if data_crc is not None:
                stream.seek(data_end + 9)
                stream.write(data_crc.to_bytes(4, "little"))
            stream.seek(summary_start)
            summary = stream.read(footer_start + 9 + 16 - summary_start)
            stream.seek(footer_start + 9 + 16)
            stream.write(zlib.crc32(summary).to_bytes(4, "little"))


class ChecksummedWriter(Writer):
    """rosbags' rosbag2 writer whose MCAP storage stores its CRCs (``ChecksummedMcapWriter``)."""

    STORAGE_PLUGINS: Mapping[StoragePlugin, Any] = {
        **Writer.STORAGE_PLUGINS,
        StoragePlugin.MCAP: ChecksummedMcapWriter,
    }
