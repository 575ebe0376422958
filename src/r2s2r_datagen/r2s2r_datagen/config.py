"""Typed configuration of simulated-data generation.

Two schemas:

- :class:`DatagenConfig` (``config/datagen/configurations.yaml``): *what* is generated — the
  four configurations (world grounded or nominal × behavior MimicGen or planner), where the
  nominal world and the grounding artifact live, how episodes are recorded, and options per
  behavior.
- :class:`GenerateConfig` (``config/nodes/sim_generate.yaml``, the ``sim_generate`` node's ROS
  parameters and the ``r2s2r generate`` options): *how much* and *where* — episodes per
  configuration, which configurations, workers, Ray address, output directory, resume.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_sim.backend_config import SimBackendConfig

WorldKind = Literal["nominal", "grounded"]
BehaviorName = Literal["mimicgen", "planner"]

_NAME = r"^[a-z][a-z0-9_]*$"
_OVERRIDE = re.compile(r"^([a-z][a-z0-9_]*)=([A-Za-z_][\w.]*):([A-Za-z_]\w*)$")


class RecordingConfig(ConfigModel):
    """How a generated episode is sampled: like the real dataset (bag → dataset conversion)."""

    rate_hz: float = Field(
        default=10.0, gt=0.0, le=100.0, description="Frame rate of the episode (policy rate)."
    )
    image_width_px: int = Field(default=128, ge=8, le=4096, description="Dataset image width.")
    image_height_px: int = Field(default=128, ge=8, le=4096, description="Dataset image height.")
    compression_level: int = Field(
        default=1, ge=0, le=9, description="gzip level of the image datasets in the shards."
    )
    perception: bool = Field(
        default=True,
        description="Belt speed and the tracked object from the cell's perception (the "
        "belt_speed and object_tracker cores on the simulated encoder and the rendered head "
        "RGB-D frames), as the deployed cell makes them; off: the commanded belt speed and no "
        "object track (no policy trained with tracked-object inputs can use such data).",
    )
    belt_speed_config: str = Field(
        default="nodes/belt_speed.yaml",
        description="The belt_speed node's parameters (relative: against config/).",
    )
    object_tracker_config: str = Field(
        default="nodes/object_tracker.yaml",
        description="The object_tracker node's parameters (relative: against config/).",
    )
    cell_knowledge_world: str = Field(
        default="",
        description="What perception knows of the simulated cell (its camera_info, /tf_static "
        "and roller radius). Empty: the simulated world itself, with a grounded cell's "
        "perception settings (no belt-plane anchoring), as the deployed cell runs once it is "
        "grounded (docs/architecture.md section 3); a world file (relative: against config/): "
        "that world, with the node files' settings, as a cell before grounding.",
    )
    encoder_rate_hz: float = Field(
        default=100.0, gt=0.0, le=1000.0, description="Belt encoder sampling rate (as the cell)."
    )


class LightingRanges(ConfigModel):
    """Lighting drawn per episode: one directional light plus ambient (uniform in each range)."""

    diffuse: tuple[float, float] = Field(
        default=(0.25, 1.0), description="Directional intensity [low, high]."
    )
    ambient: tuple[float, float] = Field(
        default=(0.05, 0.4), description="Ambient intensity [low, high]."
    )
    specular: tuple[float, float] = Field(
        default=(0.0, 0.3), description="Specular intensity [low, high]."
    )
    azimuth_deg: tuple[float, float] = Field(
        default=(-180.0, 180.0), description="Direction the light comes from, about world z."
    )
    elevation_deg: tuple[float, float] = Field(
        default=(20.0, 90.0), description="Height of the light above the horizon (90: overhead)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LightingRanges:
        for name in ("diffuse", "ambient", "specular", "azimuth_deg", "elevation_deg"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name} = [{low}, {high}]: expected low <= high")
        if not (self.diffuse[0] >= 0.0 and self.diffuse[1] <= 2.0):
            raise ValueError(f"diffuse = {list(self.diffuse)}: expected within [0, 2]")
        for name in ("ambient", "specular"):
            low, high = getattr(self, name)
            if not (low >= 0.0 and high <= 1.0):
                raise ValueError(f"{name} = [{low}, {high}]: expected within [0, 1]")
        if not (self.elevation_deg[0] > 0.0 and self.elevation_deg[1] <= 90.0):
            raise ValueError(
                f"elevation_deg = {list(self.elevation_deg)}: expected within (0, 90] (from above)"
            )
        return self


class CoverageConfig(ConfigModel):
    """What simulated data covers beyond the real demonstrations (docs/architecture.md, section 7).

    Real demonstrations are recorded at the cell's nominal conditions; simulation is where the
    policy sees what they do not cover. Each range replaces the nominal world's for generation
    only, and every configuration draws the same values for the same episode seed (so
    configurations still differ only in grounding). ``None`` keeps the nominal world's.
    """

    belt_speed_mps: tuple[float, float] | None = Field(
        default=None, description="Belt speed range of generated trials (m/s)."
    )
    object_mix: dict[str, float] | None = Field(
        default=None, description="Object type weights of generated trials (types of the world)."
    )
    lighting: LightingRanges | None = Field(
        default=None, description="Lighting drawn per episode (None: the world's lighting)."
    )

    @model_validator(mode="after")
    def _valid(self) -> CoverageConfig:
        if self.belt_speed_mps is not None:
            low, high = self.belt_speed_mps
            if not 0.0 < low <= high <= 2.0:
                raise ValueError(
                    f"belt_speed_mps = [{low}, {high}]: expected 0 < low <= high <= 2 m/s"
                )
        mix = self.object_mix
        if mix is not None and (any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0):
            raise ValueError(
                f"object_mix = {self.object_mix}: expected weights >= 0 with a positive sum"
            )
        return self


class ConfigurationSpec(ConfigModel):
    """One generated dataset: a world and a behavior."""

    name: str = Field(pattern=_NAME, description="Configuration name (dataset file stem).")
    world: WorldKind = Field(description="nominal world, or nominal + grounding artifact.")
    behavior: BehaviorName = Field(description="Behavior source: MimicGen or planner.")
    description: str = Field(default="", description="What this configuration is for.")


class DatagenConfig(ConfigModel):
    """The generation configurations (``config/datagen/configurations.yaml``).

    Relative ``nominal_world_path`` is resolved against the folder of the configurations file;
    a relative ``grounding_artifact_path`` against the current directory (where ``runs/`` is).
    """

    schema_version: Literal[1] = Field(default=1, description="Schema version of this file.")
    task: str = Field(default="pick_sort", description="Task name written into every episode.")
    nominal_world_path: str = Field(
        default="../world/nominal.yaml", description="Nominal world (WorldParams YAML)."
    )
    grounding_artifact_path: str = Field(
        default="runs/grounding/artifact.yaml",
        description="Grounding artifact written by `r2s2r ground` (world_overrides section).",
    )
    randomize_belt_speed: bool = Field(
        default=True,
        description="Draw the belt speed per episode from the nominal world's randomization "
        "(coverage.belt_speed_mps replaces its range).",
    )
    coverage: CoverageConfig = Field(
        default_factory=CoverageConfig,
        description="Belt speeds, objects and lighting the simulated data covers.",
    )
    recording: RecordingConfig = Field(default_factory=RecordingConfig)
    simulator: SimBackendConfig = Field(
        default_factory=SimBackendConfig,
        description="Simulator backend of the workers (kind: mujoco | isaac).",
    )
    configurations: list[ConfigurationSpec] = Field(
        min_length=1, description="The generated datasets."
    )
    behavior_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Options per behavior name, passed to that behavior's generator factory.",
    )

    @field_validator("configurations")
    @classmethod
    def _unique_names(cls, value: list[ConfigurationSpec]) -> list[ConfigurationSpec]:
        names = [c.name for c in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate configuration names {duplicates}")
        return value

    def configuration(self, name: str) -> ConfigurationSpec:
        """Return the configuration called ``name``.

        Raises:
            ConfigError: Unknown name (the message lists the choices).

        """
        for spec in self.configurations:
            if spec.name == name:
                return spec
        raise ConfigError(
            f"configuration {name!r}: unknown; expected one of "
            f"{[c.name for c in self.configurations]}"
        )


def parse_generator_override(text: str) -> tuple[str, str]:
    """Split ``behavior=module:factory`` into ``(behavior, "module:factory")``.

    Raises:
        ValueError: If the text does not have that form.

    """
    match = _OVERRIDE.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"generator override {text!r}: expected 'behavior=module.path:factory_name'"
        )
    return match.group(1), f"{match.group(2)}:{match.group(3)}"


class GenerateConfig(ConfigModel):
    """Sizes and placement of one generation run (node parameters, CLI options)."""

    configurations_path: str = Field(
        default="",
        description="Configurations YAML (DatagenConfig); empty: the bundled "
        "config/datagen/configurations.yaml.",
    )
    configurations: list[str] = Field(
        default_factory=list, description="Configurations to run; empty: all of the file's."
    )
    episodes_per_configuration: int = Field(
        default=4, ge=1, le=1000000, description="Episodes (seeds) per configuration."
    )
    base_seed: int = Field(
        default=0, ge=0, le=2**40, description="Episode i uses seed base_seed + i everywhere."
    )
    workers: int = Field(default=2, ge=1, le=1024, description="Parallel worker processes.")
    ray_address: str = Field(
        default="",
        description="Empty: local process pool. 'local': start a local Ray. Otherwise the "
        "address of a Ray cluster (the run directory must be on storage its nodes share).",
    )
    output_dir: str = Field(
        default="runs/sim_generate", description="Run directory (ledger, shards, datasets)."
    )
    resume: bool = Field(
        default=True, description="Continue a run in output_dir, skipping finished episodes."
    )
    retry_failed: bool = Field(
        default=False,
        description="On resume, run every episode recorded as failed again, also those whose "
        "generation failed (a missed grasp: the same seed fails the same way again).",
    )
    retry_interrupted: bool = Field(
        default=True,
        description="On resume, run again the episodes that failed without a verdict: their "
        "shard could not be written (write_failed: a full disk), their worker crashed or they "
        "timed out. False: keep them as failed.",
    )
    check_disk_space: bool = Field(
        default=True,
        description="Before generating, refuse when the run directory's disk has less free "
        "space than the remaining episodes need (a conservative estimate from the recording "
        "settings: shards plus the merged copy).",
    )
    job_timeout_s: float = Field(
        default=600.0, gt=0.0, le=86400.0, description="Wall-clock limit of one episode job."
    )
    max_retries: int = Field(
        default=1, ge=0, le=5, description="Retries of a job whose worker crashed or hung."
    )
    grounding_artifact_path: str = Field(
        default="", description="Overrides the configurations file's artifact path if set."
    )
    generator_overrides: list[str] = Field(
        default_factory=list,
        description="'behavior=module:factory' entries replacing a behavior's generator "
        "(external or test generators).",
    )
    merge: bool = Field(default=True, description="Merge the shards into one file per config.")
    progress: bool = Field(default=True, description="Show a progress bar on stderr.")
    prepare_demos: bool = Field(
        default=False,
        description="If MimicGen's source demonstrations are missing, record them on the real "
        "twin first (`r2s2r record-demos`; on the grounded cell with prepare_grounding) and use "
        "them.",
    )
    demos_dataset_path: str = Field(
        default="runs/demos/dataset.hdf5",
        description="Source demonstrations when neither the configurations file nor the "
        "MimicGen config names one (recorded there by prepare_demos).",
    )
    demos_episodes: int = Field(
        default=6,
        ge=1,
        le=100000,
        description="Successful demonstrations prepare_demos records (failed takes are "
        "re-recorded with the next seed, at most twice as many takes).",
    )
    demos_seed: int = Field(
        default=0, ge=0, le=2**31 - 1, description="Seed of the first recorded demonstration."
    )
    demos_real_time_factor: float = Field(
        default=1.0, gt=0.0, le=50.0, description="Real twin speed while recording demos."
    )
    cell_launch_args: list[str] = Field(
        default_factory=list,
        description="NAME:=VALUE launch arguments for the cell graphs that prepare_demos and "
        "prepare_grounding start (record_demos, real_deploy), passed on unread.",
    )
    prepare_grounding: bool = Field(
        default=False,
        description="If the grounding artifact is missing, run `r2s2r ground` against the real "
        "twin first (when that command can start the twin): for the grounded configurations, "
        "and before prepare_demos records, so that the demos are recorded on the grounded cell.",
    )
    prepare_timeout_s: float = Field(
        default=1800.0, gt=0.0, le=86400.0, description="Wall-clock limit of each preparation."
    )

    @field_validator("generator_overrides")
    @classmethod
    def _check_overrides(cls, value: list[str]) -> list[str]:
        for item in value:
            parse_generator_override(item)
        return value

    @model_validator(mode="after")
    def _resume_flags(self) -> GenerateConfig:
        if self.retry_failed and not self.resume:
            raise ValueError("retry_failed = True: expected resume = True as well")
        return self

    def overrides(self) -> dict[str, str]:
        """``behavior → "module:factory"`` from :attr:`generator_overrides`."""
        return dict(parse_generator_override(item) for item in self.generator_overrides)


def bundled_configurations_path() -> Path:
    """Return the bundled ``config/datagen/configurations.yaml`` (installed, else source)."""
    try:
        from ament_index_python.packages import (
            PackageNotFoundError,
            get_package_share_directory,
        )

        try:
            path = (
                Path(get_package_share_directory("r2s2r"))
                / "config"
                / "datagen"
                / "configurations.yaml"
            )
            if path.is_file():
                return path
        except (PackageNotFoundError, OSError):  # OSError: no AMENT_PREFIX_PATH
            pass
    except ImportError:
        pass
    return Path(__file__).resolve().parents[3] / "config" / "datagen" / "configurations.yaml"
