"""Policy latents of dataset frames: sample frames once, embed them with any policy.

A :class:`FrameSet` is a sample of a dataset's frames as policy observations at one spec's
image size (the batch keys of :mod:`r2s2r_policy.models.base`), with where each came from
(episode, frame, progress through the episode) and its domain (real or sim). It does not
depend on a policy's weights, so the policies of one experiment (which share image sizes and
inputs) embed the same frames (:func:`embed_frames`). Frame sets are saved as one ``.npz``
(:meth:`FrameSet.save`, written whole or not at all) so an analysis reruns without decoding
the datasets again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from r2s2r_dataset import BELT_SPEED_KEY, JOINT_POS_KEY, OBJECT_TRACK_KEY

from ..data.chunks import resize_image
from ..data.sources import EpisodeSource, check_source_features
from ..models import Policy
from ..npz_files import write_npz
from ..spec import PolicySpec

REAL = "real"
SIM = "sim"
DOMAINS = (REAL, SIM)
"""Domain labels of frames (``is_real`` = domain is :data:`REAL`)."""
FRAME_SET_FORMAT = 1


class AnalysisInputError(ValueError):
    """An analysis input is empty, of another policy, or does not fit the policy's spec."""


def observation_keys(spec: PolicySpec) -> list[str]:
    """Return the batch keys a policy of ``spec`` reads: cameras, then low-dimensional inputs."""
    keys = [*spec.image_keys, JOINT_POS_KEY]
    if spec.use_belt_speed:
        keys.append(BELT_SPEED_KEY)
    if spec.uses_object_track:
        keys.append(OBJECT_TRACK_KEY)
    return keys


def input_signature(spec: PolicySpec) -> dict[str, object]:
    """Return what must match for two policies to read the same observations."""
    return {
        "images": [[i.key, i.height_px, i.width_px] for i in spec.images],
        "joint_names": list(spec.joint_names),
        "use_belt_speed": spec.use_belt_speed,
        "object_track_fields": list(spec.object_track_fields) if spec.uses_object_track else [],
    }


@dataclass
class FrameSet:
    """Sampled frames of one dataset (or rollouts) as observations of one spec.

    Attributes:
        name: Dataset name (e.g. ``real``, ``grounded_mimicgen``).
        domain: :data:`REAL` or :data:`SIM`.
        signature: :func:`input_signature` of the spec the observations fit.
        observations: Batch key → ``(N, ...)`` array (images uint8 at the spec's size).
        episode: ``(N,)`` episode index of each frame.
        frame: ``(N,)`` frame index within its episode.
        progress: ``(N,)`` frame / episode length, in [0, 1).

    """

    name: str
    domain: str
    signature: dict[str, object]
    observations: dict[str, np.ndarray]
    episode: np.ndarray
    frame: np.ndarray
    progress: np.ndarray

    def __len__(self) -> int:
        return int(self.episode.size)

    def check_fits(self, spec: PolicySpec) -> None:
        """Refuse a policy whose inputs differ from the ones these frames were made for.

        Raises:
            AnalysisInputError: Naming what differs.

        """
        theirs = input_signature(spec)
        differ = [k for k in theirs if theirs[k] != self.signature.get(k)]
        if differ:
            detail = "; ".join(
                f"{k}: frames {self.signature.get(k)}, policy {theirs[k]}" for k in differ
            )
            raise AnalysisInputError(f"frames of {self.name!r} do not fit the policy ({detail})")

    def save(self, path: str | Path) -> Path:
        """Write one ``.npz`` via a hidden partial file renamed into place."""
        header = {
            "format": FRAME_SET_FORMAT,
            "name": self.name,
            "domain": self.domain,
            "signature": self.signature,
        }
        arrays = {f"obs_{k}": v for k, v in self.observations.items()}
        arrays.update(episode=self.episode, frame=self.frame, progress=self.progress)
        return write_npz(path, header, arrays)


def load_frame_set(path: str | Path) -> FrameSet:
    """Read a frame set written by :meth:`FrameSet.save`.

    Raises:
        AnalysisInputError: If the file is not a frame set of this format.

    """
    with np.load(path, allow_pickle=False) as data:
        if "header" not in data:
            raise AnalysisInputError(f"{path}: not a frame set (no header)")
        header = json.loads(str(data["header"]))
        if header.get("format") != FRAME_SET_FORMAT:
            raise AnalysisInputError(f"{path}: frame set format {header.get('format')}")
        observations = {k[4:]: data[k] for k in data.files if k.startswith("obs_")}
        return FrameSet(
            header["name"],
            header["domain"],
            header["signature"],
            observations,
            data["episode"],
            data["frame"],
            data["progress"],
        )


def sample_frames(
    source: EpisodeSource,
    spec: PolicySpec,
    domain: str,
    stride: int = 4,
    max_episodes: int | None = None,
    name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FrameSet:
    """Take every ``stride``-th frame of a dataset's episodes as observations of ``spec``.

    Args:
        source: The dataset.
        spec: The policy spec the observations must fit (image sizes, inputs).
        domain: :data:`REAL` or :data:`SIM`.
        stride: Keep frames ``0, stride, 2·stride, ...`` of each episode.
        max_episodes: Use only the first episodes (None: all).
        name: Name of the set (default: the source's).
        progress: Called with (episodes done, episodes) after each episode.

    Raises:
        AnalysisInputError: An empty dataset or a bad domain / stride.
        r2s2r_policy.data.sources.MissingFeatureError: The dataset lacks an input of the spec.

    """
    if domain not in DOMAINS:
        raise AnalysisInputError(f"domain = {domain!r}: expected one of {list(DOMAINS)}")
    if stride < 1:
        raise AnalysisInputError(f"stride = {stride}: expected >= 1")
    label = name or source.name
    count = source.num_episodes()
    if max_episodes is not None:
        count = min(count, max_episodes)
    if count == 0:
        raise AnalysisInputError(f"dataset {label!r} has no episode")
    check_source_features([source], spec)
    parts: dict[str, list[np.ndarray]] = {key: [] for key in observation_keys(spec)}
    episodes, frames, shares = [], [], []
    for episode in range(count):
        length = source.episode_length(episode)
        chosen = np.arange(0, length, stride)
        low = source.low_dim(episode)
        for image in spec.images:
            stack = source.episode_images(episode, image.key)
            parts[image.key].append(
                np.stack([resize_image(stack[i], image.height_px, image.width_px) for i in chosen])
            )
        parts[JOINT_POS_KEY].append(np.asarray(low[JOINT_POS_KEY], np.float32)[chosen])
        if spec.use_belt_speed:
            belt = np.asarray(low[BELT_SPEED_KEY], np.float32).reshape(length, -1)[chosen]
            parts[BELT_SPEED_KEY].append(belt[:, :1])
        if spec.uses_object_track:
            parts[OBJECT_TRACK_KEY].append(np.asarray(low[OBJECT_TRACK_KEY], np.float32)[chosen])
        episodes.append(np.full(chosen.size, episode, np.int32))
        frames.append(chosen.astype(np.int32))
        shares.append((chosen / max(length, 1)).astype(np.float32))
        if progress is not None:
            progress(episode + 1, count)
    return FrameSet(
        label,
        domain,
        input_signature(spec),
        {key: np.concatenate(values) for key, values in parts.items()},
        np.concatenate(episodes),
        np.concatenate(frames),
        np.concatenate(shares),
    )


def embed_observations(
    policy: Policy, observations: dict[str, np.ndarray], batch_size: int = 256
) -> np.ndarray:
    """Latents ``(N, latent_dim)`` float32 of a batch of observations (eval mode)."""
    keys = observation_keys(policy.spec)
    total = len(observations[keys[0]]) if keys[0] in observations else 0
    out = np.empty((total, policy.latent_dim), dtype=np.float32)
    for start, batch in _batches(observations, keys, batch_size):
        out[start : start + len(batch[keys[0]])] = policy.embed_batch(batch)
    return out


def _batches(
    observations: dict[str, np.ndarray], keys: list[str], batch_size: int
) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
    """Yield ``(first row, batch of tensors)`` over the observations, ``batch_size`` at a time.

    Raises:
        AnalysisInputError: An observation key the policy reads is missing.

    """
    missing = [k for k in keys if k not in observations]
    if missing:
        raise AnalysisInputError(f"observations lack {missing} (the policy reads {keys})")
    total = len(observations[keys[0]])
    for start in range(0, total, batch_size):
        stop = min(start + batch_size, total)
        batch = {
            key: torch.from_numpy(np.ascontiguousarray(observations[key][start:stop]))
            for key in keys
        }
        if BELT_SPEED_KEY in batch:
            batch[BELT_SPEED_KEY] = batch[BELT_SPEED_KEY].reshape(-1, 1)
        yield start, batch


def embed_frames(policy: Policy, frames: FrameSet, batch_size: int = 256) -> np.ndarray:
    """Latents of a frame set (refused when the frames do not fit the policy)."""
    frames.check_fits(policy.spec)
    return embed_observations(policy, frames.observations, batch_size)


@torch.inference_mode()
def predict_chunks(
    policy: Policy, observations: dict[str, np.ndarray], batch_size: int = 256
) -> np.ndarray:
    """Absolute joint-target chunks ``(N, H, A)`` (rad) a policy outputs for observations.

    The batched form of :meth:`~r2s2r_policy.models.Policy.predict_chunk` (no safety filter,
    no ensembling): what the policy *wants* from each observation.

    Raises:
        AnalysisInputError: A policy with the object-relative reach (its correction needs the
            per-observation geometry; not supported here).

    """
    if policy.reach is not None:
        raise AnalysisInputError(
            "predict_chunks: policies with object_relative_reach are not supported"
        )
    keys = observation_keys(policy.spec)
    total = len(observations[keys[0]]) if keys[0] in observations else 0
    spec = policy.spec
    out = np.empty((total, spec.chunk_length, spec.action_dim), dtype=np.float32)
    index = [spec.joint_names.index(n) for n in spec.action_names]
    was_training = policy.training
    policy.eval()
    try:
        for start, batch in _batches(observations, keys, batch_size):
            stop = start + len(batch[keys[0]])
            normalized, _ = policy.predict_outputs(batch)
            chunk = policy.unnormalize_actions(normalized).numpy()
            if spec.action_representation == "delta":
                chunk = chunk + observations[JOINT_POS_KEY][start:stop, None, index]
            out[start:stop] = chunk
    finally:
        if was_training:
            policy.train()
    return out
