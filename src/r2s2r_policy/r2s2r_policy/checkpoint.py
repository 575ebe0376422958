"""Policy checkpoints: ``model.safetensors`` + ``config.yaml`` (+ ``training_state.pt``).

A checkpoint is a directory:

- ``model.safetensors``: the model's parameters (and persistent buffers);
- ``config.yaml``: format version, the :class:`~r2s2r_policy.spec.PolicySpec`, the
  :class:`~r2s2r_policy.normalization.NormalizationStats` and training metadata (step, seed,
  training config, rank that wrote it);
- ``training_state.pt`` (training runs only): optimizer state, to resume.

Directories are written under a temporary name and renamed when complete, so a crash never
leaves a half-written checkpoint that :func:`latest_checkpoint` would pick.

The two files are bound to each other at save (:func:`save_checkpoint`), and the binding is
checked at load (:func:`check_binding`, run by :func:`load_checkpoint` before any weight goes
into a model): ``model.safetensors`` carries, in its header's metadata (not in its tensors), the
spec it was trained with and the SHA-256 of the normalisation statistics; ``config.yaml``
carries the SHA-256 of ``model.safetensors`` (``integrity.weights_sha256``). An edit of either
file (two joints swapped in the spec, other image sizes, changed statistics, a changed weight)
is refused in one line naming the checkpoint and what differs. Checkpoints written before the
binding have neither: they load with a warning (a lab's trained checkpoints stay usable; they
cannot prove they were not edited, and the shape checks still refuse a config that does not fit
the weights).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel, dump_yaml, parse_config, read_yaml
from r2s2r_common.errors import RunFailedError
from r2s2r_common.files import move_into_place
from safetensors import SafetensorError
from safetensors.torch import load as load_bytes
from safetensors.torch import save_file

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
SPEC_METADATA_KEY = "r2s2r_spec"
"""``model.safetensors`` metadata: the spec (JSON) the weights were saved with."""
NORMALIZATION_METADATA_KEY = "r2s2r_normalization_sha256"
"""``model.safetensors`` metadata: SHA-256 of the normalisation statistics saved with them."""

_LOG = logging.getLogger(__name__)
_WARNED_UNBOUND: set[Path] = set()
"""Checkpoints without a binding already warned about in this process (one warning each)."""


class CheckpointWriteError(RunFailedError):
    """A checkpoint could not be written (a full disk...): none is left half-written."""


class CheckpointError(ValueError):
    """A checkpoint directory is missing, incomplete or unreadable."""


class CheckpointIntegrity(ConfigModel):
    """``config.yaml``'s half of the binding: what the weights file was when it was saved."""

    weights_sha256: str = Field(description="SHA-256 of model.safetensors (header included).")


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
    integrity: CheckpointIntegrity | None = Field(
        None, description="The weights' hash (absent in checkpoints written before the binding)."
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

    Raises:
        CheckpointWriteError: Writing failed (e.g. the disk filled); the temporary folder is
            removed and an existing checkpoint of the same name is left as it was.

    """
    target = Path(directory)
    tmp = target.with_name(target.name + ".tmp")
    try:
        return _write_checkpoint(target, tmp, policy, training, training_state)
    except (OSError, SafetensorError, RuntimeError) as error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointWriteError(
            f"checkpoint {target} not written ({type(error).__name__}: {error}; a full disk?); "
            "the checkpoints written before it are intact"
        ) from None


def _write_checkpoint(
    target: Path,
    tmp: Path,
    policy: Policy,
    training: dict[str, Any] | None,
    training_state: dict[str, Any] | None,
) -> Path:
    """Write the checkpoint into ``tmp`` and move it into place (see :func:`save_checkpoint`)."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    # On the CPU whatever the training device: a checkpoint loads on any machine.
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in policy.state_dict().items()}
    # The binding (module docstring): the weights state their spec and statistics, the config
    # the weights' hash. Metadata is the file header's: the tensors are saved unchanged.
    metadata = {
        SPEC_METADATA_KEY: _canonical(policy.spec.model_dump(mode="json")),
        NORMALIZATION_METADATA_KEY: _sha256_text(_canonical(policy.stats.model_dump(mode="json"))),
    }
    save_file(tensors, str(tmp / MODEL_FILE), metadata=metadata)
    config = CheckpointConfig(
        spec=policy.spec,
        normalization=policy.stats,
        training=dict(training or {}),
        integrity=CheckpointIntegrity(weights_sha256=_sha256_file(tmp / MODEL_FILE)),
    )
    dump_yaml(config, tmp / CONFIG_FILE)
    if training_state is not None:
        torch.save(training_state, tmp / TRAINING_STATE_FILE)
    if target.exists():
        shutil.rmtree(target)
    move_into_place(tmp, target)
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

    ``config.yaml`` is checked against ``model.safetensors`` first (:func:`check_binding`),
    then the spec against the robot, then the weights' shapes against the model the spec
    builds, before any weight goes into the model.

    Args:
        directory: Checkpoint directory.
        expected: What the robot offers; None skips the check (offline analysis).

    Returns:
        The policy (eval mode) with its config.

    Raises:
        SpecMismatchError: Listing every mismatch with ``expected``.
        CheckpointError: If the checkpoint is incomplete, its files are not the pair that was
            saved, or its weights do not fit the model its config describes (one line naming
            the checkpoint, the field and both values).

    """
    path = Path(directory)
    config = read_checkpoint_config(path)
    data = _read_model_bytes(path)
    state = _weights_of(path, data)
    # config.yaml and the weights belong together before the spec is trusted for anything.
    check_binding(path, config, data)
    if expected is not None:
        mismatches = spec_mismatches(config.spec, expected)
        if mismatches:
            raise SpecMismatchError(mismatches, context=f"checkpoint {path}")
    try:
        # Every weight comes from the checkpoint: nothing is read from a pretrained wheel.
        policy = build_policy(config.spec, config.normalization, pretrained=False)
    except ValueError as error:  # ConfigError included: spec and statistics disagree
        raise CheckpointError(f"checkpoint {path}: {CONFIG_FILE}: {error}") from None
    _check_shapes(path, policy, state)
    try:
        policy.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise CheckpointError(
            f"{path / MODEL_FILE}: weights do not fit the model: {error}"
        ) from None
    policy.eval()
    return LoadedCheckpoint(policy=policy, config=config, path=path)


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_model_bytes(path: Path) -> bytes:
    model = path / MODEL_FILE
    try:
        return model.read_bytes()
    except OSError as error:
        raise CheckpointError(f"{model}: unreadable ({error.strerror or error})") from None


def _weights_of(path: Path, data: bytes) -> dict[str, torch.Tensor]:
    try:
        return load_bytes(data)
    except Exception as error:  # safetensors raises its own SafetensorError
        raise CheckpointError(
            f"{path / MODEL_FILE}: not a readable safetensors file ({error}); the checkpoint is "
            "damaged: use another checkpoint or train again"
        ) from None


def weights_metadata(data: bytes) -> dict[str, str]:
    """Return the ``__metadata__`` of a safetensors file's header (empty when it has none)."""
    if len(data) < 8:
        return {}
    (length,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + length])
    except ValueError:
        return {}
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    return dict(metadata) if isinstance(metadata, dict) else {}


def _first_difference(saved: Any, current: Any, key: str) -> str:
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        for name in list(saved) + [n for n in current if n not in saved]:
            if saved.get(name) != current.get(name):
                return _first_difference(saved.get(name), current.get(name), f"{key}.{name}")
    if isinstance(saved, list) and isinstance(current, list):
        if len(saved) != len(current):
            return f"{key}: {len(current)} entries, the weights were saved with {len(saved)}"
        for index, (a, b) in enumerate(zip(saved, current, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{key}[{index}]")
    return f"{key} = {current!r}, the weights were saved with {saved!r}"


def check_binding(directory: str | Path, config: CheckpointConfig, data: bytes) -> None:
    """Check that ``config.yaml`` and ``model.safetensors`` are the pair that was saved.

    Args:
        directory: The checkpoint (for messages).
        config: Its parsed ``config.yaml``.
        data: The bytes of its ``model.safetensors``.

    Raises:
        CheckpointError: One line naming the checkpoint and what differs: a field of the spec
            (config.yaml's value and the one the weights were saved with), the normalisation
            statistics, or the weights (their hash); or only one half of the binding present.

    """
    path = Path(directory)
    metadata = weights_metadata(data)
    bound_spec = metadata.get(SPEC_METADATA_KEY)
    if config.integrity is None and bound_spec is None:
        if path.resolve() not in _WARNED_UNBOUND:
            _WARNED_UNBOUND.add(path.resolve())
            _LOG.warning(
                "warning: checkpoint %s was written before checkpoints were bound to their "
                "weights: its config.yaml cannot be checked against model.safetensors (only "
                "their shapes are)",
                path,
            )
        return
    edited = "was edited after saving: restore it or use another checkpoint"
    if config.integrity is None or bound_spec is None:
        half = (
            f"{CONFIG_FILE} lacks integrity"
            if config.integrity is None
            else (f"{MODEL_FILE} lacks its spec metadata")
        )
        raise CheckpointError(
            f"checkpoint {path}: {half} (the other file has its half of the binding): the "
            f"checkpoint {edited}"
        )
    found = _sha256_file_bytes(data)
    if found != config.integrity.weights_sha256:
        raise CheckpointError(
            f"checkpoint {path}: {MODEL_FILE} (sha256 {found[:12]}) is not the weights "
            f"{CONFIG_FILE} was saved with (sha256 {config.integrity.weights_sha256[:12]}): "
            f"the weights file {edited}"
        )
    saved = json.loads(bound_spec)
    current = config.spec.model_dump(mode="json")
    if _canonical(saved) != _canonical(current):
        difference = _first_difference(saved, current, "spec")
        raise CheckpointError(
            f"checkpoint {path}: {CONFIG_FILE} {difference}: {CONFIG_FILE} {edited}"
        )
    stats = _sha256_text(_canonical(config.normalization.model_dump(mode="json")))
    if stats != metadata.get(NORMALIZATION_METADATA_KEY):
        raise CheckpointError(
            f"checkpoint {path}: {CONFIG_FILE} normalization is not the statistics the weights "
            f"were saved with (sha256 {stats[:12]}, saved "
            f"{str(metadata.get(NORMALIZATION_METADATA_KEY))[:12]}): {CONFIG_FILE} {edited}"
        )


def _sha256_file_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_shapes(path: Path, policy: Policy, state: Mapping[str, torch.Tensor]) -> None:
    """Refuse weights whose names or shapes do not fit the model ``config.yaml`` builds."""
    model = policy.state_dict()
    missing = [name for name in model if name not in state]
    unexpected = [name for name in state if name not in model]
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise CheckpointError(
            f"checkpoint {path}: {MODEL_FILE} does not fit the model {CONFIG_FILE} describes "
            f"(tensors {what}): spec.model differs from what the weights were trained with"
        )
    for name, tensor in model.items():
        found = tuple(state[name].shape)
        if tuple(tensor.shape) != found:
            raise CheckpointError(
                f"checkpoint {path}: {MODEL_FILE} tensor {name} has shape {list(found)}, "
                f"{CONFIG_FILE}'s spec builds {list(tensor.shape)}: {_shape_hint(name)} in "
                f"{CONFIG_FILE} differ from what the weights were trained with"
            )


def _shape_hint(tensor: str) -> str:
    if "encoders." in tensor:
        image = tensor.split("encoders.", 1)[1].split(".", 1)[0]
        return f"the image size of {image} (spec.images) or spec.model.params"
    return "spec.joint_names/action_names, spec.chunk_length or spec.model.params"


def read_weights(directory: str | Path) -> dict[str, torch.Tensor]:
    """Read a checkpoint's ``model.safetensors``.

    Raises:
        CheckpointError: If the file is missing or not a readable safetensors file.

    """
    path = Path(directory) / MODEL_FILE
    if not path.is_file():
        raise CheckpointError(f"{path.parent}: not a policy checkpoint (missing {MODEL_FILE})")
    return _weights_of(path.parent, _read_model_bytes(path.parent))


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
