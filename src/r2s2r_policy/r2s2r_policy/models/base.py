"""The policy interface every model type implements.

A :class:`Policy` is a ``torch.nn.Module`` built from a :class:`~r2s2r_policy.spec.PolicySpec`
and :class:`~r2s2r_policy.normalization.NormalizationStats`. Training calls
:meth:`Policy.forward` on a collated batch and gets a loss dict; deployment calls
:meth:`Policy.predict_chunk` on one observation of NumPy arrays and gets ``[H, action_dim]``
joint targets in radians. Normalisation lives inside the policy (buffers filled from the
statistics), so a checkpoint is self-contained and the two paths cannot drift apart.

Batch keys (tensors, leading batch dimension ``B``):

- camera keys (``head_camera_rgb`` ...): uint8 ``(B, H, W, 3)`` at the spec's size;
- ``joint_pos_rad``: float ``(B, J)``; ``belt_speed_mps``: float ``(B, 1)`` when used;
  ``object_track``: float ``(B, F)`` when the spec has tracked-object inputs;
- training only: ``actions``: float ``(B, H, A)`` training targets (radians; deltas to the
  measured action joints when ``spec.action_representation == 'delta'``); ``action_mask``:
  bool ``(B, H)``.
"""

from __future__ import annotations

import abc
import contextvars
import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.distributed as dist
from r2s2r_common.config import ConfigModel
from torch import nn

from r2s2r_dataset import ACTIONS_KEY, BELT_SPEED_KEY, JOINT_POS_KEY, OBJECT_TRACK_KEY

from ..normalization import NormalizationStats
from ..spec import ACTION_MASK_KEY, PALM_OBJECT_KEY, PolicySpec
from .palm_frame import PalmObjectFeatures
from .reach import REACH_DIM, ObjectRelativeReach

Batch = Mapping[str, torch.Tensor]


@dataclass
class BatchShard:
    """The rows of a training step's global batch that one process trains on (DDP, ``torchrun``).

    The trainer's sampler deals the global batch's samples to the ranks in turn, so rows
    ``rank::world_size`` of it are this process's. Training draws (image shifts, photometric
    jitter, state noise) are made for the whole global batch from ``generator``, seeded alike
    on every rank each step, and sliced the same way; the loss is normalised by the global
    batch's valid chunk steps. DDP's mean of the ranks' gradients is then the gradient of the
    one-process loss of the global batch, sample for sample (to float rounding). Dropout
    masks are not covered: they are drawn per rank (no shipped config uses dropout).

    Attributes:
        rank: This process's rank.
        world_size: Number of processes.
        generator: Where the training draws come from (on the policy's device).

    """

    rank: int
    world_size: int
    generator: torch.Generator | None = None


def draw_rows(
    shard: BatchShard | None,
    rows: int,
    draw: Callable[[int, torch.Generator | None], torch.Tensor],
    dim: int = 0,
) -> torch.Tensor:
    """Return ``draw(rows, None)``, or this shard's rows of a draw for the global batch.

    Args:
        shard: This process's share of the global batch (None: the batch is all of it).
        rows: This process's batch size.
        draw: Makes ``n`` rows of random numbers (along ``dim``) from a generator (None: the
            global torch RNG).
        dim: The batch dimension of the draw.

    """
    if shard is None or shard.world_size == 1:
        return draw(rows, None)
    full = draw(rows * shard.world_size, shard.generator)
    index = (slice(None),) * dim + (slice(shard.rank, None, shard.world_size),)
    return full[index]


_PRETRAINED_WEIGHTS = contextvars.ContextVar("r2s2r_policy_pretrained_weights", default=True)


def pretrained_weights_wanted() -> bool:
    """Whether a policy being built should load its pretrained parts' published weights.

    True unless inside :func:`without_pretrained_weights`. A model type with pretrained parts
    (:mod:`.efficientnet_lite`) asks this in its constructor.
    """
    return _PRETRAINED_WEIGHTS.get()


@contextmanager
def without_pretrained_weights() -> Iterator[None]:
    """Build policies without loading pretrained weights: their weights come from elsewhere.

    For a policy whose every weight is about to be replaced (a checkpoint's
    ``load_state_dict``): the architecture is the same, nothing is read from the weight
    packages, and the random initial weights drawn from the torch RNG are the same draws as a
    build with them (the published weights are copied in after the modules are made).
    """
    token = _PRETRAINED_WEIGHTS.set(False)
    try:
        yield
    finally:
        _PRETRAINED_WEIGHTS.reset(token)


class Policy(nn.Module, abc.ABC):
    """Base class of visuomotor chunking policies.

    Subclasses set ``Params`` (their hyper-parameter schema, validated from
    ``spec.model.params``) and implement :meth:`forward` and :meth:`predict_normalized`.

    Args:
        spec: Inputs, outputs, chunk length and model choice.
        stats: Normalisation statistics of ``joint_pos_rad``, ``actions`` and, when used,
            ``belt_speed_mps``.

    Raises:
        KeyError: If ``stats`` lacks a needed feature.
        ValueError: If statistics widths do not match the spec.

    """

    Params: ClassVar[type[ConfigModel]]

    state_offset: torch.Tensor
    state_scale: torch.Tensor
    action_offset: torch.Tensor
    action_scale: torch.Tensor

    def __init__(self, spec: PolicySpec, stats: NormalizationStats) -> None:
        super().__init__()
        self.spec = spec
        self.stats = stats
        offsets, scales = [], []
        state_keys = [JOINT_POS_KEY] + ([BELT_SPEED_KEY] if spec.use_belt_speed else [])
        if spec.uses_object_track:
            state_keys.append(OBJECT_TRACK_KEY)
        self.palm_features: PalmObjectFeatures | None = None
        if spec.palm_object_features:
            state_keys.append(PALM_OBJECT_KEY)
            self.palm_features = PalmObjectFeatures(spec.joint_names)
        self.reach: ObjectRelativeReach | None = None
        if spec.object_relative_reach:
            self.reach = ObjectRelativeReach(
                spec.joint_names,
                spec.action_names,
                spec.object_track_fields,
                delta_actions=spec.action_representation == "delta",
            )
        for key in state_keys:
            offset, scale = stats.offset_scale(key, spec.normalization)
            offsets.append(offset)
            scales.append(scale)
        state_offset = np.concatenate(offsets)
        if state_offset.shape[0] != spec.state_dim:
            raise ValueError(
                f"normalisation: state statistics have {state_offset.shape[0]} dims, "
                f"spec state has {spec.state_dim}"
            )
        action_offset, action_scale = stats.offset_scale(ACTIONS_KEY, spec.normalization)
        if action_offset.shape[0] != spec.action_dim:
            raise ValueError(
                f"normalisation: action statistics have {action_offset.shape[0]} dims, "
                f"spec has {spec.action_dim} actions"
            )
        # Not persistent: the statistics are stored in config.yaml, the single source of truth.
        self.register_buffer("state_offset", torch.from_numpy(state_offset), persistent=False)
        self.register_buffer(
            "state_scale", torch.from_numpy(np.concatenate(scales)), persistent=False
        )
        self.register_buffer("action_offset", torch.from_numpy(action_offset), persistent=False)
        self.register_buffer("action_scale", torch.from_numpy(action_scale), persistent=False)
        self.batch_shard: BatchShard | None = None
        """Set by the trainer under DDP (:class:`BatchShard`); None: one process."""

    @classmethod
    def parse_params(cls, params: Mapping[str, object]) -> ConfigModel:
        """Validate hyper-parameters against ``cls.Params``.

        Raises:
            r2s2r_common.config.ConfigError: Naming every bad key.

        """
        from r2s2r_common.config import parse_config

        return parse_config(cls.Params, dict(params), source=f"model.params ({cls.__name__})")

    def normalized_state(self, batch: Batch, noise_std: float = 0.0) -> torch.Tensor:
        """Concatenate joints, belt speed, tracked object and palm/object geometry, normalised.

        Args:
            batch: The batch (see the module docstring for its keys).
            noise_std: Standard deviation of Gaussian noise added to the *measured* inputs
                (joints, belt speed, tracked object), in units of each dimension's
                normalisation scale (training augmentation; 0 = none). The palm/object
                geometry is computed from the noisy joints and track, so a perturbed arm
                sees the object where that arm would see it: the policy learns to correct,
                not to ignore the geometry.

        Returns:
            ``(B, state_dim)``.

        """
        parts = [batch[JOINT_POS_KEY].float()]
        if self.spec.use_belt_speed:
            parts.append(batch[BELT_SPEED_KEY].float().reshape(-1, 1))
        if self.spec.uses_object_track:
            parts.append(batch[OBJECT_TRACK_KEY].float())
        measured = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
        width = measured.shape[-1]
        if noise_std > 0.0:
            scale = self.state_scale[:width]
            if self.batch_shard is None:
                noise = torch.randn_like(measured)
            else:
                noise = draw_rows(
                    self.batch_shard,
                    measured.shape[0],
                    lambda n, generator: torch.randn(
                        (n, width),
                        dtype=measured.dtype,
                        device=measured.device,
                        generator=generator,
                    ),
                )
            measured = measured + noise_std * scale * noise
        state = measured
        if self.palm_features is not None:
            joints = measured[:, : len(self.spec.joint_names)]
            track_start = width - len(self.spec.object_track_fields)
            geometry = self.palm_features(joints, measured[:, track_start:])
            state = torch.cat([measured, geometry], dim=-1)
        return (state - self.state_offset) / self.state_scale

    def normalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Radians → normalised action space."""
        return (actions - self.action_offset) / self.action_scale

    def unnormalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Normalised action space → radians."""
        return actions * self.action_scale + self.action_offset

    @property
    def output_dim(self) -> int:
        """Model outputs per chunk step: the actions, then the reach offsets when predicted."""
        return self.spec.action_dim + (REACH_DIM if self.reach is not None else 0)

    def reach_loss(self, predicted: torch.Tensor, batch: Batch, kind: str) -> torch.Tensor:
        """Loss of the normalised reach offsets ``(B, H, 3)`` against the batch's own labels.

        Raises:
            RuntimeError: If the policy predicts no reach offsets.

        """
        if self.reach is None:
            raise RuntimeError("reach_loss: this policy predicts no object-relative reach")
        labels, mask = self.reach.labels(
            batch[JOINT_POS_KEY].float(),
            batch[ACTIONS_KEY].float(),
            batch[OBJECT_TRACK_KEY].float(),
            batch[ACTION_MASK_KEY],
        )
        return masked_chunk_loss(predicted, labels, mask, kind, self.batch_shard)

    @property
    @abc.abstractmethod
    def latent_dim(self) -> int:
        """Width of :meth:`embed`."""

    @abc.abstractmethod
    def embed(self, batch: Batch) -> torch.Tensor:
        """Return the features the action head reads, ``(B, latent_dim)``: the latent.

        Latent-space analysis (:mod:`r2s2r_policy.analysis`) and the live real-likeness
        monitor read it; :meth:`outputs_from_latent` of it is the policy's output.
        """

    @abc.abstractmethod
    def outputs_from_latent(self, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Normalised action chunk ``(B, H, A)`` and reach offsets ``(B, H, 3)`` (or None)."""

    def predict_outputs(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Normalised action chunk ``(B, H, A)`` and reach offsets ``(B, H, 3)`` (or None)."""
        return self.outputs_from_latent(self.embed(batch))

    @abc.abstractmethod
    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Compute the training loss of a batch.

        Returns:
            A dict with at least ``loss`` (scalar tensor to minimise).

        """

    @abc.abstractmethod
    def predict_normalized(self, batch: Batch) -> torch.Tensor:
        """Bare model inference: normalised action chunk ``(B, H, A)``."""

    def check_observation(self, observation: Mapping[str, np.ndarray]) -> None:
        """Check one observation's keys, shapes and dtypes against the spec.

        Raises:
            ValueError: Naming the key, what it got and what was expected.

        """
        for image in self.spec.images:
            value = observation.get(image.key)
            expected = (image.height_px, image.width_px, 3)
            if value is None:
                raise ValueError(f"observation: missing camera {image.key!r}")
            if value.shape != expected or value.dtype != np.uint8:
                raise ValueError(
                    f"observation[{image.key!r}]: expected uint8 {expected}, "
                    f"got {value.dtype} {value.shape} (resize at the edge, see "
                    "r2s2r_policy.data.chunks.resize_image)"
                )
        joints = observation.get(JOINT_POS_KEY)
        if joints is None or joints.shape != (len(self.spec.joint_names),):
            got = None if joints is None else joints.shape
            raise ValueError(
                f"observation[{JOINT_POS_KEY!r}]: expected shape "
                f"({len(self.spec.joint_names)},), got {got}"
            )
        if self.spec.use_belt_speed:
            belt = observation.get(BELT_SPEED_KEY)
            if belt is None or belt.size != 1:
                got = None if belt is None else belt.shape
                raise ValueError(f"observation[{BELT_SPEED_KEY!r}]: expected one value, got {got}")
        if self.spec.uses_object_track:
            track = observation.get(OBJECT_TRACK_KEY)
            width = len(self.spec.object_track_fields)
            if track is None or track.shape != (width,):
                got = None if track is None else track.shape
                raise ValueError(
                    f"observation[{OBJECT_TRACK_KEY!r}]: expected shape ({width},), got {got}"
                )

    def observation_batch(self, observation: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Turn one checked observation into the model's batch of one (images not copied)."""
        batch: dict[str, torch.Tensor] = {
            key: torch.from_numpy(np.ascontiguousarray(observation[key]))[None]
            for key in self.spec.image_keys
        }
        batch[JOINT_POS_KEY] = torch.as_tensor(observation[JOINT_POS_KEY], dtype=torch.float32)[
            None
        ]
        if self.spec.use_belt_speed:
            batch[BELT_SPEED_KEY] = torch.as_tensor(
                observation[BELT_SPEED_KEY], dtype=torch.float32
            ).reshape(1, 1)
        if self.spec.uses_object_track:
            batch[OBJECT_TRACK_KEY] = torch.as_tensor(
                observation[OBJECT_TRACK_KEY], dtype=torch.float32
            )[None]
        return batch

    def predict_chunk(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        """Predict the next ``H`` joint targets from one observation.

        See :meth:`predict_chunk_and_latent` (this is its chunk).
        """
        return self.predict_chunk_and_latent(observation)[0]

    @torch.inference_mode()
    def embed_batch(self, batch: Batch) -> np.ndarray:
        """Latents ``(B, latent_dim)`` float32 of a batch, in eval mode (mode restored)."""
        was_training = self.training
        if was_training:
            self.eval()
        try:
            return self.embed(batch).numpy().astype(np.float32, copy=False)
        finally:
            if was_training:
                self.train()

    @torch.inference_mode()
    def predict_chunk_and_latent(
        self, observation: Mapping[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Predict the next ``H`` joint targets from one observation, and its latent.

        Runs in eval mode (restoring the previous mode afterwards).

        Args:
            observation: camera keys → uint8 ``(H, W, 3)`` RGB at the spec's size;
                ``joint_pos_rad`` → ``(J,)`` rad; ``belt_speed_mps`` → one value (m/s);
            ``object_track`` → ``(F,)`` when used.

        Returns:
            float32 ``(H, action_dim)`` joint position targets (rad), ``action_names`` order
            (row ``k`` is the target ``k + 1`` control steps after the observation), and the
            float32 ``(latent_dim,)`` latent the head read (:meth:`embed`).

        Raises:
            ValueError: If the observation does not match the spec.

        """
        self.check_observation(observation)
        batch = self.observation_batch(observation)
        was_training = self.training
        if was_training:
            self.eval()
        try:
            latent = self.embed(batch)
            normalized, offsets = self.outputs_from_latent(latent)
            chunk = self.unnormalize_actions(normalized)[0]
        finally:
            if was_training:
                self.train()
        out = chunk.numpy().astype(np.float32, copy=False)
        joints = np.asarray(observation[JOINT_POS_KEY], dtype=np.float32)
        if self.spec.action_representation == "delta":
            index = [self.spec.joint_names.index(n) for n in self.spec.action_names]
            out = out + joints[index]
        if self.reach is not None and offsets is not None:
            out = self.reach.correct(
                joints,
                out,
                np.asarray(observation[OBJECT_TRACK_KEY], dtype=np.float32),
                offsets[0].numpy(),
            )
        return out, latent[0].numpy().astype(np.float32, copy=False)


def masked_chunk_loss(
    predicted: torch.Tensor,
    target: torch.Tensor,
    mask: torch.Tensor,
    kind: str,
    shard: BatchShard | None = None,
) -> torch.Tensor:
    """Mean L1 or L2 error over valid (unpadded) chunk steps.

    Under DDP (``shard`` of more than one process) the sum over this process's rows is divided
    by the global batch's valid steps (one all-reduce) and multiplied by the number of
    processes: DDP's mean of the ranks' gradients is then the gradient of the global batch's
    mean error, and the mean of the ranks' values is its value.

    Args:
        predicted: ``(B, H, A)``.
        target: ``(B, H, A)``.
        mask: bool ``(B, H)``, True where the step is real.
        kind: ``'l1'`` or ``'l2'``.
        shard: This process's share of the global batch (None: one process).

    Raises:
        ValueError: On an unknown ``kind``.

    """
    if kind == "l1":
        error = (predicted - target).abs()
    elif kind == "l2":
        error = (predicted - target) ** 2
    else:
        raise ValueError(f"loss kind = {kind!r}: expected 'l1' or 'l2'")
    weights = mask.to(error.dtype).unsqueeze(-1)
    if shard is None or shard.world_size == 1:
        return (error * weights).sum() / (weights.sum() * error.shape[-1]).clamp_min(1.0)
    valid = weights.sum().detach().clone()
    dist.all_reduce(valid)
    scale = shard.world_size / (valid * error.shape[-1]).clamp_min(1.0)
    return (error * weights).sum() * scale


def policy_fingerprint(policy: Policy) -> str:
    """Return the first 16 hex digits of the SHA-256 of a policy's weights (its identity)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(policy.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]
