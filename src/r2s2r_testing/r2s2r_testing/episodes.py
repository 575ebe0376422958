"""Synthetic dataset episodes: the one factory tests build episodes with.

:func:`make_episode` gives the arrays of a tiny learnable episode: a bright square moving across
the head image (its column encodes the episode's target) and the hand image brightening as the
arm approaches; the joint targets move smoothly toward a target that only the images reveal, so
a policy must read them. :func:`synthetic_episode` wraps them into a dataset
:class:`~r2s2r_dataset.Episode` with the metadata a test asks for, and
:func:`write_hdf5` writes some in the project's dataset format.

:func:`write_robot_dataset` is another thing: episodes with the robot's 18 joints near its home
pose, for tests that train and evaluate policies on the simulated cell (the experiment), and, with
camera-like images at paper scale, for the benchmarks (bench/bench_training_memory.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from r2s2r_dataset import (
    CAMERA_KEYS,
    HAND_CAMERA_KEY,
    HEAD_CAMERA_KEY,
    Episode,
    EpisodeMetadata,
    EpisodeWriter,
    object_track_fields,
)

JOINTS = ["arm_1", "arm_2", "hand_1", "hand_2"]
"""Joints (and actions) of the tiny episodes."""
IMAGE_PX = 32
"""Side of the tiny episodes' square camera images."""
TRACK_FIELDS = object_track_fields(["cube", "sphere"])
"""Object-track columns of the tiny episodes."""
BELT_SPEED_SOURCE = "belt_speed"
"""Where the tiny episodes' belt speed comes from (their metadata)."""
OBJECT_TRACK_SOURCE = "object_tracker"
"""Where the tiny episodes' object track comes from (their metadata)."""


def make_episode(seed: int, frames: int = 20, image_px: int = IMAGE_PX) -> dict[str, np.ndarray]:
    """Return the arrays of one tiny learnable episode, a function of ``seed``.

    Keys: ``head_camera_rgb``, ``hand_camera_rgb`` (frames × px × px × 3, uint8),
    ``joint_pos_rad`` and ``actions`` (frames × 4), ``belt_speed_mps`` (frames) and
    ``object_track`` (frames × len(TRACK_FIELDS)).
    """
    rng = np.random.default_rng(seed)
    target = rng.uniform(-1.0, 1.0, size=len(JOINTS))
    start = rng.uniform(-0.3, 0.3, size=len(JOINTS))
    phase = np.linspace(0.0, 1.0, frames + 1)[:, None]
    trajectory = start + (target - start) * (3 * phase**2 - 2 * phase**3)
    joint_pos = trajectory[:-1].astype(np.float32)
    actions = trajectory[1:].astype(np.float32)
    head = np.zeros((frames, image_px, image_px, 3), dtype=np.uint8)
    hand = np.zeros((frames, image_px, image_px, 3), dtype=np.uint8)
    column = int((target[0] + 1.0) / 2.0 * (image_px - 6))
    row = int((target[1] + 1.0) / 2.0 * (image_px - 6))
    for t in range(frames):
        shift = t * (image_px - 6) // max(frames, 1) // 4
        head[t, row : row + 6, column : column + 6] = (255, 64, 32)
        head[t, :, :, 2] = 40 + shift
        level = int(60 + 150 * t / max(frames - 1, 1))
        hand[t, :, :, 1] = level
        hand[t, : image_px // 2, :, 0] = int((target[2] + 1.0) * 100)
        hand[t, image_px // 2 :, :, 2] = int((target[3] + 1.0) * 100)
    return {
        HEAD_CAMERA_KEY: head,
        HAND_CAMERA_KEY: hand,
        "joint_pos_rad": joint_pos,
        "belt_speed_mps": np.full(frames, 0.1 + 0.01 * seed, dtype=np.float32),
        "object_track": np.tile(
            rng.normal(0.0, 0.1, len(TRACK_FIELDS)).astype(np.float32), (frames, 1)
        ),
        "actions": actions,
    }


def synthetic_episode(
    seed: int,
    frames: int = 20,
    *,
    source: str = "real",
    behavior: str | None = None,
    outcome: str = "success",
    world_config_id: str = "test",
    provenance: dict[str, Any] | None = None,
    image_px: int = IMAGE_PX,
) -> Episode:
    """Return :func:`make_episode`'s arrays as a dataset episode with this metadata.

    Args:
        seed: The arrays' seed (same seed, same arrays).
        frames: Number of frames (10 Hz).
        source: ``real`` or ``sim``.
        behavior: Behavior source; default ``demo`` for real episodes, else ``mimicgen``.
        outcome: The episode's outcome (``success``, ``failure``, ...).
        world_config_id: The world the episode was recorded in.
        provenance: Where a generated episode came from (e.g. its source demo).
        image_px: Side of the square camera images.

    """
    arrays = make_episode(seed, frames, image_px)
    metadata = EpisodeMetadata(
        source=source,  # type: ignore[arg-type]
        world_config_id=world_config_id,
        behavior_source=behavior or ("demo" if source == "real" else "mimicgen"),  # type: ignore[arg-type]
        task="pick_sort",
        object_type="cube",
        belt_speed_mps=0.1,
        outcome=outcome,  # type: ignore[arg-type]
        joint_names=JOINTS,
        action_names=JOINTS,
        control_rate_hz=10.0,
        belt_speed_source=BELT_SPEED_SOURCE,
        object_track_source=OBJECT_TRACK_SOURCE,
        object_track_fields=list(TRACK_FIELDS),
        provenance=provenance or {},
    )
    return Episode(
        metadata=metadata,
        timestamps_s=np.arange(frames) * 0.1,
        images={
            HEAD_CAMERA_KEY: arrays[HEAD_CAMERA_KEY],
            HAND_CAMERA_KEY: arrays[HAND_CAMERA_KEY],
        },
        joint_pos_rad=arrays["joint_pos_rad"],
        belt_speed_mps=arrays["belt_speed_mps"],
        actions=arrays["actions"],
        extra_obs={"object_track": arrays["object_track"]},
    )


def generated_episode(seed: int, frames: int, behavior: str = "mimicgen") -> Episode:
    """Return a generated episode of the nominal world that names the demo it came from.

    :func:`synthetic_episode` as ``sim`` data, with provenance ``source_demo`` (``demo_<seed>``)
    and ``subtask_boundaries`` (0, 3, ``frames``).
    """
    return synthetic_episode(
        seed,
        frames,
        source="sim",
        behavior=behavior,
        world_config_id="nominal",
        provenance={"source_demo": f"demo_{seed}", "subtask_boundaries": [0, 3, frames]},
    )


def write_episodes(path: Path, episodes: Iterable[Episode]) -> Path:
    """Write episodes to a new dataset file at ``path``; return ``path``."""
    with EpisodeWriter(path) as writer:
        for episode in episodes:
            writer.append(episode)
    return path


def write_hdf5(path: Path, source_kind: str, seeds: list[int], frames: int = 12) -> Path:
    """Write one :func:`synthetic_episode` per seed (project dataset format); return ``path``."""
    return write_episodes(path, (synthetic_episode(s, frames, source=source_kind) for s in seeds))


def write_robot_dataset(
    path: Path,
    source: str,
    seed: int,
    episodes: int = 2,
    *,
    frames: int = 10,
    image_px: int = 32,
    images: Literal["noise", "blocks"] = "noise",
    progress: bool = False,
) -> Path:
    """Write a dataset with the robot's 18 joints and both cameras; return ``path``.

    The joints drift a little around the robot's home pose; the object track has the four
    catalogue objects' columns. The defaults (10 frames of 32 px noise an episode) are enough to
    co-train and evaluate a policy on the simulated cell in a test.

    Args:
        path: The new dataset file.
        source: ``real`` or ``sim`` (behavior ``demo`` or ``planner``).
        seed: Seed of every array (same seed and arguments, same dataset).
        episodes: Number of episodes.
        frames: Frames per episode (10 Hz).
        image_px: Side of the square camera images.
        images: ``noise``, uniform random pixels; or ``blocks``, camera-like frames that
            compress well (a background of 8 × 8 random flat blocks with a white square moving
            across it), for datasets at paper scale.
        progress: Show a progress bar over the episodes.

    """
    from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
    from tqdm import tqdm

    from r2s2r_dataset import OBJECT_TRACK_KEY, TRACKER_SOURCE

    joints = list(ALL_JOINT_NAMES)
    fields = object_track_fields(["cube", "cylinder", "block", "sphere"])
    rng = np.random.default_rng(seed)
    home = np.array([HOME_POSITIONS[j] for j in joints], dtype=np.float32)
    with EpisodeWriter(path) as writer:
        for _ in tqdm(
            range(episodes), desc=f"writing {path.name}", unit="episode", disable=not progress
        ):
            drift = np.cumsum(rng.normal(0.0, 0.01, (frames + 1, len(joints))), axis=0)
            trajectory = (home + drift).astype(np.float32)
            writer.append(
                Episode(
                    metadata=EpisodeMetadata(
                        source=source,  # type: ignore[arg-type]
                        world_config_id="test",
                        behavior_source="demo" if source == "real" else "planner",
                        task="pick_sort",
                        object_type="cube",
                        belt_speed_mps=0.1,
                        outcome="success",
                        joint_names=joints,
                        action_names=joints,
                        control_rate_hz=10.0,
                        belt_speed_source=BELT_SPEED_SOURCE,
                        object_track_source=TRACKER_SOURCE,
                        object_track_fields=fields,
                    ),
                    timestamps_s=np.arange(frames) * 0.1,
                    images={
                        key: robot_images(rng, frames, image_px, images) for key in CAMERA_KEYS
                    },
                    joint_pos_rad=trajectory[:-1],
                    belt_speed_mps=np.full(frames, 0.1, dtype=np.float32),
                    actions=trajectory[1:],
                    extra_obs={
                        OBJECT_TRACK_KEY: rng.normal(0.0, 0.1, (frames, len(fields))).astype(
                            np.float32
                        )
                    },
                )
            )
    return path


def robot_images(
    rng: np.random.Generator, frames: int, image_px: int, kind: Literal["noise", "blocks"]
) -> np.ndarray:
    """Return one camera's frames (frames × px × px × 3, uint8) for :func:`write_robot_dataset`."""
    if kind == "noise":
        return rng.integers(0, 255, (frames, image_px, image_px, 3), dtype=np.uint8)
    low = rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)
    nearest = np.arange(image_px) * 8 // image_px  # nearest-neighbour upscaling
    stack = np.repeat(low[nearest][:, nearest][None], frames, axis=0)
    side, top = image_px // 8, image_px // 3
    for t in range(frames):
        column = t * (image_px - side) // frames
        stack[t, top : top + side, column : column + side] = 255
    return stack
