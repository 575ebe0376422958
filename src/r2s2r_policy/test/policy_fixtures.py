"""Tiny synthetic demonstration episodes for policy tests.

Each episode shows a bright square moving across the head image (its column encodes the
episode's target) and the hand image brightening as the arm approaches; the joint targets
move smoothly toward a target that only the images reveal, so a policy must read them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from r2s2r_policy.data import InMemoryEpisodeSource, ObservationSemantics
from r2s2r_policy.training import PolicyOptions, TrainConfig
from r2s2r_recorder.dataset import object_track_fields

JOINTS = ["arm_1", "arm_2", "hand_1", "hand_2"]
IMAGE_PX = 32
TRACK_FIELDS = object_track_fields(["cube", "sphere"])
SEMANTICS = ObservationSemantics("belt_speed", "object_tracker", tuple(TRACK_FIELDS))


def make_episode(seed: int, frames: int = 20, image_px: int = IMAGE_PX) -> dict[str, np.ndarray]:
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
        "head_camera_rgb": head,
        "hand_camera_rgb": hand,
        "joint_pos_rad": joint_pos,
        "belt_speed_mps": np.full(frames, 0.1 + 0.01 * seed, dtype=np.float32),
        "object_track": np.tile(
            rng.normal(0.0, 0.1, len(TRACK_FIELDS)).astype(np.float32), (frames, 1)
        ),
        "actions": actions,
    }


def make_source(
    name: str, seeds: list[int], frames: int = 20, drop: str | None = None
) -> InMemoryEpisodeSource:
    episodes = []
    for seed in seeds:
        episode = make_episode(seed, frames)
        if drop is not None:
            episode.pop(drop)
        episodes.append(episode)
    return InMemoryEpisodeSource(
        name, episodes, JOINTS, JOINTS, control_rate_hz=10.0, semantics=SEMANTICS
    )


def tiny_options(chunk_length: int = 4, random_shift_px: int = 0) -> PolicyOptions:
    return PolicyOptions.model_validate(
        {
            "image_height_px": IMAGE_PX,
            "image_width_px": IMAGE_PX,
            "chunk_length": chunk_length,
            "model": {
                "type": "conv_keypoint",
                "params": {
                    "conv_channels": [8, 16],
                    "conv_kernels": [3, 3],
                    "conv_strides": [2, 2],
                    "groupnorm_groups": 4,
                    "num_keypoints": 8,
                    "hidden_dims": [128, 128],
                    "random_shift_px": random_shift_px,
                },
            },
        }
    )


def tiny_config(**overrides: object) -> TrainConfig:
    data: dict[str, object] = {
        "policy": tiny_options().model_dump(),
        "seed": 3,
        "steps": 10,
        "batch_size": 8,
        "learning_rate": 3e-3,
        "warmup_steps": 0,
        "lr_schedule": "constant",
        "checkpoint_every_steps": 5,
        "num_threads": 1,
        "progress_bar": False,
    }
    data.update(overrides)
    return TrainConfig.model_validate(data)


def write_hdf5(path: Path, source_kind: str, seeds: list[int], frames: int = 12) -> Path:
    """Write episodes in the project's dataset format (r2s2r_recorder.dataset)."""
    from r2s2r_recorder.dataset import Episode, EpisodeMetadata, EpisodeWriter

    with EpisodeWriter(path) as writer:
        for seed in seeds:
            arrays = make_episode(seed, frames)
            meta = EpisodeMetadata(
                source=source_kind,  # type: ignore[arg-type]
                world_config_id="test",
                behavior_source="demo" if source_kind == "real" else "mimicgen",
                task="pick_sort",
                object_type="cube",
                belt_speed_mps=0.1,
                outcome="success",
                joint_names=JOINTS,
                action_names=JOINTS,
                control_rate_hz=10.0,
                belt_speed_source=SEMANTICS.belt_speed_source,
                object_track_source=SEMANTICS.object_track_source,
                object_track_fields=list(SEMANTICS.object_track_fields),
            )
            writer.append(
                Episode(
                    metadata=meta,
                    timestamps_s=np.arange(frames) * 0.1,
                    images={
                        "head_camera_rgb": arrays["head_camera_rgb"],
                        "hand_camera_rgb": arrays["hand_camera_rgb"],
                    },
                    joint_pos_rad=arrays["joint_pos_rad"],
                    belt_speed_mps=arrays["belt_speed_mps"],
                    actions=arrays["actions"],
                    extra_obs={"object_track": arrays["object_track"]},
                )
            )
    return path
