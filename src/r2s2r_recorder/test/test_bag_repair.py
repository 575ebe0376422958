"""Honest bag repair: a repaired bag's outcome is what survived, and repair is idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from r2s2r_recorder.bag_format import CUSTOM_DATA_KEY, INCOMPLETE_MARKER, EpisodeInfo
from r2s2r_recorder.bag_reading import read_episode_info
from r2s2r_recorder.bag_repair import repair
from r2s2r_recorder.bag_to_dataset import convert_bags
from r2s2r_recorder.bag_writer import BagWriteError, EpisodeBagWriter
from r2s2r_recorder.config import ConversionConfig
from r2s2r_testing.bags import EpisodeSpec, episode_messages

from r2s2r_dataset import EpisodeDataset

CFG = ConversionConfig(image_width_px=32, image_height_px=24, control_rate_hz=10.0)
FLUSH_EVERY = 40


def write_bag(bag_dir: Path, outcome: str, outcome_message: str | None, close: bool = True) -> Path:
    """An episode bag with many MCAP chunks (as the recorder flushes them)."""
    info = EpisodeInfo(episode_id=bag_dir.name, object_type="cube", outcome=outcome)  # type: ignore[arg-type]
    writer = EpisodeBagWriter(bag_dir, info, flush_period_s=3600.0)
    spec = EpisodeSpec(duration_ns=2_000_000_000, outcome_message=outcome_message)
    for n, (receive_ns, topic, msgtype, data) in enumerate(episode_messages(spec)):
        writer.add_topic(topic, msgtype, "sensor_data" if "image" in topic else "default")
        writer.write(topic, data, receive_ns)
        if n % FLUSH_EVERY == FLUSH_EVERY - 1:
            writer.flush()
    writer.flush()
    if close:
        writer.close()
    return bag_dir


def cut_in_half(bag_dir: Path) -> None:
    mcap = next(bag_dir.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])


def test_truncated_finished_bag_repaired_and_converted_is_not_a_success(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "episode_000000", "success", "success")
    assert read_episode_info(bag).outcome == "success"  # type: ignore[union-attr]
    cut_in_half(bag)  # metadata.yaml still says success; /trial/outcome (at the end) is gone

    result = repair(bag)
    assert result.action == "repaired" and result.messages > 100
    assert result.outcome == "unknown" and result.lost_outcome == "success"
    info = read_episode_info(result.output)
    assert info is not None and info.outcome == "unknown"
    assert info.operator_notes.startswith("[recovered]")

    summary = convert_bags([result.output], tmp_path / "ds.hdf5", CFG)
    assert summary.converted == [] and summary.skip_counts == {"lost_outcome": 1}
    assert "its metadata said 'success'" in summary.skipped[0][2]
    # Kept only when outcomes are not required, and then labelled unknown, never success.
    lenient = CFG.model_copy(update={"require_outcome": False})
    summary = convert_bags([result.output], tmp_path / "lenient.hdf5", lenient)
    assert len(summary.converted) == 1
    with EpisodeDataset(tmp_path / "lenient.hdf5") as dataset:
        assert dataset.episode(0).metadata.outcome == "unknown"


def test_outcome_comes_from_the_surviving_message(tmp_path: Path) -> None:
    # Killed after the verdict was recorded but before the bag was closed: metadata 'unknown'.
    bag = write_bag(tmp_path / "episode_000001", "unknown", "failure", close=False)
    assert (bag / INCOMPLETE_MARKER).exists()
    result = repair(bag)
    assert result.outcome == "failure" and not result.lost_outcome
    assert read_episode_info(result.output).outcome == "failure"  # type: ignore[union-attr]
    summary = convert_bags([result.output], tmp_path / "ds.hdf5", CFG)
    assert len(summary.converted) == 1


def test_complete_bag_is_left_alone(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "episode_000000", "success", "success")
    before = {p.name: p.read_bytes() for p in bag.iterdir()}
    result = repair(bag)
    assert result.action == "complete" and result.output == bag
    assert "nothing to repair" in result.format()
    assert not bag.with_name(bag.name + ".recovered").exists()
    assert {p.name: p.read_bytes() for p in bag.iterdir()} == before


def test_repair_is_idempotent_and_redoes_an_interrupted_one(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "episode_000000", "success", "success")
    cut_in_half(bag)
    first = repair(bag)
    stamps = {p.name: p.stat().st_mtime_ns for p in first.output.iterdir()}
    second = repair(bag)
    assert second.action == "already_repaired" and second.output == first.output
    assert second.messages == first.messages and second.outcome == "unknown"
    assert {p.name: p.stat().st_mtime_ns for p in first.output.iterdir()} == stamps
    # A repair killed half-way (marker still there) is done again.
    (first.output / INCOMPLETE_MARKER).write_text("repair in progress\n")
    third = repair(bag)
    assert third.action == "repaired" and not (third.output / INCOMPLETE_MARKER).exists()
    sidecar = yaml.safe_load((third.output / "episode.yaml").read_text())
    assert sidecar["state"] == "repaired" and sidecar["repaired_from"] == str(bag.resolve())


def test_foreign_output_is_not_overwritten(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "episode_000000", "success", "success")
    cut_in_half(bag)
    other = tmp_path / "episode_000000.recovered"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    with pytest.raises(BagWriteError, match="is not a repair of"):
        repair(bag)
    assert (other / "mine.txt").read_text() == "keep"


def test_bag_repaired_by_an_older_version_keeps_no_stale_success(tmp_path: Path) -> None:
    """Older repairs copied the metadata's outcome: the converter trusts only the message."""
    bag = write_bag(tmp_path / "episode_000000", "success", "success")
    cut_in_half(bag)
    repaired = repair(bag).output
    (repaired / "episode.yaml").unlink()  # as the old repair wrote it: no sidecar
    meta_path = repaired / "metadata.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    custom = meta["rosbag2_bagfile_information"]["custom_data"]
    stale = EpisodeInfo.model_validate_json(custom[CUSTOM_DATA_KEY])
    custom[CUSTOM_DATA_KEY] = stale.model_copy(update={"outcome": "success"}).model_dump_json()
    meta_path.write_text(yaml.safe_dump(meta))
    summary = convert_bags([repaired], tmp_path / "ds.hdf5", CFG)
    assert summary.skip_counts == {"lost_outcome": 1}
