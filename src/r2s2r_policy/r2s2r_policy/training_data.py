"""The data a co-training run reads: its sources, the policy spec they give, image stores."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch.distributed as dist

from .data.image_store import StoredFrames, build_image_store, open_image_store, store_manifest
from .data.sources import EpisodeSource, HDF5EpisodeSource, MissingFeatureError
from .sampling import MixtureSampler
from .spec import ImageSpec, PolicySpec
from .training_config import PolicyOptions, TrainConfig

_LOG = logging.getLogger(__name__)


def make_spec(options: PolicyOptions, source: EpisodeSource, control_rate_hz: float) -> PolicySpec:
    """Build the policy spec from training options and a source's names and semantics.

    Belt-speed and tracked-object semantics (what made them, the track's columns) come from the
    source; :func:`~r2s2r_policy.data.sources.check_source_features` then requires every other
    source to agree.
    """
    semantics = source.semantics()
    track_fields = list(semantics.object_track_fields) if options.use_object_track else []
    if options.palm_object_features and not options.use_object_track:
        raise ValueError("policy.palm_object_features needs policy.use_object_track: true")
    if options.object_relative_reach and not options.use_object_track:
        raise ValueError("policy.object_relative_reach needs policy.use_object_track: true")
    if options.use_object_track and not track_fields:
        raise MissingFeatureError(
            [
                f"source {source.name!r}: no tracked-object observation (obs/object_track); "
                "regenerate or re-convert the data, or set policy.use_object_track: false"
            ]
        )
    return PolicySpec(
        images=[
            ImageSpec(key=key, height_px=options.image_height_px, width_px=options.image_width_px)
            for key in options.image_keys
        ],
        joint_names=source.joint_names,
        action_names=source.action_names,
        use_belt_speed=options.use_belt_speed,
        belt_speed_source=semantics.belt_speed_source or "unknown",
        object_track_fields=track_fields,
        object_track_source=semantics.object_track_source if track_fields else "",
        palm_object_features=options.palm_object_features,
        object_relative_reach=options.object_relative_reach,
        action_representation=options.action_representation,
        chunk_length=options.chunk_length,
        control_rate_hz=control_rate_hz,
        normalization=options.normalization,
        model=options.model,
    )


def open_sources(config: TrainConfig) -> tuple[dict[str, EpisodeSource], dict[str, float]]:
    """Open the configured real/sim datasets; returns ``(sources, weights)``.

    Raises:
        ValueError: If neither dataset is configured.

    """
    sources: dict[str, EpisodeSource] = {}
    weights: dict[str, float] = {}
    if config.real_dataset is not None and config.sim_ratio < 1.0:
        sources["real"] = HDF5EpisodeSource(
            config.real_dataset, name="real", outcomes=config.episode_outcomes
        )
        weights["real"] = 1.0 - config.sim_ratio
    if config.sim_dataset is not None and config.sim_ratio > 0.0:
        sources["sim"] = HDF5EpisodeSource(
            config.sim_dataset, name="sim", outcomes=config.episode_outcomes
        )
        weights["sim"] = config.sim_ratio
    for name, source in sources.items():
        excluded = getattr(source, "excluded_outcomes", {})
        if excluded:
            _LOG.info(
                "%s dataset: %d episodes kept (outcomes %s), left out %s",
                name,
                source.num_episodes(),
                config.episode_outcomes,
                excluded,
            )
    if not sources:
        raise ValueError("training: no dataset configured (set real_dataset and/or sim_dataset)")
    return sources, weights


def open_training_image_store(
    config: TrainConfig,
    name: str,
    source: EpisodeSource,
    spec: PolicySpec,
    rank: int,
    world_size: int,
) -> dict[str, StoredFrames] | None:
    """Open (rank 0 first builds) the image store of one training source, if configured.

    The store's folder is named by the source, the image size and what the dataset is (its
    path, the episodes the source keeps, the outcome filter), so every run on that data at that
    size shares it; its manifest's identity adds the dataset files' sizes and modification
    times, so a dataset written again finds its old store stale and rebuilds it (one line says
    so) instead of reading it.
    """
    if not config.image_store_dir:
        return None
    dataset = config.real_dataset if name == "real" else config.sim_dataset
    files = [Path(dataset).resolve()] if dataset is not None else []
    if files and files[0].is_dir():
        files = sorted(p for p in files[0].rglob("*") if p.is_file())
    stamp = [f"{f}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    kept = getattr(source, "indices", None)  # an EpisodeSubset's episodes of the dataset
    lengths = [source.episode_length(e) for e in range(source.num_episodes())]
    what = [str(Path(dataset).resolve()) if dataset else "", source.name, kept]
    key = hashlib.sha256(json.dumps([*what, config.episode_outcomes]).encode()).hexdigest()
    identity = hashlib.sha256(json.dumps([stamp, *what, lengths, config.episode_outcomes]).encode())
    size = "x".join(f"{i.height_px}" for i in spec.images[:1])
    folder = Path(config.image_store_dir) / f"{name}-{size}px-{key[:16]}"
    if rank == 0:
        build_image_store(
            source, spec, folder, identity.hexdigest(), log=lambda line: print(line, flush=True)
        )
    if world_size > 1:
        dist.barrier()  # the other ranks open what rank 0 built
    return open_image_store(folder, store_manifest(source, spec, identity.hexdigest()))


def source_sample_counts(sampler: MixtureSampler, count: int) -> np.ndarray:
    """How many of the first ``count`` samples of ``sampler`` come from each source."""
    indices = np.fromiter(
        (index for _, index in zip(range(count), iter(sampler), strict=False)), dtype=np.int64
    )
    sources = np.searchsorted(sampler.offsets, indices, side="right") - 1
    return np.bincount(sources, minlength=len(sampler.sizes))


__all__: Sequence[str] = [
    "make_spec",
    "open_sources",
    "open_training_image_store",
    "source_sample_counts",
]
