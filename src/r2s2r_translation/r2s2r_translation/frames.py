"""Camera frames of a dataset for translation: checked, split by episode, resized once.

A translator is trained and scored on frames of one camera, at one working size. Frames are
read episode by episode (every ``stride``-th frame), resized with the policy's own resize
(:func:`r2s2r_policy.data.chunks.resize_image`, area interpolation), and split by *episode*
into training and held-out sets, so no held-out frame has a near-duplicate neighbour in the
training set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from r2s2r_common.errors import BadInputError
from r2s2r_dataset.hdf5 import EpisodeDataset, dataset_info
from r2s2r_dataset.schema import CAMERA_KEYS
from r2s2r_policy.data.chunks import resize_image

MIN_EPISODES = 4
"""Fewest episodes a translator is trained from (some are held out)."""


class TranslationInputError(BadInputError, ValueError):
    """Input a translator cannot use: the message names the file, episode and camera."""


@dataclass(frozen=True)
class DatasetCameras:
    """What a dataset declares of its cameras: image key -> (height, width), and its source."""

    path: Path
    shapes: dict[str, tuple[int, int]]
    sources: frozenset[str]
    episodes: int

    def require_source(self, source: str, why: str) -> None:
        """Refuse a dataset with episodes of another source than ``source``, saying ``why``.

        Raises:
            TranslationInputError: Names the dataset and the sources it holds.

        """
        if self.sources != {source}:
            raise TranslationInputError(
                f"{self.path}: episodes of source {sorted(self.sources)}; {why}"
            )


def dataset_cameras(path: str | Path) -> DatasetCameras:
    """Read and check a dataset's camera images: uint8 RGB, one size per camera throughout.

    Raises:
        TranslationInputError: No episodes, no camera, an image array of another dtype or
            layout, or an episode whose camera size differs from the first episode's.

    """
    info = dataset_info(path)
    if info.episodes == 0:
        raise TranslationInputError(f"{path}: the dataset holds no episodes")
    shapes: dict[str, tuple[int, int]] = {}
    sources: set[str] = set()
    with EpisodeDataset(path) as dataset:
        for index in range(len(dataset)):
            sources.add(dataset.metadata(index).source)
            for key in CAMERA_KEYS:
                array = dataset.observation(index, key)
                if array is None:
                    continue
                if array.dtype != np.uint8 or array.ndim != 4 or array.shape[3] != 3:
                    raise TranslationInputError(
                        f"{dataset.where(index)}: obs/{key} is {array.dtype} {array.shape}; "
                        "expected uint8 (T, H, W, 3) RGB"
                    )
                size = (int(array.shape[1]), int(array.shape[2]))
                if shapes.setdefault(key, size) != size:
                    raise TranslationInputError(
                        f"{dataset.where(index)}: obs/{key} is {size[0]}x{size[1]} px where the "
                        f"dataset's first episode declares {shapes[key][0]}x{shapes[key][1]} px"
                    )
    if not shapes:
        raise TranslationInputError(f"{path}: no camera images (expected {list(CAMERA_KEYS)})")
    return DatasetCameras(Path(path), shapes, frozenset(sources), info.episodes)


def split_episodes(
    episodes: int, holdout_fraction: float, seed: int = 0
) -> tuple[list[int], list[int]]:
    """Split episode indices into (training, held-out), at least one held out.

    Raises:
        TranslationInputError: Fewer than :data:`MIN_EPISODES` episodes.

    """
    if episodes < MIN_EPISODES:
        raise TranslationInputError(
            f"{episodes} episodes: a translator needs at least {MIN_EPISODES} real episodes "
            "(some are held out to score it)"
        )
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"holdout_fraction = {holdout_fraction}: expected within (0, 1)")
    order = np.random.default_rng(seed).permutation(episodes)
    held = max(1, round(holdout_fraction * episodes))
    return sorted(int(i) for i in order[held:]), sorted(int(i) for i in order[:held])


def read_frames(
    path: str | Path,
    camera_key: str,
    episodes: Sequence[int] | None = None,
    stride: int = 1,
    image_px: int | None = None,
    max_frames: int | None = None,
) -> NDArray[np.uint8]:
    """Frames of one camera: every ``stride``-th frame of the given episodes, resized.

    Args:
        path: The dataset.
        camera_key: The image key (``head_camera_rgb``, ...).
        episodes: Episode indices (all when None), read in this order.
        stride: Keep every ``stride``-th frame of each episode.
        image_px: Square working size (None: the dataset's size).
        max_frames: Stop after this many frames.

    Returns:
        uint8 ``(N, S, S, 3)``.

    """
    if stride < 1:
        raise ValueError(f"stride = {stride}: expected >= 1")
    frames: list[NDArray[np.uint8]] = []
    with EpisodeDataset(path) as dataset:
        chosen = range(len(dataset)) if episodes is None else episodes
        for index in chosen:
            array = dataset.observation(index, camera_key)
            if array is None:
                raise TranslationInputError(f"{dataset.where(index)}: no obs/{camera_key}")
            images = np.asarray(array[::stride])
            for image in images:
                frames.append(
                    image if image_px is None else resize_image(image, image_px, image_px)
                )
                if max_frames is not None and len(frames) >= max_frames:
                    return np.stack(frames)
    if not frames:
        raise TranslationInputError(f"{path}: no frames of {camera_key} in episodes {episodes}")
    return np.stack(frames)


def frames_digest(frames: NDArray[np.uint8]) -> str:
    """SHA-256 of a frame array's bytes and shape (what a translator was trained on)."""
    digest = hashlib.sha256(str(frames.shape).encode())
    digest.update(np.ascontiguousarray(frames).tobytes())
    return digest.hexdigest()
