"""Fault injection on episode bags: MCAP CRCs are written, checked, and damage is located.

Issue 36, bad case 3 (512 bytes overwritten inside an image payload were read as a complete
bag and converted) and the weak case (``bag inspect`` of a damaged bag exited 0 calling it
unfinished). Bags come from the synthetic-episode factory; chunk offsets are read from the
MCAP summary's chunk index, independently of the scanner under test.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import yaml
from r2s2r_recorder.bag_format import INCOMPLETE_MARKER, EpisodeInfo
from r2s2r_recorder.bag_reading import (
    BagDamagedError,
    BagReadError,
    check_bag_integrity,
    inspect_bag,
    open_reader,
    opened_bag,
)
from r2s2r_recorder.bag_repair import repair
from r2s2r_recorder.bag_to_dataset import convert_bags
from r2s2r_recorder.bag_writer import EpisodeBagWriter
from r2s2r_recorder.config import ConversionConfig
from r2s2r_recorder.mcap_scan import verify_mcap
from r2s2r_testing.bags import EpisodeSpec, episode_messages, write_episode_bag

CFG = ConversionConfig(image_width_px=32, image_height_px=24, control_rate_hz=10.0)
SPEC = EpisodeSpec(duration_ns=6_000_000_000, outcome_message="success")
"""Six seconds: about 3.3 MB of images, so four chunks of rosbags' 1 MiB."""


def mcap_of(bag: Path) -> Path:
    return next(bag.glob("*.mcap"))


def chunk_index(mcap: Path) -> list[tuple[int, int]]:
    """``(offset, length)`` of every chunk, from the summary's chunk index records (0x08)."""
    data = mcap.read_bytes()
    footer = len(data) - 8 - 29
    (summary_start,) = struct.unpack_from("<Q", data, footer + 9)
    chunks, pos = [], summary_start
    while pos < footer:
        opcode, length = data[pos], struct.unpack_from("<Q", data, pos + 1)[0]
        if opcode == 0x08:
            _start, _end, offset, chunk_length = struct.unpack_from("<QQQQ", data, pos + 9)
            chunks.append((offset, chunk_length))
        pos += 9 + length
    return chunks


def overwrite_image_payload(mcap: Path, chunk: int, size: int = 512) -> int:
    """Flip ``size`` bytes of an image's pixels in chunk ``chunk``; return the chunk's offset."""
    offset, length = chunk_index(mcap)[chunk]
    data = bytearray(mcap.read_bytes())
    frame = data.index(b"cam_optical_frame", offset, offset + length)
    pixels = frame + 64  # past the frame id, height, width, encoding: inside the pixel data
    data[pixels : pixels + size] = bytes(b ^ 0xFF for b in data[pixels : pixels + size])
    mcap.write_bytes(bytes(data))
    return offset


@pytest.fixture
def bags(tmp_path: Path) -> tuple[Path, Path]:
    """An intact bag and a second one whose third chunk has 512 image bytes flipped."""
    intact = write_episode_bag(tmp_path / "intact" / "episode_000000", SPEC)
    damaged = write_episode_bag(tmp_path / "damaged" / "episode_000001", SPEC)
    return intact, damaged


def test_written_bags_store_every_crc(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", SPEC)
    mcap = mcap_of(bag)
    data = mcap.read_bytes()
    chunks = chunk_index(mcap)
    assert len(chunks) >= 3
    for offset, _length in chunks:
        (crc,) = struct.unpack_from("<I", data, offset + 9 + 24)
        assert crc != 0
    # The data-section CRC, computed here by hand: every byte before the DataEnd record.
    (summary_start,) = struct.unpack_from("<Q", data, len(data) - 8 - 29 + 9)
    (stored,) = struct.unpack_from("<I", data, summary_start - 4)
    assert data[summary_start - 13] == 0x0F and stored == zlib.crc32(data[: summary_start - 13])
    scan = check_bag_integrity(bag)
    assert scan.chunks_checked == scan.chunks == len(chunks)
    assert scan.sections_checked == ["data section", "summary"]
    # rosbags' reader checks a chunk's CRC when it is not 0: it reads every message.
    with opened_bag(bag) as reader:
        assert sum(1 for _ in reader.messages()) == len(episode_messages(SPEC))


def test_intact_bag_passes(bags: tuple[Path, Path]) -> None:
    intact, _ = bags
    result = inspect_bag(intact)
    assert result.usable and result.state == "complete" and not result.damage
    assert "all match" in result.checksums
    open_reader(intact).close()


def test_flipped_image_bytes_are_located_and_refused(
    bags: tuple[Path, Path], tmp_path: Path
) -> None:
    intact, damaged = bags
    offset = overwrite_image_payload(mcap_of(damaged), chunk=2)

    result = inspect_bag(damaged)
    assert result.state == "DAMAGED" and not result.usable
    assert result.damage[0].startswith(f"chunk at offset {offset} ")
    assert "fails its CRC" in result.damage[0]
    # The chunks before and after the damaged one are still counted as readable.
    assert 0 < result.readable_messages < len(episode_messages(SPEC))

    with pytest.raises(
        BagDamagedError, match=rf"episode_000001: damaged bag: .*chunk at offset {offset} "
    ):
        open_reader(damaged)

    summary = convert_bags([damaged, intact], tmp_path / "ds.hdf5", CFG)
    assert [Path(bag) for bag, _frames in summary.converted] == [intact]
    ((bag, message),) = summary.errors
    assert Path(bag) == damaged and f"chunk at offset {offset}" in message


def test_inspect_reads_past_a_damaged_first_chunk(bags: tuple[Path, Path]) -> None:
    """The first chunk defines the channels; the summary's copies let inspect read on."""
    _, damaged = bags
    offset = overwrite_image_payload(mcap_of(damaged), chunk=0)
    result = inspect_bag(damaged)
    assert result.state == "DAMAGED" and result.error is None
    assert result.damage[0].startswith(f"chunk at offset {offset} ")
    assert result.topic_counts.get("/trial/outcome") == 1  # in the last chunk


def test_repair_keeps_the_intact_part_before_the_damage(bags: tuple[Path, Path]) -> None:
    _, damaged = bags
    chunks = chunk_index(mcap_of(damaged))
    overwrite_image_payload(mcap_of(damaged), chunk=2)
    result = repair(damaged)
    assert result.action == "repaired"
    assert result.dropped_chunks == len(chunks) - 2
    assert result.damage and "fails its CRC" in result.damage[0]
    assert "dropped" in result.format() and f"offset {chunks[2][0]}" in result.format()
    repaired = inspect_bag(result.output)
    assert repaired.usable and "all match" in repaired.checksums
    with opened_bag(result.output) as reader:
        last = max(t for _c, t, _d in reader.messages())
    first_dropped_ns = min(t for t, *_ in episode_messages(SPEC)[result.messages :])
    assert last < first_dropped_ns
    # The trial outcome (the last message) was in a dropped chunk: not trusted.
    assert result.outcome == "unknown" and result.lost_outcome == "success"
    sidecar = yaml.safe_load((result.output / "episode.yaml").read_text())
    assert sidecar["dropped_chunks"] == result.dropped_chunks and sidecar["source_damage"]


def test_damage_outside_the_chunks_fails_the_data_section_crc(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", SPEC)
    mcap = mcap_of(bag)
    offset, length = chunk_index(mcap)[0]
    data = bytearray(mcap.read_bytes())
    index = offset + length  # the first message index record after the first chunk
    assert data[index] == 0x07
    data[index + 9 + 2 + 4 + 3] ^= 0x01  # one bit of a log time in the index
    mcap.write_bytes(bytes(data))
    result = inspect_bag(bag)
    assert result.state == "DAMAGED" and result.damage[0].startswith("data section at bytes 0..")
    with pytest.raises(BagDamagedError, match="data section"):
        open_reader(bag)
    # Every chunk verified: the repair copies every message into a new, checked bag.
    repaired = repair(bag)
    assert repaired.messages == len(episode_messages(SPEC)) and repaired.dropped_chunks == 0
    assert "all messages copied" in repaired.format()
    assert inspect_bag(repaired.output).usable


def test_damaged_summary_is_found(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", SPEC)
    mcap = mcap_of(bag)
    data = bytearray(mcap.read_bytes())
    (summary_start,) = struct.unpack_from("<Q", data, len(data) - 8 - 29 + 9)
    data[summary_start + 20] ^= 0x10
    mcap.write_bytes(bytes(data))
    scan = verify_mcap(mcap)
    assert [d.what for d in scan.damage] == ["summary"]
    with pytest.raises(BagDamagedError, match=rf"summary at bytes {summary_start}\.\."):
        check_bag_integrity(bag)


def test_truncated_closed_bag_is_damaged(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", SPEC)
    mcap = mcap_of(bag)
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) * 2 // 3])
    result = inspect_bag(bag)
    assert result.state == "DAMAGED" and "truncated" in (result.error or "")
    with pytest.raises(BagDamagedError, match=r"damaged bag: .*truncated"):
        open_reader(bag)


def test_unfinished_bag_is_unfinished_not_damaged(tmp_path: Path) -> None:
    bag = tmp_path / "episode_000000"
    writer = EpisodeBagWriter(
        bag, EpisodeInfo(episode_id=bag.name, object_type="cube"), flush_period_s=3600.0
    )
    for n, (receive_ns, topic, msgtype, data) in enumerate(episode_messages(SPEC)):
        writer.add_topic(topic, msgtype)
        writer.write(topic, data, receive_ns)
        if n % 200 == 199:
            writer.flush()
    writer.flush()  # killed here: never closed
    assert (bag / INCOMPLETE_MARKER).exists()
    result = inspect_bag(bag)
    assert result.state == "UNFINISHED" and not result.damage
    assert result.readable_messages > 0 and "all match" in result.checksums
    with pytest.raises(BagReadError, match=INCOMPLETE_MARKER):
        open_reader(bag)


def test_bag_without_crcs_reads_and_says_nothing_was_checked(tmp_path: Path) -> None:
    """Bags written before checksums (CRC 0 = not computed) still read, unverified."""
    bag = tmp_path / "episode_000000"
    writer = EpisodeBagWriter(
        bag, EpisodeInfo(episode_id=bag.name, object_type="cube"), checksums=False
    )
    for receive_ns, topic, msgtype, data in episode_messages(SPEC):
        writer.add_topic(topic, msgtype)
        writer.write(topic, data, receive_ns)
    writer.close()
    result = inspect_bag(bag)
    assert result.usable and result.checksums.startswith("none stored")
    open_reader(bag).close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "R2S2R_DEBUG": ""},
        check=False,
    )


@pytest.mark.graph  # runs the CLI as a user does
def test_cli_inspect_exit_codes_and_conversion_refusal(
    bags: tuple[Path, Path], tmp_path: Path
) -> None:
    intact, damaged = bags
    offset = overwrite_image_payload(mcap_of(damaged), chunk=2)

    ok = run_cli("bag", "inspect", str(intact))
    assert ok.returncode == 0 and ok.stderr == ""
    assert "complete" in ok.stdout and "all match" in ok.stdout

    bad = run_cli("bag", "inspect", str(damaged))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "DAMAGED" in bad.stdout and f"damaged: chunk at offset {offset} " in bad.stdout
    (line,) = bad.stderr.strip().splitlines()
    assert f"{damaged}: damaged bag: chunk at offset {offset} " in line

    out = tmp_path / "ds.hdf5"
    convert = run_cli("bag2dataset", str(damaged), str(intact), "-o", str(out))
    assert convert.returncode == 1
    assert f"{damaged}: damaged bag: " in convert.stdout + convert.stderr
    assert f"chunk at offset {offset}" in convert.stdout + convert.stderr
    assert "Traceback" not in convert.stderr
