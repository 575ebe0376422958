"""Object-relative reach: labels from the description's kinematics, the correction, training."""

from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import observation as frame_observation
from policy_fixtures import tiny_config
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES, HOME_POSITIONS
from r2s2r_policy.checkpoint import load_checkpoint
from r2s2r_policy.models.reach import REACH_SCALE_M, ObjectRelativeReach
from r2s2r_policy.spec import PolicySpec
from r2s2r_policy.training import train
from r2s2r_testing.episodes import TRACK_FIELDS
from test_palm_frame import arm_episode, arm_source, palm_in_base

VISIBLE = TRACK_FIELDS.index("visible")
HOME = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])


def reach() -> ObjectRelativeReach:
    return ObjectRelativeReach(ALL_JOINT_NAMES, ALL_JOINT_NAMES, TRACK_FIELDS)


def arm_targets(seed: int, horizon: int = 4) -> np.ndarray:
    """``(H, J)`` joint targets near home (arm moved, hand as at home)."""
    rng = np.random.default_rng(seed)
    targets = np.repeat(HOME[None], horizon, axis=0)
    targets[:, : len(ARM_JOINT_NAMES)] += rng.uniform(-0.3, 0.3, (horizon, len(ARM_JOINT_NAMES)))
    return targets


def test_labels_are_the_label_palm_minus_the_object_and_masked_when_unseen() -> None:
    targets = arm_targets(1)
    track = np.zeros((2, len(TRACK_FIELDS)))
    track[:, 0:3] = [0.5, -0.2, 0.1]
    track[0, VISIBLE] = 1.0  # the second observation does not see the object
    labels, mask = reach().labels(
        torch.tensor(np.repeat(HOME[None], 2, axis=0)),
        torch.tensor(np.repeat(targets[None], 2, axis=0)),
        torch.tensor(track),
        torch.ones(2, len(targets), dtype=torch.bool),
    )
    expected = np.array([palm_in_base(row)[:3, 3] - track[0, 0:3] for row in targets])
    np.testing.assert_allclose(labels[0].numpy() * REACH_SCALE_M, expected, atol=1e-6)
    assert mask[0].all() and not mask[1].any()


def test_correction_moves_the_palm_to_the_object_plus_the_offset_and_nothing_else() -> None:
    targets = arm_targets(2)
    palm = np.array([palm_in_base(row)[:3, 3] for row in targets])
    track = np.zeros(len(TRACK_FIELDS))
    track[0:3] = [0.4, 0.1, 0.05]
    track[VISIBLE] = 1.0
    # Ask for each step's palm 4 cm beside where the joint head put it.
    wanted = palm + np.array([0.0, 0.04, -0.01])
    offsets = (wanted - track[0:3]) / REACH_SCALE_M
    # Distances well inside the full-correction range here (the blend has its own test).
    corrected = reach().correct(HOME, targets, track, offsets, near_m=10.0, far_m=20.0)
    reached = np.array([palm_in_base(row)[:3, 3] for row in corrected])
    np.testing.assert_allclose(reached, wanted, atol=1e-3)
    # The hand's targets are the joint head's; only the arm moved.
    hand = slice(len(ARM_JOINT_NAMES), None)
    np.testing.assert_array_equal(corrected[:, hand], targets[:, hand])
    assert np.abs(corrected - targets).max() > 0.01
    # Without a visible object the joint head's targets stand.
    track[VISIBLE] = 0.0
    np.testing.assert_array_equal(
        reach().correct(HOME, targets, track, offsets, near_m=10.0, far_m=20.0), targets
    )


def test_correction_is_bounded() -> None:
    targets = arm_targets(3)
    palm = np.array([palm_in_base(row)[:3, 3] for row in targets])
    track = np.zeros(len(TRACK_FIELDS))
    track[VISIBLE] = 1.0
    offsets = (palm + np.array([0.5, 0.0, 0.0]) - track[0:3]) / REACH_SCALE_M
    corrected = reach().correct(
        HOME, targets, track, offsets, max_correction_m=0.05, near_m=10.0, far_m=20.0
    )
    moved = np.array([palm_in_base(row)[:3, 3] for row in corrected]) - palm
    np.testing.assert_allclose(np.linalg.norm(moved, axis=1), 0.05, atol=2e-3)


def test_correction_is_full_near_the_object_and_none_far_from_it() -> None:
    targets = arm_targets(4, horizon=1)
    palm = palm_in_base(targets[0])[:3, 3]
    track = np.zeros(len(TRACK_FIELDS))
    track[VISIBLE] = 1.0
    shift = np.array([0.0, 0.02, 0.0])
    for distance_m, share in ((0.05, 1.0), (0.15, 0.5), (0.25, 0.0)):
        # The object straight below the palm's goal, ``distance_m`` away from it.
        goal = palm + shift
        track[0:3] = goal - np.array([0.0, 0.0, distance_m])
        offsets = ((goal - track[0:3]) / REACH_SCALE_M)[None]
        corrected = reach().correct(HOME, targets, track, offsets)
        moved = palm_in_base(corrected[0])[:3, 3] - palm
        np.testing.assert_allclose(moved, share * shift, atol=1e-3)


def test_reach_needs_the_arm_actions_and_the_visible_column() -> None:
    with pytest.raises(ValueError, match="shoulder_pan_joint"):
        ObjectRelativeReach(ALL_JOINT_NAMES, ALL_JOINT_NAMES[1:], TRACK_FIELDS)
    with pytest.raises(ValueError, match="'visible'"):
        PolicySpec(
            joint_names=list(ALL_JOINT_NAMES),
            action_names=list(ALL_JOINT_NAMES),
            object_track_fields=["x_m", "y_m", "z_m"],
            object_relative_reach=True,
        )


def test_policy_with_reach_trains_saves_and_corrects(tmp_path: Path) -> None:
    source = arm_source(3)
    config = tiny_config(steps=6, checkpoint_every_steps=6)
    config.policy.object_relative_reach = True
    result = train(config, tmp_path, sources={"real": source}, weights={"real": 1.0})
    assert result.checkpoint is not None and result.policy is not None
    policy = result.policy
    observation = frame_observation(arm_episode(0), 0)
    observation["object_track"][VISIBLE] = 1.0
    corrected = policy.predict_chunk(observation)
    loaded = load_checkpoint(result.checkpoint).policy
    assert loaded.spec.object_relative_reach
    np.testing.assert_allclose(loaded.predict_chunk(observation), corrected, atol=1e-5)
    # Visible: each step's palm is where the offsets say, or 15 cm toward it (the bound).
    batch = policy.observation_batch(observation)
    policy.eval()
    with torch.inference_mode():
        normalized, offsets = policy.predict_outputs(batch)
        joints_only = policy.unnormalize_actions(normalized)[0].numpy()
    assert offsets is not None
    goal = observation["object_track"][0:3] + REACH_SCALE_M * offsets[0].numpy()
    before = np.array([palm_in_base(row)[:3, 3] for row in joints_only])
    after = np.array([palm_in_base(row)[:3, 3] for row in corrected])
    distance = np.linalg.norm(goal - observation["object_track"][0:3], axis=1, keepdims=True)
    move = np.clip((0.2 - distance) / 0.1, 0.0, 1.0) * (goal - before)
    wanted = before + move * np.minimum(
        1.0, 0.15 / np.maximum(np.linalg.norm(move, axis=1, keepdims=True), 1e-12)
    )
    np.testing.assert_allclose(after, wanted, atol=2e-3)
    # Not visible: the joint head's chunk, uncorrected.
    hidden = dict(observation, object_track=observation["object_track"].copy())
    hidden["object_track"][VISIBLE] = 0.0
    with torch.inference_mode():
        hidden_joints = policy.unnormalize_actions(
            policy.predict_normalized(policy.observation_batch(hidden))
        )[0].numpy()
    np.testing.assert_allclose(policy.predict_chunk(hidden), hidden_joints, atol=1e-5)
