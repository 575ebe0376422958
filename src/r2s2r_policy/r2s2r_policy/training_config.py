"""Co-training run configuration: the typed schema of a run and of its policy options."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel

from .spec import DEFAULT_IMAGE_KEYS, ModelConfig

THROUGHPUT_FIELDS = frozenset(
    {"progress_bar", "num_workers", "num_threads", "log_every_steps", "device", "image_store_dir"}
)
"""TrainConfig fields that change how fast a run trains and what it prints, never what it
produces (another device only by float rounding, like another machine): a trained policy is
kept when only these differ (the experiment leaves them out of its training stage's key)."""

RESUME_FREE_FIELDS = THROUGHPUT_FIELDS | frozenset(
    {
        # What a run keeps beside its weights (checkpoint files, the validation curve) and how
        # it reads samples (bit-identical batches either way: test_policy_batches.py). These
        # may change when a run resumes; the experiment keys on them, as its stage record
        # holds what they produce (the checkpoints kept, the validation record).
        "checkpoint_every_steps",
        "keep_last_checkpoints",
        "cache_images",
        "validate_every_steps",
        "validation_samples",
    }
)
"""TrainConfig fields that may change between a run and its resumption: the final weights do
not depend on them (a job preempted on a GPU may resume on the CPU and the other way round)."""


EpisodeOutcome = Literal["success", "failure", "unknown"]
"""Outcome of a recorded episode (``r2s2r_dataset`` metadata)."""


def _successes_only() -> list[EpisodeOutcome]:
    """Return the default kept outcomes: successful episodes only."""
    return ["success"]


class PolicyOptions(ConfigModel):
    """Policy choices made at training time (names and rate come from the data)."""

    image_keys: list[str] = Field(
        default_factory=lambda: list(DEFAULT_IMAGE_KEYS), min_length=1, description="Cameras."
    )
    image_height_px: int = Field(default=128, ge=16, le=1024, description="Model input height.")
    image_width_px: int = Field(default=128, ge=16, le=1024, description="Model input width.")
    chunk_length: int = Field(default=12, ge=1, le=256, description="Action chunk length H.")
    use_belt_speed: bool = Field(default=True, description="Feed belt speed to the policy.")
    use_object_track: bool = Field(
        default=True,
        description="Feed the tracked object (the object tracker's output, as the cell "
        "publishes it on /objects/tracks) to the policy.",
    )
    palm_object_features: bool = Field(
        default=False,
        description="Also feed the palm position and the tracked object relative to the palm "
        "(forward kinematics of the measured joints; r2s2r_policy.models.palm_frame).",
    )
    object_relative_reach: bool = Field(
        default=False,
        description="Also predict each chunk step's palm position relative to the tracked "
        "object, and move the arm there while the object is visible "
        "(r2s2r_policy.models.reach).",
    )
    action_representation: Literal["absolute", "delta"] = Field(
        default="absolute", description="Predict joint targets, or targets minus measured joints."
    )
    normalization: Literal["mean_std", "min_max"] = Field(
        default="mean_std", description="State/action normalisation."
    )
    model: ModelConfig = Field(default_factory=ModelConfig, description="Model type + params.")


class TrainConfig(ConfigModel):
    """Co-training run configuration (``config/policy/cotrain.yaml``)."""

    real_dataset: str | None = Field(default=None, description="Real dataset (file or dir).")
    sim_dataset: str | None = Field(default=None, description="Simulated dataset (file or dir).")
    sim_ratio: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Probability that a sample is drawn from sim."
    )
    episode_outcomes: list[EpisodeOutcome] = Field(
        default_factory=_successes_only,
        min_length=1,
        description="Train only on episodes with these outcomes (failed demos teach failure).",
    )
    policy: PolicyOptions = Field(default_factory=PolicyOptions, description="Policy options.")
    seed: int = Field(default=0, ge=0, description="Seed of init, sampling and augmentation.")
    steps: int = Field(default=3000, ge=1, description="Optimizer steps in total.")
    batch_size: int = Field(
        default=32,
        ge=1,
        le=4096,
        description="Samples per optimizer step, all processes together (under torchrun each "
        "of N processes takes batch_size / N: N must divide it).",
    )
    learning_rate: float = Field(default=1e-3, gt=0.0, le=1.0, description="Peak AdamW LR.")
    weight_decay: float = Field(default=1e-4, ge=0.0, le=1.0, description="AdamW weight decay.")
    warmup_steps: int = Field(default=100, ge=0, description="Linear LR warm-up steps.")
    lr_schedule: Literal["cosine", "constant"] = Field(
        default="cosine", description="LR after warm-up: cosine decay to 0 or constant."
    )
    grad_clip_norm: float = Field(default=10.0, gt=0.0, description="Gradient norm clip.")
    ema_decay: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Exponential moving average of the weights (Polyak averaging, as Diffusion "
        "Policy trains): checkpoints and held-out scores use the average, decay "
        "min(ema_decay, (1 + step) / (10 + step)) per step; the raw weights are kept for "
        "resuming (0 = off: checkpoints hold the raw weights).",
    )
    fused_optimizer: bool = Field(
        default=True,
        description="AdamW as one fused kernel over all parameters (CPU and CUDA; ~4x faster "
        "than the per-parameter loop on CPU). Off: torch's reference loop; the two agree to "
        "float rounding, not bit for bit, so a run resumes with the setting it started with.",
    )
    device: str = Field(
        default="auto",
        pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$",
        description="Where the policy trains: auto (CUDA when available, else CPU), cpu, cuda "
        "(under torchrun: the GPU of LOCAL_RANK) or cuda:N. CUDA is unverified on the "
        "development machines (no GPU there).",
    )
    checkpoint_every_steps: int = Field(default=500, ge=1, description="Checkpoint period.")
    keep_last_checkpoints: int = Field(default=3, ge=1, description="Checkpoints kept.")
    num_workers: int = Field(default=0, ge=0, le=64, description="DataLoader worker processes.")
    cache_images: bool = Field(
        default=True,
        description="Decode and resize every image once, into memory, before training (off: "
        "read and resize per sample, for datasets larger than memory).",
    )
    image_store_dir: str | None = Field(
        default=None,
        description="Keep the decoded, resized images in on-disk stores under this folder, "
        "read per batch (r2s2r_policy.data.image_store: built once per dataset and image size, "
        "shared by every run, DDP rank and DataLoader worker on them; a process holds its "
        "batches, not the dataset), instead of cache_images. The samples are the same bit for "
        "bit. The experiment reads a relative folder under its own directory.",
    )
    num_threads: int = Field(
        default=0, ge=0, le=256, description="torch intra-op threads (0 = torch default)."
    )
    log_every_steps: int = Field(default=10, ge=1, description="Progress-bar update period.")
    validation_fraction: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Share of each source's episodes held out of training to measure the "
        "learning curve on (0: none).",
    )
    validate_every_steps: int = Field(
        default=250, ge=1, description="Held-out loss period (steps), with validation_fraction."
    )
    validation_samples: int = Field(
        default=2048, ge=1, description="Held-out samples per source scored at each validation."
    )
    progress_bar: bool = Field(default=True, description="Show a tqdm bar on rank 0.")

    @model_validator(mode="after")
    def _sources_present(self) -> TrainConfig:
        if self.sim_ratio > 0 and self.sim_dataset is None and self.real_dataset is not None:
            raise ValueError(f"sim_ratio = {self.sim_ratio} but sim_dataset is not set")
        if self.sim_ratio < 1 and self.real_dataset is None and self.sim_dataset is not None:
            raise ValueError(f"sim_ratio = {self.sim_ratio} but real_dataset is not set")
        return self


__all__: Sequence[str] = [
    "RESUME_FREE_FIELDS",
    "THROUGHPUT_FIELDS",
    "EpisodeOutcome",
    "PolicyOptions",
    "TrainConfig",
]
