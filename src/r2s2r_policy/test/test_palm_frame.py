"""The palm/object input: kinematics against the description, geometry, spec and training."""

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import SEMANTICS, tiny_config
from policy_fixtures import observation as frame_observation
from r2s2r_description.cell import NOMINAL_LAYOUT, build_description
from r2s2r_description.model import forward_kinematics
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.checkpoint import load_checkpoint
from r2s2r_policy.data.chunks import ChunkDataset, compute_normalization
from r2s2r_policy.data.sources import InMemoryEpisodeSource
from r2s2r_policy.models import build_policy
from r2s2r_policy.models.palm_frame import PALM_OBJECT_FIELDS, PalmObjectFeatures
from r2s2r_policy.spec import PALM_OBJECT_DIM, PALM_OBJECT_KEY, PolicySpec
from r2s2r_policy.training import train
from r2s2r_policy.training_data import make_spec
from r2s2r_testing.episodes import IMAGE_PX, TRACK_FIELDS


def palm_in_base(joint_pos: np.ndarray) -> np.ndarray:
    poses = forward_kinematics(
        build_description(NOMINAL_LAYOUT), dict(zip(ALL_JOINT_NAMES, joint_pos, strict=True))
    )
    return np.linalg.inv(poses["base_link"]) @ poses["palm_link"]


def test_palm_pose_matches_the_description_forward_kinematics() -> None:
    features = PalmObjectFeatures(ALL_JOINT_NAMES)
    rng = np.random.default_rng(4)
    joints = rng.uniform(-2.5, 2.5, size=(6, len(ALL_JOINT_NAMES)))
    poses = features.palm_pose(torch.tensor(joints, dtype=torch.float64)).numpy()
    for row, pose in zip(joints, poses, strict=True):
        np.testing.assert_allclose(pose, palm_in_base(row), atol=1e-6)
    # Joint order of the input does not matter; names do.
    shuffled = list(reversed(ALL_JOINT_NAMES))
    reordered = PalmObjectFeatures(shuffled).palm_pose(
        torch.tensor(joints[:, ::-1].copy(), dtype=torch.float64)
    )
    np.testing.assert_allclose(reordered.numpy(), poses, atol=1e-9)


def test_object_relative_to_the_palm_in_both_frames() -> None:
    features = PalmObjectFeatures(ALL_JOINT_NAMES)
    home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])
    pose = palm_in_base(home)
    # An object 0.1 m along the palm normal, moving along the palm's x axis at 0.2 m/s.
    track = np.zeros(len(TRACK_FIELDS))
    track[0:3] = pose[:3, 3] + 0.1 * pose[:3, 2]
    track[3:6] = 0.2 * pose[:3, 0]
    out = features(
        torch.tensor(home[None], dtype=torch.float64), torch.tensor(track[None])
    ).numpy()[0]
    assert out.shape == (len(PALM_OBJECT_FIELDS),) == (PALM_OBJECT_DIM,)
    np.testing.assert_allclose(out[0:3], pose[:3, 3], atol=1e-6)
    np.testing.assert_allclose(out[3:6], 0.1 * pose[:3, 2], atol=1e-6)
    np.testing.assert_allclose(out[6:9], [0.0, 0.0, 0.1], atol=1e-6)
    np.testing.assert_allclose(out[9:12], [0.2, 0.0, 0.0], atol=1e-6)


def test_missing_arm_joint_and_missing_track_are_refused() -> None:
    with pytest.raises(ValueError, match="elbow_joint"):
        PalmObjectFeatures([n for n in ALL_JOINT_NAMES if n != "elbow_joint"])
    with pytest.raises(ValueError, match="palm_object_features needs the tracked-object"):
        PolicySpec(
            joint_names=list(ALL_JOINT_NAMES),
            action_names=list(ALL_JOINT_NAMES),
            palm_object_features=True,
        )


def arm_episode(seed: int, frames: int = 16) -> dict[str, np.ndarray]:
    """An episode whose arm reaches towards a tracked object (real joint names)."""
    rng = np.random.default_rng(seed)
    home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES], dtype=np.float32)
    target = home.copy()
    target[: len(ARM_JOINT_NAMES)] += rng.uniform(-0.4, 0.4, len(ARM_JOINT_NAMES))
    phase = np.linspace(0.0, 1.0, frames + 1)[:, None]
    trajectory = (home + (target - home) * phase).astype(np.float32)
    track = np.zeros((frames, len(TRACK_FIELDS)), dtype=np.float32)
    track[:, 0:3] = palm_in_base(target)[:3, 3]
    track[:, -3] = 1.0  # has_track
    return {
        "head_camera_rgb": rng.integers(0, 255, (frames, IMAGE_PX, IMAGE_PX, 3), dtype=np.uint8),
        "hand_camera_rgb": rng.integers(0, 255, (frames, IMAGE_PX, IMAGE_PX, 3), dtype=np.uint8),
        "joint_pos_rad": trajectory[:-1],
        "belt_speed_mps": np.full(frames, 0.1, dtype=np.float32),
        "object_track": track,
        "actions": trajectory[1:],
    }


def arm_source(episodes: int) -> InMemoryEpisodeSource:
    """Episodes of :func:`arm_episode` as a real source with the tracker's semantics."""
    return InMemoryEpisodeSource(
        "real",
        [arm_episode(seed) for seed in range(episodes)],
        ALL_JOINT_NAMES,
        ALL_JOINT_NAMES,
        control_rate_hz=10.0,
        semantics=SEMANTICS,
    )


def test_policy_with_palm_features_trains_saves_and_predicts(tmp_path: Path) -> None:
    source = arm_source(3)
    config = tiny_config(steps=6, checkpoint_every_steps=6)
    config.policy.palm_object_features = True
    spec = make_spec(config.policy, source, 10.0)
    assert spec.state_dim == len(ALL_JOINT_NAMES) + 1 + len(TRACK_FIELDS) + PALM_OBJECT_DIM
    result = train(config, tmp_path, sources={"real": source}, weights={"real": 1.0})
    assert result.checkpoint is not None and result.policy is not None
    stats = result.policy.stats.features[PALM_OBJECT_KEY]
    # The statistics are the features' own: the palm's x position varies with the arm.
    assert len(stats.mean) == PALM_OBJECT_DIM and stats.std[0] > 1e-3
    observation = frame_observation(arm_episode(0), 0)
    expected = result.policy.predict_chunk(observation)
    loaded = load_checkpoint(result.checkpoint).policy
    assert loaded.spec.palm_object_features
    np.testing.assert_allclose(loaded.predict_chunk(observation), expected, atol=1e-6)


def test_state_noise_moves_the_geometry_with_the_noisy_joints() -> None:
    """Noise perturbs the measured joints; the palm/object input is that perturbed arm's."""
    source = arm_source(2)
    options = tiny_config().policy
    options.palm_object_features = True
    spec = make_spec(options, source, 10.0)
    dataset = ChunkDataset(source, spec)
    policy = build_policy(spec, compute_normalization([dataset], spec))
    samples = [dataset[i] for i in range(4)]
    batch = {k: torch.as_tensor(np.stack([s[k] for s in samples])) for k in samples[0]}
    torch.manual_seed(0)
    noisy = policy.normalized_state(batch, noise_std=0.5)
    clean = policy.normalized_state(batch)
    state = noisy * policy.state_scale + policy.state_offset
    joints = len(ALL_JOINT_NAMES)
    measured = joints + 1 + len(TRACK_FIELDS)
    assert not torch.allclose(noisy[:, :joints], clean[:, :joints])
    assert policy.palm_features is not None
    expected = policy.palm_features(state[:, :joints], state[:, joints + 1 : measured])
    torch.testing.assert_close(state[:, measured:], expected, atol=1e-4, rtol=1e-4)
