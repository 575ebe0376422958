"""What ``r2s2r record-demos`` is asked to record, and where: its typed config and output names.

The procedure that runs it is :func:`r2s2r_recorder.demos.record_demos`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel, resolve_config_path

MANIFEST_NAME = "record_demos.json"
BAGS_DIRNAME = "bags"
DATASET_NAME = "dataset.hdf5"
MAX_DOMAIN_ID = 232
"""Largest ROS_DOMAIN_ID whose DDS ports are valid on every platform."""


class RecordDemosError(RuntimeError):
    """The procedure cannot run as asked (e.g. it would replace files it did not write)."""


class RecordDemosConfig(ConfigModel):
    """What ``r2s2r record-demos`` records, and where."""

    episodes: int = Field(
        default=0, ge=0, le=100000, description="Takes (trials) to record; 0 with successes."
    )
    successes: int = Field(
        default=0,
        ge=0,
        le=100000,
        description="Record until this many takes succeeded (0: record `episodes` takes); "
        "only the successful takes are converted.",
    )
    max_attempts: int = Field(
        default=0,
        ge=0,
        le=100000,
        description="With successes: the most takes to try; 0: twice `successes`.",
    )
    out_dir: str = Field(min_length=1, description="Output folder (bags, dataset, manifest).")
    dataset_path: str = Field(
        default="", description="Dataset file to write; empty: <out_dir>/dataset.hdf5."
    )
    twin_config: str = Field(
        default="", description="Twin YAML (hidden world); empty: config/twin/default.yaml."
    )
    launch_args: list[str] = Field(
        default_factory=list,
        description="Extra NAME:=VALUE arguments of the record_demos graph (override the rest).",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the first trial.")
    condition: str = Field(
        default="nominal",
        pattern=r"^(nominal|lighting|belt_speed|unseen_object)$",
        description="Trial condition of the twin.",
    )
    real_time_factor: float = Field(
        default=1.0, gt=0.0, le=50.0, description="Twin simulation speed vs wall clock."
    )
    timeout_s: float = Field(
        default=0.0,
        ge=0.0,
        le=86400.0,
        description="Wall-clock limit of the recording; 0: 120 s + 60 s per episode.",
    )
    max_staleness_s: float = Field(
        default=2.0,
        gt=0.0,
        le=10.0,
        description="Conversion: largest age of a stream's latest sample at a frame. One limit "
        "for all streams; the belt-speed node (on the twin's 500 Hz /clock) stalls up to ~1.1 s "
        "on a loaded 2-core machine, cameras and joints much less (cadence in each bag).",
    )
    grace_period_s: float = Field(
        default=10.0, gt=0.0, le=120.0, description="Time each node gets to stop on SIGINT."
    )
    force: bool = Field(
        default=False, description="Replace bags or a dataset that no manifest says are ours."
    )
    domain_id: int | None = Field(
        default=None,
        ge=0,
        le=MAX_DOMAIN_ID,
        description="ROS_DOMAIN_ID of the recording graph; None: a private one claimed for "
        "this process (lock file per id; localhost discovery).",
    )

    @model_validator(mode="after")
    def _one_way_to_count(self) -> RecordDemosConfig:
        if (self.episodes > 0) == (self.successes > 0):
            raise ValueError(
                f"episodes = {self.episodes}, successes = {self.successes}: expected exactly "
                "one of them > 0 (a fixed number of takes, or takes until that many succeed)"
            )
        if self.max_attempts and not self.successes:
            raise ValueError(f"max_attempts = {self.max_attempts}: only with successes")
        if self.successes and self.attempts_cap < self.successes:
            raise ValueError(
                f"max_attempts = {self.max_attempts} < successes = {self.successes}: expected "
                "at least as many attempts as wanted successes"
            )
        return self

    @property
    def until_successes(self) -> bool:
        """Takes are recorded until ``successes`` succeeded (not a fixed count)."""
        return self.successes > 0

    @property
    def attempts_cap(self) -> int:
        """The most takes the graph runs: ``episodes``, or ``max_attempts`` (2 × successes)."""
        if not self.until_successes:
            return self.episodes
        return self.max_attempts or 2 * self.successes

    @property
    def out_path(self) -> Path:
        """The output folder (absolute)."""
        return Path(self.out_dir).resolve()

    @property
    def bags_path(self) -> Path:
        """Folder of the episode bags."""
        return self.out_path / BAGS_DIRNAME

    @property
    def dataset(self) -> Path:
        """The dataset file (absolute)."""
        return (
            Path(self.dataset_path).resolve() if self.dataset_path else self.out_path / DATASET_NAME
        )

    @property
    def manifest_path(self) -> Path:
        """The manifest file."""
        return self.out_path / MANIFEST_NAME

    @property
    def wall_limit_s(self) -> float:
        """Wall-clock limit of the recording graph."""
        return self.timeout_s or 120.0 + 60.0 * self.attempts_cap


def default_twin_config() -> Path:
    """Return the shipped ``config/twin/default.yaml`` (share dir, else the source tree)."""
    return resolve_config_path("twin/default.yaml")
