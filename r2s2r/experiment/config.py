"""Typed configuration of the 2×2 co-training experiment: one schema, presets as files.

A preset is ``config/experiment/<name>.yaml`` (each file's header says what it is sized for:
``reduced``, the default, finishes in about an hour on a 2-core CPU machine; ``paper`` is the
paper's scale; ``smoke`` checks the pipeline in minutes). A new preset is a new file there.
Every size is also a command-line option of ``r2s2r experiment``
(:mod:`r2s2r.experiment.options`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigModel, load_config, resolve_config_path
from r2s2r_policy.evaluation.trials import (
    DEFAULT_CONDITION_COUNTS,
    EVALUATION_BASE_SEED,
    VALIDATION_BASE_SEED,
)

from r2s2r.experiment.results import BEHAVIOR_LEVELS, REAL_ONLY, WORLD_LEVELS, configuration_name

DEFAULT_PRESET = "reduced"
"""The preset ``r2s2r experiment`` runs when none is named."""


def _shipped_presets() -> tuple[str, ...]:
    folder = resolve_config_path(f"experiment/{DEFAULT_PRESET}.yaml").parent
    names = sorted(path.stem for path in folder.glob("*.yaml"))
    return tuple(sorted(names, key=lambda name: name != DEFAULT_PRESET))


PRESETS: tuple[str, ...] = _shipped_presets()
"""Shipped presets: every ``config/experiment/<preset>.yaml``, the default first (a new preset
is a new file there)."""

ALL_CONFIGURATIONS: tuple[str, ...] = tuple(
    configuration_name(w, b) for w in WORLD_LEVELS for b in BEHAVIOR_LEVELS
)
"""The four simulated configurations, world × behavior."""


class TranslationPlan(ConfigModel):
    """What the visual-translation experiment adds to a preset (``translation:``).

    Its stages and policies: :mod:`r2s2r.experiment.translation`.
    """

    few_real_demos: int = Field(
        default=25, ge=4, le=100000, description="Successful real demos of the few-real policies."
    )
    translator: Literal["structure", "colour"] = Field(
        default="structure", description="Translator kind (r2s2r translate train --model)."
    )
    translator_steps: int = Field(
        default=3000, ge=1, le=1_000_000, description="structure: translator training steps."
    )
    score_frames: int = Field(
        default=600, ge=10, le=100000, description="Frames per set when scoring the translation."
    )


class ExperimentConfig(ConfigModel):
    """Sizes, seeds, inputs and evaluator of one experiment run."""

    preset: str = Field(default=DEFAULT_PRESET, description="Name of the preset this derives from.")
    real_demos: int = Field(
        default=20,
        ge=1,
        le=100000,
        description="Successful real demonstrations (the operator re-records failed takes).",
    )
    demo_seed: int = Field(default=0, ge=0, description="Seed of demonstration 0 (i: + i).")
    sim_episodes_per_configuration: int = Field(
        default=200, ge=1, le=1000000, description="Simulated episodes per configuration."
    )
    generation_seed: int = Field(default=0, ge=0, description="Generation base seed.")
    generation_workers: int = Field(default=2, ge=1, le=1024, description="Generation workers.")
    generation_ray_address: str = Field(
        default="",
        description="Generate on the Ray cluster at this address (HOST:PORT of its head; "
        "'local' starts a local Ray; empty: worker processes on this machine). Where episodes "
        "run, not what they are: a cached generation stage stays, and a partial one resumes "
        "on the other placement. The experiment directory must be on storage every node "
        "shares (docs/scaling.md).",
    )
    configurations: list[str] = Field(
        default_factory=lambda: list(ALL_CONFIGURATIONS),
        description="Co-trained policies (simulated configurations) to run.",
    )
    train_config: str = Field(
        default="policy/cotrain.yaml",
        description="Base TrainConfig YAML (relative: against config/).",
    )
    train_steps: int = Field(default=2000, ge=1, description="Optimizer steps per policy.")
    image_px: int = Field(default=64, ge=16, le=1024, description="Policy input size (square).")
    batch_size: int = Field(default=32, ge=1, le=4096, description="Training batch size.")
    sim_ratio: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="Co-training: share of samples from sim."
    )
    seed: int = Field(default=0, ge=0, description="Training seed (the same for every policy).")
    train_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra TrainConfig fields merged last (e.g. policy.model for tiny models).",
    )
    trials_per_condition: dict[str, int] = Field(
        default_factory=lambda: dict(DEFAULT_CONDITION_COUNTS),
        description="Evaluation trials per condition (default: the paper's 24 + 26).",
    )
    evaluation_base_seed: int = Field(
        default=EVALUATION_BASE_SEED, ge=0, description="Seed of trial 0."
    )
    execution: Literal["receding", "temporal_ensemble"] = Field(
        default="temporal_ensemble", description="How the inference engine executes chunks."
    )
    executed_steps: int = Field(
        default=3, ge=1, le=256, description="receding: chunk steps run before the next chunk."
    )
    execution_selection_trials: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="0: every policy is evaluated with `execution`. N > 0: each trained policy "
        "first runs N nominal validation trials (from validation_base_seed, in its evaluation "
        "world, in process) under each execution (receding with executed_steps, temporal "
        "ensembling) and is evaluated with the one that succeeded more often (ties: "
        "`execution`): a choice made per checkpoint on validation seeds, never on the "
        "evaluation's.",
    )
    validation_base_seed: int = Field(
        default=VALIDATION_BASE_SEED,
        ge=0,
        description="Seed of validation trial 0 (execution selection); its range must not "
        "overlap the evaluation's or the capacity check's seeds.",
    )
    capacity_configuration: str = Field(
        default="nominal_planner",
        description="Capacity check: a policy trained only on this configuration's simulated "
        "data and evaluated in its own (nominal) simulator world ('' = skip).",
    )
    capacity_world: str = Field(
        default="world/nominal.yaml",
        description="World the capacity policy is evaluated in (relative: config/).",
    )
    capacity_trials: int = Field(
        default=50, ge=1, le=100000, description="Nominal trials of the capacity check."
    )
    evaluator: Literal["in_process", "ros"] = Field(
        default="in_process", description="in_process (fast) or ros (the graph, as on hardware)."
    )
    twin_config: str = Field(
        default="twin/default.yaml", description="The real twin's world (relative: config/)."
    )
    real_time_factor: float = Field(
        default=1.0, gt=0.0, le=100.0, description="ROS evaluator: speed of the launched twin."
    )
    real_dataset: str = Field(
        default="", description="Use this real dataset instead of recording demonstrations."
    )
    grounding_artifact: str = Field(
        default="",
        description="Use this grounding artifact instead of running r2s2r ground: the cell "
        "is run grounded with it (demos, evaluation).",
    )
    sim_datasets: dict[str, str] = Field(
        default_factory=dict,
        description="Configuration -> simulated dataset to use instead of generating it.",
    )
    translation: TranslationPlan | None = Field(
        default=None,
        description="The visual-translation experiment (r2s2r.experiment.translation) "
        "instead of the 2x2; None: the 2x2.",
    )
    command_timeout_s: float = Field(
        default=7200.0,
        gt=0.0,
        description="Wall-clock limit of the demos and grounding stages' commands.",
    )

    @model_validator(mode="after")
    def _validation_seeds_apart(self) -> ExperimentConfig:
        if self.execution_selection_trials == 0:
            return self
        evaluation = max(sum(self.trials_per_condition.values()), self.capacity_trials)
        first, last = (
            self.validation_base_seed,
            self.validation_base_seed + (self.execution_selection_trials),
        )
        if first < self.evaluation_base_seed + evaluation and self.evaluation_base_seed < last:
            raise ValueError(
                f"validation seeds [{first}, {last}) overlap the evaluation's "
                f"[{self.evaluation_base_seed}, {self.evaluation_base_seed + evaluation}): "
                "choices made on them would be tuned to the evaluation"
            )
        return self

    @field_validator("configurations")
    @classmethod
    def _known_configurations(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in ALL_CONFIGURATIONS]
        if unknown:
            raise ValueError(f"unknown configurations {unknown}; expected {ALL_CONFIGURATIONS}")
        if len(set(value)) != len(value):
            raise ValueError(f"configurations {value}: duplicates")
        return value

    @field_validator("capacity_configuration")
    @classmethod
    def _known_capacity(cls, value: str) -> str:
        if value and value not in ALL_CONFIGURATIONS:
            raise ValueError(
                f"capacity_configuration {value!r}: expected '' or one of {ALL_CONFIGURATIONS}"
            )
        return value

    @field_validator("sim_datasets")
    @classmethod
    def _known_datasets(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = [c for c in value if c not in ALL_CONFIGURATIONS]
        if unknown:
            raise ValueError(f"sim_datasets: unknown configurations {unknown}")
        return value

    @field_validator("trials_per_condition")
    @classmethod
    def _trials(cls, value: dict[str, int]) -> dict[str, int]:
        if any(v < 0 for v in value.values()) or sum(value.values()) == 0:
            raise ValueError(f"trials_per_condition {value}: expected counts >= 0, not all 0")
        return value


def preset_path(name: str) -> Path:
    """``config/experiment/<name>.yaml`` (installed share, else source tree).

    Raises:
        r2s2r_common.config.ConfigError: Unknown preset or file not found.

    """
    from r2s2r_common.config import ConfigError

    if name not in PRESETS:
        raise ConfigError(f"preset {name!r}: unknown; expected one of {list(PRESETS)}")
    return resolve_config_path(f"experiment/{name}.yaml")


def load_preset(name: str) -> ExperimentConfig:
    """Load a shipped preset; its ``preset`` field is its file's name."""
    return load_config(ExperimentConfig, preset_path(name)).model_copy(update={"preset": name})


FEW_REAL = "few_real"
"""The translation experiment's policy of the few real demonstrations alone."""
TRANSLATED_SUFFIX = "_translated"
"""A configuration's policy co-trained on its translated dataset: ``<configuration>_translated``."""


def policy_names(config: ExperimentConfig) -> list[str]:
    """Every policy an experiment trains (capacity aside), in its table's order."""
    if config.translation is None:
        return [REAL_ONLY, *config.configurations]
    names = [REAL_ONLY, FEW_REAL]
    for configuration in config.configurations:
        names += [configuration, f"{configuration}{TRANSLATED_SUFFIX}"]
    return names


def real_reference(config: ExperimentConfig) -> str:
    """Return the real-only policy whose real data the co-trained policies share."""
    return REAL_ONLY if config.translation is None else FEW_REAL


def co_trained_configuration(config: ExperimentConfig, name: str) -> str | None:
    """Return the simulated configuration a policy co-trained on (None: real only)."""
    if name in (REAL_ONLY, FEW_REAL):
        return None
    return name.removesuffix(TRANSLATED_SUFFIX)
