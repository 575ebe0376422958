from pathlib import Path

import numpy as np
import pytest
import torch
from policy_fixtures import make_source, observation, tiny_config
from r2s2r_common.config import ConfigError
from r2s2r_policy.data.chunks import ChunkDataset, compute_normalization
from r2s2r_policy.models import build_policy, model_types
from r2s2r_policy.models.conv_keypoint import (
    STANDARDIZATION_MIN_STD,
    images_to_float,
    random_shift,
    standardize_images,
)
from r2s2r_policy.spec import ModelConfig
from r2s2r_policy.training import train
from r2s2r_policy.training_data import make_spec
from r2s2r_testing.episodes import IMAGE_PX, JOINTS, make_episode


def test_policy_overfits_tiny_dataset_and_reproduces_demo_actions(tmp_path: Path) -> None:
    source = make_source("real", [0, 1, 2], frames=20)
    config = tiny_config(steps=300, batch_size=16, checkpoint_every_steps=1000)
    result = train(config, tmp_path, sources={"real": source}, weights={"real": 1.0})
    losses = np.array(result.losses)
    assert losses[:5].mean() / losses[-10:].mean() > 10.0
    policy = result.policy
    assert policy is not None
    errors = []
    for seed in (0, 1, 2):
        episode = make_episode(seed, 20)
        for t in range(20):
            chunk = policy.predict_chunk(observation(episode, t))
            assert chunk.shape == (4, len(JOINTS)) and chunk.dtype == np.float32
            # Chunk step k is the target k + 1 steps after the observation.
            valid = min(4, 20 - t - 1)
            if valid > 0:
                targets = episode["actions"][t + 1 : t + 1 + valid]
                errors.append(np.abs(chunk[:valid] - targets).max())
    # Targets span about ±1 rad; a policy that ignored the images would be off by ~0.5 rad.
    assert float(np.max(errors)) < 0.15
    assert float(np.mean(errors)) < 0.06


def test_predict_chunk_rejects_wrong_image_size_and_missing_keys() -> None:
    source = make_source("real", [0])
    spec = make_spec(tiny_config().policy, source, 10.0)
    stats = compute_normalization([ChunkDataset(source, spec)], spec)
    policy = build_policy(spec, stats)
    obs = observation(make_episode(0), 0)
    assert policy.predict_chunk(obs).shape == (4, 4)
    with pytest.raises(ValueError, match=r"head_camera_rgb.*uint8 \(32, 32, 3\).*\(64, 64, 3\)"):
        policy.predict_chunk({**obs, "head_camera_rgb": np.zeros((64, 64, 3), np.uint8)})
    with pytest.raises(ValueError, match="joint_pos_rad"):
        policy.predict_chunk({**obs, "joint_pos_rad": np.zeros(3, np.float32)})
    missing = dict(obs)
    missing.pop("belt_speed_mps")
    with pytest.raises(ValueError, match="belt_speed_mps"):
        policy.predict_chunk(missing)
    # predict_chunk leaves the policy in the mode it found it.
    policy.train()
    policy.predict_chunk(obs)
    assert policy.training


def test_normalisation_round_trip_and_constant_dimension() -> None:
    source = make_source("real", [0, 1])
    spec = make_spec(tiny_config().policy, source, 10.0)
    stats = compute_normalization([ChunkDataset(source, spec)], spec)
    # Action statistics are over the training targets: every valid chunk step of every frame.
    targets = []
    for seed in (0, 1):
        actions = make_episode(seed)["actions"]
        for t in range(len(actions)):
            targets.append(actions[t + 1 : t + 1 + spec.chunk_length])
    all_targets = np.concatenate(targets)
    np.testing.assert_allclose(stats.features["actions"].mean, all_targets.mean(0), atol=1e-5)
    np.testing.assert_allclose(stats.features["actions"].std, all_targets.std(0), atol=1e-5)
    all_actions = np.concatenate([make_episode(s)["actions"] for s in (0, 1)])
    policy = build_policy(spec, stats)
    actions = torch.from_numpy(all_actions)
    normalized = policy.normalize_actions(actions)
    np.testing.assert_allclose(
        policy.normalize_actions(torch.from_numpy(all_targets)).mean(0).numpy(), 0.0, atol=1e-4
    )
    np.testing.assert_allclose(
        policy.unnormalize_actions(normalized).numpy(), all_actions, atol=1e-5
    )
    # Belt speed is constant within each episode but differs between them; a constant feature
    # gets the minimum scale instead of a division by zero.
    single = compute_normalization([ChunkDataset(make_source("real", [0]), spec)], spec)
    offset, scale = single.offset_scale("belt_speed_mps", "mean_std")
    assert scale[0] == pytest.approx(1e-3) and offset[0] == pytest.approx(0.1)


def test_model_registry_and_param_validation() -> None:
    assert "conv_keypoint" in model_types()
    source = make_source("real", [0])
    options = tiny_config().policy
    spec = make_spec(options, source, 10.0)
    stats = compute_normalization([ChunkDataset(source, spec)], spec)
    with pytest.raises(ValueError, match=r"model.type = 'resnet_huge': expected one of"):
        build_policy(spec.model_copy(update={"model": ModelConfig(type="resnet_huge")}), stats)
    bad = ModelConfig(type="conv_keypoint", params={"num_keypionts": 8})
    with pytest.raises(ConfigError, match="num_keypionts: unknown key"):
        build_policy(spec.model_copy(update={"model": bad}), stats)


def test_images_to_float_scales_to_the_model_range_in_channels_first_shape() -> None:
    images = torch.randint(0, 256, (4, IMAGE_PX, IMAGE_PX + 2, 3), dtype=torch.uint8)
    floats = images_to_float(images)
    assert floats.shape == (4, 3, IMAGE_PX, IMAGE_PX + 2) and floats.dtype == torch.float32
    expected = images.permute(0, 3, 1, 2).float() / 255.0 - 0.5
    torch.testing.assert_close(floats, expected)
    assert torch.equal(images_to_float(images, jitter=0.0), floats)


def test_photometric_jitter_scales_brightness_then_contrast_per_image() -> None:
    images = torch.randint(64, 192, (64, IMAGE_PX, IMAGE_PX, 3), dtype=torch.uint8)
    torch.manual_seed(3)
    jittered = images_to_float(images, jitter=0.4)
    torch.manual_seed(3)
    factors = 1.0 + 0.4 * (2.0 * torch.rand(2, 64, 1, 1, 1) - 1.0)  # the same draw
    unit = images.permute(0, 3, 1, 2).float() / 255.0 * factors[0]
    mean = unit.mean(dim=(1, 2, 3), keepdim=True)
    expected = ((unit - mean) * factors[1] + mean).clamp(0.0, 1.0) - 0.5
    torch.testing.assert_close(jittered, expected, atol=1e-5, rtol=0.0)
    assert float(jittered.min()) >= -0.5 and float(jittered.max()) <= 0.5
    brightness = (jittered + 0.5).mean(dim=(1, 2, 3)) / (unit / factors[0]).mean(dim=(1, 2, 3))
    assert float(brightness.max() - brightness.min()) > 0.3  # factors differ per image


def test_random_shift_moves_content_within_bounds() -> None:
    torch.manual_seed(0)
    images = torch.zeros(16, IMAGE_PX, IMAGE_PX, 3, dtype=torch.uint8)
    images[:, 14:18, 14:18, :] = 255
    shifted = random_shift(images, 4)
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    centers = []
    for image in shifted:
        rows, cols = torch.nonzero(image[..., 0] > 127, as_tuple=True)
        centers.append((rows.float().mean().item(), cols.float().mean().item()))
    offsets = np.array(centers) - 15.5
    assert np.abs(offsets).max() <= 4.0
    assert len({tuple(o) for o in offsets}) > 4  # shifts differ per image


def test_random_shift_is_an_edge_padded_crop_per_image() -> None:
    images = torch.randint(0, 256, (8, 12, 10, 3), dtype=torch.uint8)
    torch.manual_seed(5)
    shifted = random_shift(images, 3)
    torch.manual_seed(5)
    offsets = torch.randint(0, 7, (8, 2))  # the same draw: (dy, dx) into the padded image
    channels_first = images.permute(0, 3, 1, 2).float()
    padded = torch.nn.functional.pad(channels_first, (3, 3, 3, 3), mode="replicate")
    for i, (dy, dx) in enumerate(offsets.tolist()):
        crop = padded[i, :, dy : dy + 12, dx : dx + 10].permute(1, 2, 0)
        torch.testing.assert_close(shifted[i].float(), crop)


def test_shared_encoder_variant_predicts_chunks() -> None:
    source = make_source("real", [0])
    options = tiny_config().policy
    params = {**options.model.params, "shared_encoder": True}
    spec = make_spec(options, source, 10.0)
    spec = spec.model_copy(update={"model": ModelConfig(type="conv_keypoint", params=params)})
    stats = compute_normalization([ChunkDataset(source, spec)], spec)
    policy = build_policy(spec, stats)
    assert len(policy.encoders) == 1
    chunk = policy.predict_chunk(observation(make_episode(0), 2))
    assert chunk.shape == (4, 4) and np.isfinite(chunk).all()


def test_standardize_images_removes_gain_and_offset_per_image() -> None:
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(3, 3, 8, 10, generator=generator) - 0.5
    standardized = standardize_images(images)
    torch.testing.assert_close(standardized.mean(dim=(1, 2, 3)), torch.zeros(3), atol=1e-6, rtol=0)
    torch.testing.assert_close(standardized.std(dim=(1, 2, 3)), torch.ones(3))
    # Colour ratios are kept: one mean and deviation over all channels, not one per channel.
    reference = (images - images.mean(dim=(1, 2, 3), keepdim=True)) / images.std(
        dim=(1, 2, 3), keepdim=True
    )
    torch.testing.assert_close(standardized, reference)
    # Each image on its own: a different gain and offset per image gives the same result.
    gains = torch.tensor([0.3, 1.0, 2.5]).view(3, 1, 1, 1)
    offsets = torch.tensor([-0.2, 0.0, 0.1]).view(3, 1, 1, 1)
    torch.testing.assert_close(standardize_images(images * gains + offsets), standardized)
    # A uniform image does not blow up its rounding noise.
    flat = torch.full((1, 3, 4, 4), 0.2) + 1e-4 * torch.rand(1, 3, 4, 4, generator=generator)
    assert standardize_images(flat).abs().max() <= 1e-4 / STANDARDIZATION_MIN_STD


def test_image_standardization_makes_the_policy_see_through_dimmer_light() -> None:
    source = make_source("real", [0])
    options = tiny_config().policy
    chunks = {}
    for standardize in (False, True):
        params = {**options.model.params, "image_standardization": standardize}
        spec = make_spec(options, source, 10.0)
        spec = spec.model_copy(update={"model": ModelConfig(type="conv_keypoint", params=params)})
        stats = compute_normalization([ChunkDataset(source, spec)], spec)
        torch.manual_seed(0)
        policy = build_policy(spec, stats)
        obs = observation(make_episode(0), 2)
        # The same scene under a third of the light (as the twin's lighting shift renders it),
        # in the camera's 8 bits.
        dim = {
            key: (value.astype(np.float32) / 3.0).round().astype(np.uint8)
            if key.endswith("_rgb")
            else value
            for key, value in obs.items()
        }
        chunks[standardize] = (policy.predict_chunk(obs), policy.predict_chunk(dim))
    plain, plain_dim = chunks[False]
    standardized, standardized_dim = chunks[True]
    plain_change = float(np.abs(plain - plain_dim).max())
    standardized_change = float(np.abs(standardized - standardized_dim).max())
    # Only the 8-bit rounding of the dimmed image remains with standardisation.
    assert standardized_change < 0.2 * plain_change
