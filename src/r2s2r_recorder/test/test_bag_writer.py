import errno
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from r2s2r_recorder.bag_format import INCOMPLETE_MARKER, EpisodeInfo
from r2s2r_recorder.bag_reading import (
    BagReadError,
    inspect_bag,
    open_reader,
    opened_bag,
    read_episode_info,
)
from r2s2r_recorder.bag_repair import repair_bag
from r2s2r_recorder.bag_writer import DiskFullError, EpisodeBagWriter, cadence_from_stamps
from r2s2r_testing.bags import EpisodeSpec, episode_messages, write_episode_bag


def test_cadence_counts_drops_and_worst_gap() -> None:
    stamps = [i * 10_000_000 for i in range(100) if i not in (20, 50, 51, 52)]
    cadence = cadence_from_stamps("/joint_states", stamps, "header")
    assert cadence.count == 96
    assert cadence.estimated_drops == 4
    assert cadence.worst_gap_s == pytest.approx(0.04)
    assert cadence.median_period_s == pytest.approx(0.01)
    assert cadence.rate_hz == pytest.approx(95 / 0.99)


def test_closed_bag_has_metadata_and_reads(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", EpisodeSpec())
    assert not (bag / INCOMPLETE_MARKER).exists()
    info = read_episode_info(bag)
    assert info is not None and info.object_type == "cube" and info.outcome == "success"
    expected = episode_messages(EpisodeSpec())
    with opened_bag(bag) as reader:
        assert reader.message_count == len(expected)
        topics = {c.topic: c for c in reader.connections}
        assert topics["/head_camera/image_raw"].ext.offered_qos_profiles[0].reliability.name == (
            "BEST_EFFORT"
        )
        assert "r2s2r_interfaces/msg/ObjectTrackArray" in {c.msgtype for c in reader.connections}
    inspection = inspect_bag(bag)
    assert inspection.complete and inspection.error is None
    assert inspection.readable_messages == len(expected)


@pytest.mark.graph
def test_sigkill_mid_episode(tmp_path: Path) -> None:
    # One finished bag, then 201 messages of a second one (each flushed), then it waits.
    half_written = ["-m", "r2s2r_testing.stand_ins", "half-written-bag", str(tmp_path)]
    proc = subprocess.Popen([sys.executable, *half_written], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    earlier = tmp_path / "episode_000000"
    with opened_bag(earlier) as reader:
        assert reader.message_count == len(episode_messages(EpisodeSpec()))
    current = tmp_path / "episode_000001"
    assert (current / INCOMPLETE_MARKER).exists()
    with pytest.raises(BagReadError, match="INCOMPLETE"):
        open_reader(current)
    inspection = inspect_bag(current)
    assert not inspection.complete
    # flush_period_s=0 flushes every message: all 201 written are readable.
    assert inspection.readable_messages == 201
    repaired = repair_bag(current)
    with opened_bag(repaired) as reader:
        assert reader.message_count == 201
    info = read_episode_info(repaired)
    assert info is not None and info.episode_id == "episode_000001"


def test_disk_full_stops_with_clear_error(tmp_path: Path) -> None:
    earlier = write_episode_bag(tmp_path / "episode_000000", EpisodeSpec())
    before = {p: p.stat().st_mtime_ns for p in earlier.iterdir()}
    writer = EpisodeBagWriter(
        tmp_path / "episode_000001", EpisodeInfo(episode_id="episode_000001"), flush_period_s=0.0
    )
    storage = writer._writer.storage
    assert storage is not None

    def full(_data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    messages = episode_messages(EpisodeSpec())
    t, topic, msgtype, data = messages[0]
    writer.add_topic(topic, msgtype)
    storage.bio.write = full  # type: ignore[method-assign]
    with pytest.raises(DiskFullError, match=r"disk full.*earlier episodes are untouched"):
        writer.write(topic, data, t)
    assert (tmp_path / "episode_000001" / INCOMPLETE_MARKER).exists()
    assert {p: p.stat().st_mtime_ns for p in earlier.iterdir()} == before
    with opened_bag(earlier) as reader:
        assert reader.message_count == len(messages)
