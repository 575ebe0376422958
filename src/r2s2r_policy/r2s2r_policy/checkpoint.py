"""Policy checkpoints: ``model.safetensors`` + ``config.yaml`` (+ ``training_state.pt``).

A checkpoint is a directory:

- ``model.safetensors``: the model's parameters (and persistent buffers);
- ``config.yaml``: format version, the :class:`~r2s2r_policy.spec.PolicySpec`, the
  :class:`~r2s2r_policy.normalization.NormalizationStats` and training metadata (step, seed,
  training config, rank that wrote it);
- ``training_state.pt`` (training runs only): optimizer state, to resume.

Directories are written under a temporary name and renamed when complete, so a crash never
leaves a half-written checkpoint that :func:`latest_checkpoint` would pick.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel, dump_yaml, parse_config, read_yaml
from safetensors.torch import load_file, save_file

from .models import Policy, build_policy
from .normalization import NormalizationStats
from .spec import PolicySpec, RobotSpec, SpecMismatchError, spec_mismatches

CHECKPOINT_FORMAT_VERSION = 2
"""2: chunk step k is the target k + 1 control steps after the observation (version 1 trained
on the target in force at the observation, which traps a closed loop at its start)."""
MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.yaml"
TRAINING_STATE_FILE = "training_state.pt"
CHECKPOINT_PREFIX = "step_"


class CheckpointError(ValueError):
    """A checkpoint directory is missing, incomplete or unreadable."""


class CheckpointConfig(ConfigModel):
    """Contents of a checkpoint's ``config.yaml``."""

    format_version: int = Field(
        default=CHECKPOINT_FORMAT_VERSION, ge=1, description="Checkpoint format version."
    )
    spec: PolicySpec = Field(description="Policy inputs/outputs and model choice.")
    normalization: NormalizationStats = Field(description="State and action statistics.")
    training: dict[str, Any] = Field(
        default_factory=dict, description="Training metadata: step, seed, config, writer rank."
    )


@dataclass
class LoadedCheckpoint:
    """A loaded checkpoint.

    Attributes:
        policy: The policy in eval mode.
        config: The parsed ``config.yaml``.
        path: Checkpoint directory.

    """

    policy: Policy
    config: CheckpointConfig
    path: Path


def save_checkpoint(
    directory: str | Path,
    policy: Policy,
    training: dict[str, Any] | None = None,
    training_state: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint directory atomically (replacing an existing one of the same name).

    Args:
        directory: Checkpoint directory to create.
        policy: The policy (its spec and statistics go into config.yaml).
        training: Metadata for config.yaml (JSON-friendly values).
        training_state: Optimizer state etc., saved with ``torch.save`` when given.

    Returns:
        The checkpoint directory.

    """
    target = Path(directory)
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    # On the CPU whatever the training device: a checkpoint loads on any machine.
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in policy.state_dict().items()}
    save_file(tensors, str(tmp / MODEL_FILE))
    config = CheckpointConfig(
        spec=policy.spec, normalization=policy.stats, training=dict(training or {})
    )
    dump_yaml(config, tmp / CONFIG_FILE)
    if training_state is not None:
        torch.save(training_state, tmp / TRAINING_STATE_FILE)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def read_checkpoint_config(directory: str | Path) -> CheckpointConfig:
    """Read and validate a checkpoint's ``config.yaml``.

    Raises:
        CheckpointError: If files are missing or the config is invalid.

    """
    path = Path(directory)
    for name in (MODEL_FILE, CONFIG_FILE):
        if not (path / name).is_file():
            raise CheckpointError(
                f"{path}: not a policy checkpoint (missing {name}); give a checkpoint "
                "directory such as <run>/checkpoints/step_NNNNNNNN"
            )
    try:
        config = parse_config(
            CheckpointConfig, read_yaml(path / CONFIG_FILE), str(path / CONFIG_FILE)
        )
    except ConfigError as error:
        raise CheckpointError(str(error)) from None
    if config.format_version != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(
            f"{path / CONFIG_FILE}: format_version = {config.format_version}, "
            f"expected {CHECKPOINT_FORMAT_VERSION} (version 1 policies were trained on the "
            "target in force at each observation and cannot be executed correctly: retrain)"
        )
    return config


def load_checkpoint(directory: str | Path, expected: RobotSpec | None = None) -> LoadedCheckpoint:
    """Load a checkpoint, refusing it when its spec does not match the robot.

    The spec is checked before any weight is read.

    Args:
        directory: Checkpoint directory.
        expected: What the robot offers; None skips the check (offline analysis).

    Returns:
        The policy (eval mode) with its config.

    Raises:
        SpecMismatchError: Listing every mismatch with ``expected``.
        CheckpointError: If the checkpoint is incomplete or its weights do not fit the model.

    """
    path = Path(directory)
    config = read_checkpoint_config(path)
    if expected is not None:
        mismatches = spec_mismatches(config.spec, expected)
        if mismatches:
            raise SpecMismatchError(mismatches, context=f"checkpoint {path}")
    policy = build_policy(config.spec, config.normalization)
    state = read_weights(path)
    try:
        policy.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise CheckpointError(
            f"{path / MODEL_FILE}: weights do not fit the model: {error}"
        ) from None
    policy.eval()
    return LoadedCheckpoint(policy=policy, config=config, path=path)


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Read a checkpoint's ``model.safetensors``.

    Raises:
        CheckpointError: If the file is missing or not a readable safetensors file.

    """
    path = Path(directory) / MODEL_FILE
    if not path.is_file():
        raise CheckpointError(f"{path.parent}: not a policy checkpoint (missing {MODEL_FILE})")
    try:
        return load_file(str(path))
    except Exception as error:  # safetensors raises its own SafetensorError
        raise CheckpointError(
            f"{path}: not a readable safetensors file ({error}); the checkpoint is damaged: "
            "use another checkpoint or train again"
        ) from None


def load_training_state(directory: str | Path) -> dict[str, Any]:
    """Read ``training_state.pt`` of a checkpoint.

    Raises:
        CheckpointError: If the file is missing or unreadable.

    """
    path = Path(directory) / TRAINING_STATE_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (checkpoint was not written by a training run)")
    try:
        state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises RuntimeError, pickle errors, EOFError, ...
        raise CheckpointError(f"{path}: unreadable ({type(error).__name__}: {error})") from None
    return state


def check_resumable(directory: str | Path) -> None:
    """Check that a training checkpoint can be resumed from: config, weights, training state.

    Raises:
        CheckpointError: Naming the file that is missing or damaged.

    """
    config = read_checkpoint_config(directory)
    if "step" not in config.training:
        raise CheckpointError(f"{Path(directory) / CONFIG_FILE}: training.step missing")
    read_weights(directory)
    load_training_state(directory)


def newest_intact_checkpoint(run_dir: str | Path) -> tuple[Path | None, list[str]]:
    """Return the newest checkpoint of a run that can be resumed, and why newer ones cannot.

    Returns:
        ``(checkpoint or None, one line per damaged newer checkpoint)``.

    """
    skipped: list[str] = []
    for candidate in reversed(list_checkpoints(run_dir)):
        try:
            check_resumable(candidate)
        except CheckpointError as error:
            skipped.append(f"{candidate.name}: {error}")
            continue
        return candidate, skipped
    return None, skipped


def checkpoint_name(step: int) -> str:
    """Directory name of the checkpoint at ``step``."""
    return f"{CHECKPOINT_PREFIX}{step:08d}"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run directory, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [
        p
        for p in root.iterdir()
        if p.is_dir()
        and p.name.startswith(CHECKPOINT_PREFIX)
        and p.name[len(CHECKPOINT_PREFIX) :].isdigit()
        and (p / CONFIG_FILE).is_file()
    ]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX) :]))


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """Return the newest complete checkpoint of a run directory, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None
