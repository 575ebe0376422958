"""r2s2r_testing.episodes.write_robot_dataset: the robot datasets tests and benchmarks write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_testing.episodes import write_robot_dataset

from r2s2r_dataset import EpisodeDataset

CAMERAS = ("head_camera_rgb", "hand_camera_rgb")


def read(path: Path) -> list:
    """Every episode of the dataset at ``path``."""
    reader = EpisodeDataset(path)
    episodes = [reader.episode(i) for i in range(len(reader))]
    reader.close()
    return episodes


def test_sizes_follow_the_arguments(tmp_path: Path) -> None:
    path = write_robot_dataset(tmp_path / "d.hdf5", "sim", 3, 2, frames=7, image_px=24)
    episodes = read(path)
    assert len(episodes) == 2
    for episode in episodes:
        assert episode.metadata.source == "sim"
        assert episode.metadata.behavior_source == "planner"
        assert episode.metadata.joint_names == list(ALL_JOINT_NAMES)
        assert episode.joint_pos_rad.shape == (7, len(ALL_JOINT_NAMES))
        assert episode.actions.shape == (7, len(ALL_JOINT_NAMES))
        for key in CAMERAS:
            assert episode.images[key].shape == (7, 24, 24, 3)
            assert episode.images[key].dtype == np.uint8


def test_same_seed_same_dataset_other_seed_other(tmp_path: Path) -> None:
    def images(name: str, seed: int) -> np.ndarray:
        path = tmp_path / f"{name}.hdf5"
        write_robot_dataset(path, "real", seed, 1, frames=5, image_px=40, images="blocks")
        return read(path)[0].images["head_camera_rgb"]

    assert np.array_equal(images("a", 1), images("b", 1))
    assert not np.array_equal(images("c", 1), images("d", 2))


def test_blocks_are_a_square_moving_over_a_still_background(tmp_path: Path) -> None:
    path = tmp_path / "blocks.hdf5"
    write_robot_dataset(path, "real", 0, 1, frames=6, image_px=64, images="blocks")
    stack = read(path)[0].images["hand_camera_rgb"]
    white = np.all(stack == 255, axis=-1)
    columns = [np.flatnonzero(white[t].any(axis=0)).min() for t in range(len(stack))]
    assert columns == sorted(columns) and columns[-1] > columns[0]
    assert all(white[t].sum() >= 8 * 8 for t in range(len(stack)))
    still = ~white.any(axis=0)
    assert np.array_equal(stack[0][still], stack[-1][still])
    assert len(np.unique(stack[0].reshape(-1, 3), axis=0)) <= 8 * 8 + 1


def test_blocks_compress_far_better_than_noise(tmp_path: Path) -> None:
    sizes = {}
    for kind in ("noise", "blocks"):
        path = tmp_path / f"{kind}.hdf5"
        write_robot_dataset(path, "sim", 0, 2, frames=10, image_px=64, images=kind)
        sizes[kind] = path.stat().st_size
    assert sizes["blocks"] * 5 < sizes["noise"]
