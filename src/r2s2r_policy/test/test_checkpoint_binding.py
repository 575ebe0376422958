"""Checkpoints bind config.yaml to their weights (issue 36, bad 6 and the weak checkpoint cases).

Fault injection on a saved checkpoint: two joints swapped in config.yaml, an image size or a
joint count edited there, changed statistics, a changed weight. Each is refused in one line
naming the checkpoint and what differs; a checkpoint written before the binding still loads
(with one warning) and its shape mismatches are named by tensor and field, not in torch's words.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from r2s2r_policy.checkpoint import (
    CONFIG_FILE,
    MODEL_FILE,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    weights_metadata,
)
from r2s2r_policy.evaluation.baseline import (
    TINY_MODEL_PARAMS,
    robot_policy_spec,
    untrained_policy,
)
from safetensors.torch import load_file, save_file


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    return save_checkpoint(tmp_path_factory.mktemp("binding") / "ckpt", policy)


def copy_of(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ckpt"
    shutil.copytree(saved, target)
    return target


def edit_config(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load((path / CONFIG_FILE).read_text())
    edit(data)
    (path / CONFIG_FILE).write_text(yaml.safe_dump(data, sort_keys=False))


def unbind(path: Path) -> None:
    """Make a checkpoint as written before the binding: no integrity, no weights metadata."""
    edit_config(path, lambda data: data.pop("integrity"))
    save_file(load_file(str(path / MODEL_FILE)), str(path / MODEL_FILE))


def swap_joints(data: dict[str, Any]) -> None:
    joints = data["spec"]["joint_names"]
    joints[0], joints[1] = joints[1], joints[0]


def image_size_64(data: dict[str, Any]) -> None:
    for image in data["spec"]["images"]:
        image["height_px"] = image["width_px"] = 64


def drop_a_joint(data: dict[str, Any]) -> None:
    data["spec"]["joint_names"] = data["spec"]["joint_names"][:-1]


def refused(path: Path) -> str:
    with pytest.raises(CheckpointError) as raised:
        load_checkpoint(path)
    message = str(raised.value)
    assert "\n" not in message, message
    assert str(path) in message, message
    return message


def test_a_saved_checkpoint_carries_its_binding_and_loads(saved: Path) -> None:
    config = yaml.safe_load((saved / CONFIG_FILE).read_text())
    assert len(config["integrity"]["weights_sha256"]) == 64
    metadata = weights_metadata((saved / MODEL_FILE).read_bytes())
    assert set(metadata) == {"r2s2r_spec", "r2s2r_normalization_sha256"}
    assert load_checkpoint(saved).config.integrity is not None


def test_the_binding_leaves_the_weights_unchanged(saved: Path, tmp_path: Path) -> None:
    """The tensors are what the policy held: metadata is the header's, not the weights'."""
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    stored = load_file(str(saved / MODEL_FILE))
    for name, tensor in policy.state_dict().items():
        assert torch.equal(stored[name], tensor.cpu()), name


def test_swapped_joints_in_config_are_refused(saved: Path, tmp_path: Path) -> None:
    path = copy_of(saved, tmp_path)
    edit_config(path, swap_joints)
    message = refused(path)
    assert re.search(
        r"config\.yaml spec\.joint_names\[0\] = 'shoulder_lift_joint', the weights were saved "
        r"with 'shoulder_pan_joint': config\.yaml was edited after saving",
        message,
    ), message


def test_an_edited_weight_is_refused(saved: Path, tmp_path: Path) -> None:
    path = copy_of(saved, tmp_path)
    data = bytearray((path / MODEL_FILE).read_bytes())
    data[-5] ^= 0x40
    (path / MODEL_FILE).write_bytes(bytes(data))
    message = refused(path)
    assert "model.safetensors (sha256" in message and "the weights file was edited" in message


def test_edited_statistics_are_refused(saved: Path, tmp_path: Path) -> None:
    path = copy_of(saved, tmp_path)

    def shift(data: dict[str, Any]) -> None:
        feature = next(iter(data["normalization"]["features"].values()))
        feature["mean"][0] += 0.1

    edit_config(path, shift)
    assert "config.yaml normalization is not the statistics" in refused(path)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (image_size_64, r"spec\.images\[0\]\.height_px = 64, the weights were saved with 32"),
        (drop_a_joint, r"spec\.joint_names: 17 entries, the weights were saved with 18"),
    ],
    ids=["image size", "joint count"],
)
def test_another_image_size_or_joint_count_in_config_is_refused(
    saved: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None], expected: str
) -> None:
    path = copy_of(saved, tmp_path)
    edit_config(path, edit)
    message = refused(path)
    assert re.search(expected, message), message


def test_half_a_binding_is_refused(saved: Path, tmp_path: Path) -> None:
    path = copy_of(saved, tmp_path)
    edit_config(path, lambda data: data.pop("integrity"))
    assert "config.yaml lacks integrity" in refused(path)


def test_a_checkpoint_from_before_the_binding_loads_with_one_warning(
    saved: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = copy_of(saved, tmp_path)
    unbind(path)
    with caplog.at_level(logging.WARNING, logger="r2s2r_policy.checkpoint"):
        load_checkpoint(path)
        load_checkpoint(path)
    warnings = [r.getMessage() for r in caplog.records if "before checkpoints" in r.getMessage()]
    assert len(warnings) == 1 and str(path) in warnings[0]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            image_size_64,
            r"tensor encoders\.head_camera_rgb\.keypoints\.grid has shape \[64, 2\], "
            r"config\.yaml's spec builds \[256, 2\]: the image size of head_camera_rgb "
            r"\(spec\.images\)",
        ),
        (drop_a_joint, r"config\.yaml: normali[sz]ation: state statistics have 19 dims, spec"),
    ],
    ids=["image size", "joint count"],
)
def test_an_unbound_checkpoint_that_does_not_fit_its_weights_is_named(
    saved: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None], expected: str
) -> None:
    path = copy_of(saved, tmp_path)
    unbind(path)
    edit_config(path, edit)
    message = refused(path)
    assert re.search(expected, message), message
    assert "Error(s) in loading state_dict" not in message
