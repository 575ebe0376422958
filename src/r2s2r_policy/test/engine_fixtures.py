"""What the inference-engine tests share: home posture, a stepped clock, a tiny policy, inputs."""

from __future__ import annotations

import numpy as np
import torch
from r2s2r_description.robot import ALL_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.evaluation.baseline import TINY_MODEL_PARAMS, robot_policy_spec, untrained_policy
from r2s2r_policy.inference.engine import InferenceEngine
from r2s2r_policy.models import Policy

HOME = np.array([HOME_POSITIONS[name] for name in ALL_JOINT_NAMES])


class FakeClock:
    """The engine's clock, moved by the test."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def tiny_policy() -> Policy:
    """An untrained 32 px policy with 4-step chunks at 10 Hz, on one thread."""
    torch.set_num_threads(1)
    return untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=1)


def feed(engine: InferenceEngine, positions: np.ndarray = HOME, seed: int = 0) -> None:
    """Give the engine fresh camera images, joint positions and a belt speed."""
    rng = np.random.default_rng(seed)
    for key in engine.spec.image_keys:
        engine.observe_image(key, rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    engine.observe_joints(list(ALL_JOINT_NAMES), positions.tolist())
    engine.observe_belt_speed(0.1)
