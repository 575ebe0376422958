"""Untrained (randomly initialised) policies for the robot: harness smoke tests and benchmarks.

An untrained policy with statistics centred on the robot's home pose commands small motions
around home: deterministic from its seed, safe, and exactly as expensive as a trained one of
the same size, which is what tests of the inference path and latency benchmarks need.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS

from r2s2r_dataset import ACTIONS_KEY, BELT_SPEED_KEY, JOINT_POS_KEY

from ..models import Policy, build_policy
from ..normalization import FeatureStats, NormalizationStats
from ..spec import DEFAULT_IMAGE_KEYS, ImageSpec, ModelConfig, PolicySpec

TINY_MODEL_PARAMS: dict[str, Any] = {
    "conv_channels": [8, 16],
    "conv_kernels": [3, 3],
    "conv_strides": [2, 2],
    "groupnorm_groups": 4,
    "num_keypoints": 8,
    "hidden_dims": [64, 64],
    "random_shift_px": 0,
}
"""Hyper-parameters of a tiny conv_keypoint model (fast tests)."""


def _feature(mean: np.ndarray, std: float) -> FeatureStats:
    return FeatureStats(
        count=100,
        mean=mean.tolist(),
        std=[std] * len(mean),
        min=(mean - 3 * std).tolist(),
        max=(mean + 3 * std).tolist(),
    )


def robot_policy_spec(
    image_px: int = 128,
    chunk_length: int = 12,
    control_rate_hz: float = 10.0,
    model_params: dict[str, Any] | None = None,
) -> PolicySpec:
    """Build a policy spec for this robot: both cameras, all 18 joints in and out, belt speed.

    Args:
        image_px: Square image size fed to the model.
        chunk_length: Action steps per chunk.
        control_rate_hz: Rate of the chunk's steps.
        model_params: conv_keypoint hyper-parameters (None: the model's defaults).

    """
    return PolicySpec(
        images=[
            ImageSpec(key=k, height_px=image_px, width_px=image_px) for k in DEFAULT_IMAGE_KEYS
        ],
        joint_names=list(ALL_JOINT_NAMES),
        action_names=list(ALL_JOINT_NAMES),
        chunk_length=chunk_length,
        control_rate_hz=control_rate_hz,
        model=ModelConfig(type="conv_keypoint", params=dict(model_params or {})),
    )


def home_stats(joint_std_rad: float = 0.05) -> NormalizationStats:
    """Statistics centred on :data:`HOME_POSITIONS` (joints and actions) and 0.1 m/s belt."""
    home = np.array([HOME_POSITIONS[name] for name in ALL_JOINT_NAMES])
    return NormalizationStats(
        features={
            JOINT_POS_KEY: _feature(home, joint_std_rad),
            ACTIONS_KEY: _feature(home, joint_std_rad),
            BELT_SPEED_KEY: _feature(np.array([0.1]), 0.02),
        }
    )


def untrained_policy(spec: PolicySpec, seed: int = 0, joint_std_rad: float = 0.05) -> Policy:
    """Build a randomly initialised policy (deterministic from ``seed``), in eval mode."""
    torch.manual_seed(seed)
    policy = build_policy(spec, home_stats(joint_std_rad))
    policy.eval()
    return policy
