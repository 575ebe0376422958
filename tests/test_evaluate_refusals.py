"""``r2s2r evaluate`` refuses up front, in one line, what would fail or lie later (issue 36).

An output folder it cannot write (before the first trial: no trial run and lost), a checkpoint
of another joint count (naming the checkpoint and the field), a checkpoint whose config.yaml was
edited after saving (two joints swapped: the binding of config and weights).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from click.testing import CliRunner, Result
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_policy.checkpoint import save_checkpoint
from r2s2r_policy.evaluation.baseline import (
    TINY_MODEL_PARAMS,
    home_stats,
    robot_policy_spec,
    untrained_policy,
)
from r2s2r_policy.models import build_policy

from r2s2r.cli.evaluate import evaluate_command


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=3)
    return save_checkpoint(tmp_path_factory.mktemp("evaluate") / "ckpt", policy)


def evaluate(checkpoint: Path, out: Path) -> Result:
    return CliRunner().invoke(
        evaluate_command,
        [str(checkpoint), "--in-process", "--trials", "nominal=1", "--out", str(out)],
    )


def one_line(result: Result) -> str:
    return " ".join(result.output.split())


def test_an_output_folder_under_a_file_is_refused_before_any_trial(
    checkpoint: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = evaluate(checkpoint, blocker / "out")
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and "cannot write the report there" in one_line(result)
    assert "evaluating" not in result.output  # nothing loaded, no trial run


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_output_folder_is_refused_before_any_trial(
    checkpoint: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = evaluate(checkpoint, folder)
    finally:
        folder.chmod(0o755)
    assert result.exit_code == 2, result.output
    assert "cannot write the report there" in one_line(result)
    assert "evaluating" not in result.output


def test_a_checkpoint_of_another_joint_count_is_refused_naming_it(tmp_path: Path) -> None:
    names = list(ALL_JOINT_NAMES)[:-1]
    spec = robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS).model_copy(
        update={"joint_names": names, "action_names": names}
    )
    stats = home_stats()
    features = {
        key: value.model_copy(update={"mean": list(value.mean)[:-1], "std": list(value.std)[:-1]})
        if key != "belt_speed_mps"
        else value
        for key, value in stats.features.items()
    }
    torch.manual_seed(0)
    policy = build_policy(spec, stats.model_copy(update={"features": features}))
    path = save_checkpoint(tmp_path / "ckpt17", policy)
    result = evaluate(path, tmp_path / "out")
    assert result.exit_code == 1, result.output  # a ClickException: `r2s2r` exits 2
    text = one_line(result)
    assert f"checkpoint {path}: spec.joint_names: 17 joints, the cell has 18" in text, text
    assert "ring_dip_joint" in text and "internal error" not in text
    assert not (tmp_path / "out" / "evaluation.json").exists()


def test_a_checkpoint_with_two_joints_swapped_in_its_config_is_refused(
    checkpoint: Path, tmp_path: Path
) -> None:
    path = tmp_path / "swapped"
    shutil.copytree(checkpoint, path)
    config = yaml.safe_load((path / "config.yaml").read_text())
    joints = config["spec"]["joint_names"]
    joints[0], joints[1] = joints[1], joints[0]
    (path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = evaluate(path, tmp_path / "out")
    assert result.exit_code != 0
    assert isinstance(result.exception, ValueError)  # CheckpointError: one line in `r2s2r`
    message = str(result.exception)
    assert f"checkpoint {path}: config.yaml spec.joint_names[0]" in message, message
    assert "\n" not in message
