import math
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from r2s2r_recorder.bag_converter import BagConverter
from r2s2r_recorder.bag_to_dataset import bag_content_hash, convert_bags
from r2s2r_recorder.config import ConversionConfig
from r2s2r_recorder.conversion_summary import EpisodesPresentError
from r2s2r_testing.bags import (
    ARM,
    ARM_PERIOD_NS,
    ARM_START_NS,
    BASE_NS,
    CAM_PERIOD_NS,
    HAND,
    HAND_PERIOD_NS,
    HAND_START_NS,
    JOINT_PERIOD_NS,
    EpisodeSpec,
    arm_value,
    hand_value,
    joint_value,
    write_episode_bag,
)
from rosbags.serde import SerdeError

from r2s2r_dataset import (
    DATA_GROUP,
    EpisodeDataset,
    dataset_info,
    partial_path,
    read_manifest,
)

CFG = ConversionConfig(image_width_px=32, image_height_px=24, control_rate_hz=10.0)


@pytest.fixture(scope="module")
def three_bags(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("bags")
    return [
        write_episode_bag(root / f"episode_{i:06d}", EpisodeSpec(duration_ns=(12 + 3 * i) * 10**8))
        for i in range(3)
    ]


def test_three_episodes_convert_aligned(three_bags: list[Path], tmp_path: Path) -> None:
    summary = convert_bags(three_bags, tmp_path / "ds.hdf5", CFG)
    assert summary.errors == [] and summary.skipped == []
    assert len(summary.converted) == 3
    # The last sensor stream to begin is the hand camera (2 ms in); commands start later, and
    # until a controller's first command its action is the measured position (holding).
    start = BASE_NS + 2_000_000
    assert start < BASE_NS + min(ARM_START_NS, HAND_START_NS)
    with EpisodeDataset(tmp_path / "ds.hdf5") as ds:
        assert len(ds) == 3
        for index, bag in enumerate(three_bags):
            episode = ds.episode(index)
            duration = (12 + 3 * index) * 10**8
            last_cam = BASE_NS + ((duration - 1) // CAM_PERIOD_NS) * CAM_PERIOD_NS
            last_joint = BASE_NS + ((duration - 1) // JOINT_PERIOD_NS) * JOINT_PERIOD_NS
            end = min(last_cam, last_joint, BASE_NS + ((duration - 1) // 10**8) * 10**8)
            expected = (end - start) // 10**8 + 1
            assert episode.num_frames == expected
            np.testing.assert_allclose(episode.timestamps_s, np.arange(expected) * 0.1, atol=1e-9)
            meta = episode.metadata
            assert meta.provenance["bag_path"] == str(bag.resolve())
            assert meta.provenance["start_time_ns"] == start
            assert meta.action_names == ARM + HAND and meta.outcome == "success"

            def measured_at(t: int) -> list[float]:
                t_joint = BASE_NS + ((t - BASE_NS) // JOINT_PERIOD_NS) * JOINT_PERIOD_NS
                return [joint_value(j, t_joint) for j in range(5)]

            def reference(t: int, first_ns: int, period_ns: int, value, hold: list[float]):  # type: ignore[no-untyped-def]
                # Each command has one point 0.2 s after it arrives; the controller moves
                # linearly from the reference in force to it, then holds it.
                k = (t - first_ns) // period_ns
                if k < 0:
                    return None
                previous = [value(k - 1, j) for j in range(len(hold))] if k > 0 else hold
                s = min((t - first_ns - k * period_ns) / 200_000_000, 1.0)
                return [p + s * (value(k, j) - p) for j, p in enumerate(previous)]

            ticks = [start + row * 10**8 for row in range(expected)]
            first_arm = BASE_NS + ARM_START_NS
            first_hand = BASE_NS + HAND_START_NS
            arm_hold = measured_at(max(t for t in ticks if t < first_arm))[:3]
            hand_hold = measured_at(max(t for t in ticks if t < first_hand))[3:]
            for row in range(expected):
                t = ticks[row]
                joints = measured_at(t)
                arm_ref = reference(t, first_arm, ARM_PERIOD_NS, arm_value, arm_hold)
                hand_ref = reference(t, first_hand, HAND_PERIOD_NS, hand_value, hand_hold)
                want = (arm_ref or joints[:3]) + (hand_ref or joints[3:])
                np.testing.assert_allclose(episode.actions[row], want, atol=1e-5)  # float32
                np.testing.assert_allclose(episode.joint_pos_rad[row], joints, atol=1e-6)
                head_index = (t - BASE_NS) // CAM_PERIOD_NS
                hand_index = (t - BASE_NS - 2_000_000) // CAM_PERIOD_NS
                assert episode.images["head_camera_rgb"].shape[1:] == (24, 32, 3)
                np.testing.assert_array_equal(
                    episode.images["head_camera_rgb"][row, 5, 7], [head_index, 10, 200]
                )
                # Hand camera is bgr8 in the bag; the dataset holds RGB.
                np.testing.assert_array_equal(
                    episode.images["hand_camera_rgb"][row, 3, 3], [hand_index, 20, 200]
                )
                belt_k = (t - BASE_NS) // 10**8
                assert episode.belt_speed_mps[row] == pytest.approx(0.1 + 0.001 * belt_k, abs=1e-6)
                t_track = BASE_NS + ((t - BASE_NS) // 50_000_000) * 50_000_000
                assert episode.object_pose[row, 0] == pytest.approx(
                    0.1 * (t_track - BASE_NS) * 1e-9, abs=1e-6
                )
            assert episode.object_pose_valid.all()
        frame = ds.frame(2, 4)
        np.testing.assert_allclose(frame["actions"], ds.episode(2).actions[4])
        assert ds.locate(ds.episode_length(0) + 1) == (1, 1)
    info = dataset_info(tmp_path / "ds.hdf5")
    assert info.episodes == 3 and info.frames == summary.frames
    assert info.per_source == {"real/demo": 3}
    assert info.features["obs/head_camera_rgb"] == ((24, 32, 3), "uint8")


def test_zero_stamp_commands_use_receive_time(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", EpisodeSpec(zero_stamp_commands=True))
    episode = BagConverter(CFG).convert_bag(bag)
    # Receive time = stamp + 1 ms for every stream, so the mapped command times equal the
    # original stamps and the actions match the stamped case.
    reference = BagConverter(CFG).convert_bag(
        write_episode_bag(tmp_path / "episode_000001", EpisodeSpec())
    )
    np.testing.assert_allclose(episode.actions, reference.actions)


def test_bad_inputs_are_counted_and_skipped(tmp_path: Path) -> None:
    bags = [
        write_episode_bag(tmp_path / "episode_000000", EpisodeSpec()),
        write_episode_bag(tmp_path / "episode_000001", EpisodeSpec(omit_topics={"/belt/speed"})),
        write_episode_bag(tmp_path / "episode_000002", EpisodeSpec(switch_encoding_at=10)),
        write_episode_bag(tmp_path / "episode_000003", EpisodeSpec(non_monotonic_joint_at=40)),
        write_episode_bag(tmp_path / "episode_000004", EpisodeSpec(outcome="unknown")),
        write_episode_bag(
            tmp_path / "episode_000005",
            EpisodeSpec(outcome="unknown", outcome_message="failure"),
        ),
    ]
    summary = convert_bags(bags, tmp_path / "ds.hdf5", CFG)
    reasons = {bag.name: reason for bag, reason, _ in summary.skipped}
    assert reasons == {
        "episode_000001": "missing_topic",
        "episode_000002": "image_encoding",
        "episode_000003": "non_monotonic",
        "episode_000004": "no_outcome",
    }
    assert summary.skip_counts == {
        "missing_topic": 1,
        "image_encoding": 1,
        "non_monotonic": 1,
        "no_outcome": 1,
    }
    assert [b.name for b, _ in summary.converted] == ["episode_000000", "episode_000005"]
    details = {bag.name: detail for bag, _, detail in summary.skipped}
    assert "/belt/speed" in details["episode_000001"]
    assert "message 40" in details["episode_000003"]
    with EpisodeDataset(tmp_path / "ds.hdf5") as ds:
        assert [ds.metadata(i).outcome for i in range(len(ds))] == ["success", "failure"]
    assert "4 skipped" in summary.format()


def test_truncated_bag_named_with_offset_others_convert(tmp_path: Path) -> None:
    bags = [write_episode_bag(tmp_path / f"episode_{i:06d}", EpisodeSpec()) for i in range(3)]
    mcap = bags[1] / "episode_000001.mcap"
    size = mcap.stat().st_size
    os.truncate(mcap, size // 2)
    summary = convert_bags(bags, tmp_path / "ds.hdf5", CFG)
    assert [b.name for b, _ in summary.converted] == ["episode_000000", "episode_000002"]
    assert len(summary.errors) == 1
    bag, message = summary.errors[0]
    assert bag == bags[1]
    assert str(mcap) in message and "offset" in message
    offset = int(message.split("offset ")[1].split(":")[0].split(" ")[0])
    assert 0 < offset < size // 2
    assert math.isfinite(summary.frames) and summary.frames > 0


def test_interrupted_conversion_resumes_without_duplicates(
    three_bags: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "ds.hdf5"
    convert_bags(three_bags[:1], out, CFG)
    # What a kill after the first episode leaves: the partial file, no output.
    out.rename(partial_path(out))
    assert dataset_info(partial_path(out)).problems
    summary = convert_bags([*three_bags, three_bags[2]], out, CFG)
    assert summary.resumed == [(three_bags[0], "demo_0")]
    assert [b for b, _ in summary.converted] == three_bags[1:]
    assert summary.duplicates == [(three_bags[2], three_bags[2])]
    assert summary.written and not partial_path(out).exists()
    info = dataset_info(out)
    assert info.episodes == 3 and info.problems == []
    with h5py.File(out, "r") as handle:
        entries = read_manifest(handle[DATA_GROUP])
    assert entries is not None
    assert [e.content_hash for e in entries] == [bag_content_hash(b) for b in three_bags]
    assert [e.episode_id for e in entries] == [b.name for b in three_bags]
    # An episode lost from the file no longer matches the manifest.
    with h5py.File(out, "r+") as handle:
        del handle["data/demo_1"]
    assert "['demo_1'] are not in the file" in dataset_info(out).problems[0]


def test_append_refuses_episodes_present(three_bags: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "ds.hdf5"
    convert_bags(three_bags[:2], out, CFG)
    with pytest.raises(EpisodesPresentError, match=r"holds 1 of these episodes already: .*"):
        convert_bags(three_bags[1:], out, CFG, append_existing=True)
    summary = convert_bags(three_bags[2:], out, CFG, append_existing=True)
    assert len(summary.converted) == 1
    assert dataset_info(out).episodes == 3


def test_any_reader_error_is_isolated_per_bag(
    three_bags: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What rosbags and its decompressors raise on damaged bytes is not a ValueError.
    failures = {
        three_bags[0].name: SerdeError("Invalid string length 2147483647 at offset 8."),
        three_bags[1].name: RuntimeError("LZ4F_decompress failed with code: ERROR_blockChecksum"),
    }
    convert = BagConverter.convert_bag

    def flaky(self: BagConverter, bag_dir: str | Path) -> Any:
        if Path(bag_dir).name in failures:
            raise failures[Path(bag_dir).name]
        return convert(self, bag_dir)

    monkeypatch.setattr(BagConverter, "convert_bag", flaky)
    summary = convert_bags(three_bags, tmp_path / "ds.hdf5", CFG)
    assert [b for b, _ in summary.converted] == three_bags[2:]
    assert summary.errors == [
        (three_bags[0], "cannot read: SerdeError: Invalid string length 2147483647 at offset 8."),
        (
            three_bags[1],
            "cannot read: RuntimeError: LZ4F_decompress failed with code: ERROR_blockChecksum",
        ),
    ]
    # A bug of the converter is not a damaged bag: it stops the run, nothing is published.
    failures[three_bags[2].name] = TypeError("a bug")  # type: ignore[assignment]
    with pytest.raises(TypeError):
        convert_bags(three_bags, tmp_path / "other.hdf5", CFG)
    assert not (tmp_path / "other.hdf5").exists()
