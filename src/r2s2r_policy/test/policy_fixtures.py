"""Policy helpers for the policy tests: in-memory sources, tiny policy and training configs.

The episodes themselves come from the workspace's one synthetic-episode factory,
:mod:`r2s2r_testing.episodes` (a bright square whose column encodes the episode's target, joint
targets that only the images reveal).
"""

from __future__ import annotations

import numpy as np
from r2s2r_policy.data.sources import InMemoryEpisodeSource, ObservationSemantics
from r2s2r_policy.training_config import PolicyOptions, TrainConfig
from r2s2r_testing.episodes import (
    BELT_SPEED_SOURCE,
    IMAGE_PX,
    JOINTS,
    OBJECT_TRACK_SOURCE,
    TRACK_FIELDS,
    make_episode,
)

SEMANTICS = ObservationSemantics(BELT_SPEED_SOURCE, OBJECT_TRACK_SOURCE, tuple(TRACK_FIELDS))


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


def observation(episode: dict[str, np.ndarray], t: int) -> dict[str, np.ndarray]:
    """The policy's observation of frame ``t`` of an episode (its own copy of the track row)."""
    return {
        "head_camera_rgb": episode["head_camera_rgb"][t],
        "hand_camera_rgb": episode["hand_camera_rgb"][t],
        "joint_pos_rad": episode["joint_pos_rad"][t],
        "belt_speed_mps": episode["belt_speed_mps"][t : t + 1],
        "object_track": episode["object_track"][t].copy(),
    }


def tiny_options(
    chunk_length: int = 4, random_shift_px: int = 0, **model_params: object
) -> PolicyOptions:
    """A tiny conv-keypoint policy; ``model_params`` add to or replace its model's params."""
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
                    **model_params,
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
