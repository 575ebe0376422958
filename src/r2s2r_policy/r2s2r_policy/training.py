"""Co-training on a real dataset plus one simulated dataset with an explicit sampling ratio.

:func:`train` checks every source before anything else (missing features are an error that
lists them), builds the policy spec from the data (joint and action names, control rate) and
the configured options, computes normalisation statistics over all sources, then runs a
step-based loop:

- each sample is drawn from sim with probability ``sim_ratio`` (:class:`MixtureSampler`);
- determinism: the sampler stream depends only on ``(seed, sample index)`` and the torch RNG
  (augmentation, dropout) is re-seeded from ``(seed, step, rank)`` every step, so a run is a
  pure function of its config, and a resumed run equals an uninterrupted one;
- progress bar (tqdm) with loss, samples/s and ETA on rank 0;
- periodic checkpoints (rank 0 only) and resume from the newest one in the run directory;
- DDP when started by ``torchrun`` (``WORLD_SIZE > 1``; gloo backend on CPU, NCCL on CUDA,
  one GPU per process by ``LOCAL_RANK``): ``batch_size`` is the global batch of a step, and
  each of N processes trains on ``batch_size / N`` of its samples (the sampler deals the
  one-process stream to the ranks in turn). The training draws are made for the global batch
  and sliced the same way, and the loss is normalised over the global batch
  (:class:`~r2s2r_policy.models.base.BatchShard`), so N processes train the same policy as
  one, step for step, to float rounding (not bit for bit: sums are split); the logged loss is
  the global batch's. The same ``train_config.yaml`` runs either way, and a run may resume on
  another number of processes;
- ``device``: ``auto`` trains on CUDA when this torch has it, else on the CPU. Batches are
  built on the CPU (image cache, sampler) and copied to the device once per step, from pinned
  memory on CUDA; augmentation runs on the device, inside the policy. Checkpoints hold CPU
  tensors whatever the device. The CUDA path is written against torch's API but has not run
  here (the development machines have no GPU; see bench/README).
"""

from __future__ import annotations

import copy
import gc
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from r2s2r_common.errors import raise_if_stop_requested
from r2s2r_common.files import write_atomic
from r2s2r_common.folder_lock import hold_folder_lock
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from r2s2r_dataset import ACTIONS_KEY

from .checkpoint import (
    checkpoint_name,
    list_checkpoints,
    load_training_state,
    newest_intact_checkpoint,
    read_checkpoint_config,
    save_checkpoint,
)
from .data.chunks import (
    BatchedDataset,
    ChunkDataset,
    MixtureDataset,
    collate_batch,
    compute_normalization,
)
from .data.sources import EpisodeSource, EpisodeSubset, check_source_features, split_episodes
from .models import Policy, build_policy
from .models.base import BatchShard
from .sampling import MixtureSampler
from .spec import ACTION_MASK_KEY
from .training_config import RESUME_FREE_FIELDS, TrainConfig
from .training_data import make_spec, open_sources, open_training_image_store
from .training_device import batch_to_device, distributed_context, resolve_device

_LOG = logging.getLogger(__name__)


class ResumeError(ValueError):
    """A run directory's checkpoint was written with a different training config."""


@dataclass
class TrainResult:
    """Outcome of :func:`train` on this rank.

    Attributes:
        run_dir: Run directory.
        start_step: First step run here (> 0 when resumed).
        step: Steps completed in total.
        losses: Loss of every step run here, in order.
        final_loss: Loss of the last step, run here or, when a resumed run had no step left,
            by the run that wrote the checkpoint it resumed from (None: no step run at all).
        samples_per_s: Training throughput of this run (all ranks).
        data_fraction: Share of the loop's time spent waiting for batches (data path).
        validation: Held-out L1 (rad) per source at each validation: ``{"step", "<source>"}``
            (a resumed run's include those up to the step it resumed from).
        rank: This process's rank.
        world_size: Number of processes.
        checkpoint: Newest checkpoint written, or the one resumed from when no step was left
            (None on ranks > 0).
        policy: The trained policy (unwrapped).

    """

    run_dir: Path
    start_step: int
    step: int
    losses: list[float] = field(default_factory=list)
    final_loss: float | None = None
    samples_per_s: float = 0.0
    data_fraction: float = 0.0
    validation: list[dict[str, float]] = field(default_factory=list)
    rank: int = 0
    world_size: int = 1
    checkpoint: Path | None = None
    policy: Policy | None = None


def learning_rate_at(config: TrainConfig, step: int) -> float:
    """Learning rate of ``step`` (warm-up, then cosine to 0 or constant)."""
    if config.warmup_steps > 0 and step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    if config.lr_schedule == "constant":
        return config.learning_rate
    span = max(config.steps - config.warmup_steps, 1)
    progress = min(max(step - config.warmup_steps, 0) / span, 1.0)
    return config.learning_rate * 0.5 * (1.0 + float(np.cos(np.pi * progress)))


def step_seed(seed: int, step: int, rank: int) -> int:
    """Torch RNG seed of one step on one rank (stateless, so resume is exact)."""
    return int(np.random.SeedSequence([seed, step, rank]).generate_state(1)[0])


def _validation_until(run_path: Path, step: int, rewrite: bool) -> list[dict[str, float]]:
    """Return the held-out scores a run logged up to ``step`` (the one it resumes from).

    With ``rewrite``, ``validation.jsonl`` is cut to them (atomically): the scores an
    interrupted run logged after its last checkpoint are computed again by the resumed one.
    A line cut short by a kill is dropped.
    """
    path = run_path / "validation.jsonl"
    entries: list[dict[str, float]] = []
    if step > 0 and path.is_file():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and float(entry.get("step", step + 1)) <= step:
                entries.append(entry)
    if rewrite and path.is_file():
        write_atomic(path, "".join(json.dumps(entry) + "\n" for entry in entries))
    return entries


def _check_resume_config(stored: Mapping[str, Any], config: TrainConfig, path: Path) -> None:
    """Raise if a checkpoint's training config differs in a field that changes results."""
    current = config.model_dump(mode="json")
    differences = [
        f"{key}: checkpoint {stored.get(key)!r}, now {current[key]!r}"
        for key in current
        if key not in RESUME_FREE_FIELDS and stored.get(key) != current[key]
    ]
    if differences:
        lines = "\n  - ".join(differences)
        raise ResumeError(
            f"{path}: cannot resume, training config differs (use a new run directory or "
            f"resume=False):\n  - {lines}"
        )


def train(
    config: TrainConfig,
    run_dir: str | Path,
    sources: Mapping[str, EpisodeSource] | None = None,
    weights: Mapping[str, float] | None = None,
    resume: bool = True,
    stop_at_step: int | None = None,
    control_rate_hz: float | None = None,
) -> TrainResult:
    """Train (or resume training) a policy.

    Args:
        config: Training configuration.
        run_dir: Run directory; checkpoints go to ``run_dir/checkpoints/step_<n>``.
        sources: Source name → episode source; default: open ``config``'s datasets.
        weights: Source name → sampling weight (required with ``sources``); default from
            ``config.sim_ratio``.
        resume: Continue from the newest checkpoint in ``run_dir`` when there is one.
        stop_at_step: Stop after this many total steps (checkpointing there), as a time-limited
            job or an interruption would; the schedule still follows ``config.steps``.
        control_rate_hz: Rate of the chunk steps stored in the spec (default: the first
            source's ``control_rate_hz``).

    Returns:
        A :class:`TrainResult` for this rank.

    Raises:
        MissingFeatureError: If a source lacks a feature, before any training.
        ResumeError: If the checkpoint to resume was trained with a different config.
        ValueError: If ``weights`` do not name exactly the sources.

    """
    if sources is None:
        sources, weights = open_sources(config)
    if weights is None or set(weights) != set(sources):
        raise ValueError(
            f"training: weights {None if weights is None else sorted(weights)} must name the "
            f"sources {sorted(sources)}"
        )
    run_path = Path(run_dir)
    if int(os.environ.get("RANK", "0")) == 0:  # torchrun's other ranks share rank 0's folder
        hold_folder_lock(run_path, "a training (r2s2r_policy.training.train)")
    device = resolve_device(config.device, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    rank, world_size, initialized_here = distributed_context(
        "nccl" if device.type == "cuda" else "gloo"
    )
    if config.batch_size % world_size:
        if initialized_here:
            dist.destroy_process_group()
        raise ValueError(
            f"batch_size = {config.batch_size}: expected a multiple of the {world_size} "
            "processes torchrun started (each trains on batch_size / processes samples)"
        )
    rank_batch = config.batch_size // world_size
    if config.num_threads > 0:
        torch.set_num_threads(config.num_threads)
    names = list(sources)
    first = sources[names[0]]
    rate = control_rate_hz if control_rate_hz is not None else first.control_rate_hz
    spec = make_spec(config.policy, first, rate)
    check_source_features([sources[name] for name in names], spec)

    checkpoint_dir = None
    if resume:
        checkpoint_dir, damaged = newest_intact_checkpoint(run_path)
        if damaged:
            # Said on stdout (a resumed run is not an error), once, naming what was skipped.
            fallback = checkpoint_dir.name if checkpoint_dir else "step 0 (no intact checkpoint)"
            print(
                f"training: resuming from {fallback}; skipped {len(damaged)} damaged newer "
                f"checkpoint(s): {'; '.join(damaged)}",
                flush=True,
            )
    start_step = 0
    resumed_loss: float | None = None
    training_state: dict[str, Any] | None = None
    if checkpoint_dir is not None:
        stored = read_checkpoint_config(checkpoint_dir)
        _check_resume_config(stored.training.get("config", {}), config, checkpoint_dir)
        stats = stored.normalization
        spec = stored.spec
        training_state = load_training_state(checkpoint_dir)
        start_step = int(stored.training["step"])
        resumed_loss = stored.training.get("loss")
    held_out: dict[str, ChunkDataset] = {}
    training_sources: dict[str, EpisodeSource] = {}
    for name in names:
        source = sources[name]
        kept, held = split_episodes(source.num_episodes(), config.validation_fraction, config.seed)
        if held:
            training_sources[name] = EpisodeSubset(source, kept)
            held_out[name] = ChunkDataset(
                EpisodeSubset(source, held, f"{name}_held_out"), spec, cache_images=False
            )
        else:
            training_sources[name] = source
    stores = {
        name: open_training_image_store(
            config, name, training_sources[name], spec, rank, world_size
        )
        for name in names
    }
    datasets = {
        name: ChunkDataset(
            training_sources[name],
            spec,
            cache_images=config.cache_images,
            image_store=stores[name],
        )
        for name in names
    }
    if checkpoint_dir is None:
        stats = compute_normalization(list(datasets.values()), spec)

    torch.manual_seed(config.seed)
    policy = build_policy(spec, stats).to(device)
    optimizer = torch.optim.AdamW(
        policy.parameters(),
        lr=config.learning_rate,
        weight_decay=config.weight_decay,
        fused=config.fused_optimizer or None,
    )
    if checkpoint_dir is not None and training_state is not None:
        from safetensors.torch import load_file

        policy.load_state_dict(load_file(str(checkpoint_dir / "model.safetensors")))
        optimizer.load_state_dict(training_state["optimizer"])
        _LOG.info("resuming from %s at step %d", checkpoint_dir, start_step)
    # The averaged copy is what checkpoints and held-out scores see; the raw weights train.
    averaged = WeightAverage(policy, config.ema_decay) if config.ema_decay > 0 else None
    if averaged is not None and checkpoint_dir is not None and training_state is not None:
        if "raw_model" not in training_state:
            raise ResumeError(f"{checkpoint_dir}: no raw weights to resume the weight average from")
        averaged.policy.load_state_dict(policy.state_dict())
        policy.load_state_dict(training_state["raw_model"])
    published = averaged.policy if averaged is not None else policy
    model: torch.nn.Module = policy
    shard: BatchShard | None = None
    if world_size > 1:
        shard = BatchShard(rank, world_size, torch.Generator(device))
        policy.batch_shard = shard
        model = DistributedDataParallel(
            policy, device_ids=[device.index] if device.type == "cuda" else None
        )

    mixture = MixtureDataset(datasets)
    total_steps = config.steps if stop_at_step is None else min(stop_at_step, config.steps)
    sampler = MixtureSampler(
        mixture.sizes,
        [weights[name] for name in names],
        num_samples=config.steps * rank_batch,
        seed=config.seed,
        rank=rank,
        num_replicas=world_size,
        start_sample=start_step * rank_batch,
    )
    loader = DataLoader(
        BatchedDataset(mixture),
        batch_size=rank_batch,
        sampler=sampler,
        drop_last=True,
        collate_fn=collate_batch,
        num_workers=config.num_workers,
        pin_memory=device.type == "cuda",
        generator=torch.Generator().manual_seed(config.seed),
    )
    source_meta = {
        name: {
            "episodes": training_sources[name].num_episodes(),
            "held_out_episodes": held_out[name].source.num_episodes() if name in held_out else 0,
            "samples": len(datasets[name]),
            "weight": float(weights[name]),
        }
        for name in names
    }
    result = TrainResult(
        run_dir=run_path, start_step=start_step, step=start_step, rank=rank, world_size=world_size
    )
    if held_out:
        result.validation = _validation_until(run_path, start_step, rewrite=rank == 0)
    progress = tqdm(
        total=config.steps,
        initial=start_step,
        unit="step",
        # None: drawn only on a terminal (a pipe or a log file gets no carriage-return lines).
        disable=True if rank != 0 or not config.progress_bar else None,
        dynamic_ncols=True,
    )
    model.train()
    started = time.perf_counter()
    step = start_step
    batches = iter(loader)
    data_s = 0.0
    try:
        while step < total_steps:
            raise_if_stop_requested()  # a SIGTERM whose exception a finalizer swallowed
            fetch_started = time.perf_counter()
            batch = batch_to_device(next(batches), device)
            data_s += time.perf_counter() - fetch_started
            torch.manual_seed(step_seed(config.seed, step, rank))
            if shard is not None and shard.generator is not None:
                # The global batch's draws: seeded as one process seeds its torch RNG.
                shard.generator.manual_seed(step_seed(config.seed, step, 0))
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(config, step)
            losses = model(batch)
            optimizer.zero_grad(set_to_none=True)
            losses["loss"].backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.grad_clip_norm, foreach=True)
            optimizer.step()
            step += 1
            if averaged is not None:
                averaged.update(policy, step)
            loss = losses["loss"].detach()
            if world_size > 1:
                # The global batch's loss: the mean of the ranks' (masked_chunk_loss).
                loss = loss.clone()
                dist.all_reduce(loss)
                loss /= world_size
            result.losses.append(float(loss))
            elapsed = time.perf_counter() - started
            result.samples_per_s = (step - start_step) * config.batch_size / elapsed
            result.data_fraction = data_s / elapsed
            if step % config.log_every_steps == 0 or step == total_steps:
                progress.set_postfix(
                    loss=f"{result.losses[-1]:.4f}",
                    l1_rad=f"{float(losses['l1_rad']):.4f}",
                    samples_s=f"{result.samples_per_s:.0f}",
                    data=f"{100 * result.data_fraction:.0f}%",
                    refresh=False,
                )
            progress.update(1)
            if held_out and (step % config.validate_every_steps == 0 or step == total_steps):
                scores = validation_loss(
                    published, held_out, config.validation_samples, config.seed
                )
                entry = {"step": float(step), **scores}
                result.validation.append(entry)
                if rank == 0:
                    run_path.mkdir(parents=True, exist_ok=True)
                    with (run_path / "validation.jsonl").open("a") as stream:
                        stream.write(json.dumps(entry) + "\n")
                model.train()
            if step % config.checkpoint_every_steps == 0 or step == total_steps:
                meta = {
                    "step": step,
                    "seed": config.seed,
                    "world_size": world_size,
                    "written_by_rank": rank,
                    "loss": result.losses[-1],
                    "sources": source_meta,
                    "config": config.model_dump(mode="json"),
                }
                state: dict[str, Any] = {"optimizer": optimizer.state_dict(), "step": step}
                if averaged is not None:
                    state["raw_model"] = policy.state_dict()
                if rank == 0:
                    result.checkpoint = save_checkpoint(
                        run_path / "checkpoints" / checkpoint_name(step),
                        published,
                        training=meta,
                        training_state=state,
                    )
                    for old in list_checkpoints(run_path)[: -config.keep_last_checkpoints]:
                        shutil.rmtree(old, ignore_errors=True)
                if world_size > 1:
                    dist.barrier()
    finally:
        progress.close()
        policy.batch_shard = None  # the returned policy is a one-process module again
        # The DDP wrapper's reducer holds the process group: released here, before the group
        # is destroyed, not at interpreter exit (where gloo's threads could abort the rank).
        model = policy
        gc.collect()
        if initialized_here:
            dist.destroy_process_group()
    if rank == 0 and result.checkpoint is None and checkpoint_dir is not None:
        # Stopped after its last checkpoint (before the caller recorded it): nothing to run.
        result.checkpoint = checkpoint_dir
    result.final_loss = result.losses[-1] if result.losses else resumed_loss
    result.step = step
    result.policy = published
    return result


class WeightAverage:
    """Exponential moving average of a policy's parameters (buffers are copied as they are).

    Args:
        policy: The policy being trained (its current weights start the average).
        decay: Largest decay; early steps use ``(1 + step) / (10 + step)`` when smaller, so
            the average is not dominated by the initial weights.

    """

    def __init__(self, policy: Policy, decay: float) -> None:
        self.policy: Policy = copy.deepcopy(policy)
        self.policy.requires_grad_(False)
        self.decay = decay

    def decay_at(self, step: int) -> float:
        """Decay applied after optimizer step ``step`` (1-based)."""
        return min(self.decay, (1.0 + step) / (10.0 + step))

    @torch.no_grad()
    def update(self, policy: Policy, step: int) -> None:
        """Move the average towards ``policy``'s weights after optimizer step ``step``."""
        weight = 1.0 - self.decay_at(step)
        averaged: list[torch.Tensor] = list(self.policy.parameters())
        torch._foreach_lerp_(averaged, [p.detach() for p in policy.parameters()], weight)
        for mine, theirs in zip(self.policy.buffers(), policy.buffers(), strict=True):
            mine.copy_(theirs)


def validation_loss(
    policy: Policy, datasets: Mapping[str, ChunkDataset], samples: int, seed: int
) -> dict[str, float]:
    """Masked L1 (rad) of the policy on held-out samples of each source (fixed sample set).

    The same ``samples`` frames of each held-out set are scored every time (drawn with
    ``seed``), so successive values form a learning curve.
    """
    policy.eval()
    device = next(policy.parameters()).device
    scores: dict[str, float] = {}
    with torch.no_grad():
        for name, dataset in datasets.items():
            rng = np.random.default_rng([seed, 0xCAFE])
            count = min(samples, len(dataset))
            indices = rng.choice(len(dataset), size=count, replace=False)
            total, weight = 0.0, 0.0
            for start in range(0, count, 256):
                batch = batch_to_device(
                    collate_batch(dataset.batch(indices[start : start + 256])), device
                )
                mask = batch[ACTION_MASK_KEY]
                predicted = policy.unnormalize_actions(policy.predict_normalized(batch))
                error = (predicted - batch[ACTIONS_KEY].float()).abs().mean(dim=-1)
                total += float((error * mask).sum())
                weight += float(mask.sum())
            scores[name] = total / max(weight, 1.0)
    return scores


__all__: Sequence[str] = [
    "ResumeError",
    "TrainResult",
    "WeightAverage",
    "learning_rate_at",
    "step_seed",
    "train",
]
