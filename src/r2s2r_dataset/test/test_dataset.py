from pathlib import Path

import h5py
import numpy as np
import pytest
from r2s2r_testing.episodes import generated_episode as make_episode

from r2s2r_dataset import (
    DatasetError,
    EpisodeDataset,
    EpisodeWriter,
    dataset_info,
    merge_shards,
)


def test_shards_merge_excluding_corrupt(tmp_path: Path) -> None:
    with EpisodeWriter(tmp_path / "a.hdf5") as writer:
        for seed in range(3):
            writer.append(make_episode(seed, 5 + seed))
    with EpisodeWriter(tmp_path / "b.hdf5") as writer:
        writer.append(make_episode(10, 4, "planner"))
    # Extend an existing shard: numbering continues.
    with EpisodeWriter(tmp_path / "b.hdf5", append_existing=True) as writer:
        assert writer.append(make_episode(11, 6, "planner")) == 1
    with EpisodeWriter(tmp_path / "c.hdf5") as writer:
        writer.append(make_episode(20, 5))
    corrupt = tmp_path / "c.hdf5"
    corrupt.write_bytes(corrupt.read_bytes()[: corrupt.stat().st_size // 3])
    report = merge_shards(
        [tmp_path / "a.hdf5", corrupt, tmp_path / "b.hdf5"], tmp_path / "merged.hdf5"
    )
    assert report.episodes == 5 and report.frames == 5 + 6 + 7 + 4 + 6
    assert [p.name for p, _ in report.excluded] == ["c.hdf5"]
    info = dataset_info(tmp_path / "merged.hdf5")
    assert info.per_source == {"sim/mimicgen": 3, "sim/planner": 2}
    with EpisodeDataset(tmp_path / "merged.hdf5") as ds:
        original = make_episode(11, 6, "planner")
        np.testing.assert_array_equal(
            ds.episode(4).images["hand_camera_rgb"], original.images["hand_camera_rgb"]
        )
        assert ds.metadata(4).provenance["source_demo"] == "demo_11"
        episode, frame = ds.locate(5 + 6 + 2)
        assert (episode, frame) == (2, 2)
        np.testing.assert_array_equal(
            ds.frame(episode, frame)["obs/head_camera_rgb"],
            make_episode(2, 7).images["head_camera_rgb"][2],
        )


def test_reader_on_directory_and_errors(tmp_path: Path) -> None:
    for name in ("shard_0.hdf5", "shard_1.hdf5"):
        with EpisodeWriter(tmp_path / "ds" / name) as writer:
            writer.append(make_episode(len(name), 3))
    with EpisodeDataset(tmp_path / "ds") as ds:
        assert len(ds) == 2 and ds.num_frames == 6
        with pytest.raises(IndexError, match="frame_index = 3"):
            ds.frame(0, 3)
    with pytest.raises(DatasetError, match="exists already"):
        EpisodeWriter(tmp_path / "ds" / "shard_0.hdf5")
    with pytest.raises(DatasetError, match="not found"):
        EpisodeDataset(tmp_path / "missing")
    bad = make_episode(1, 3)
    bad.actions = bad.actions[:2]
    with (
        EpisodeWriter(tmp_path / "x.hdf5") as writer,
        pytest.raises(ValueError, match=r"episode\.actions"),
    ):
        writer.append(bad)
    with h5py.File(tmp_path / "x.hdf5", "r") as handle:
        assert list(handle["data"]) == []
