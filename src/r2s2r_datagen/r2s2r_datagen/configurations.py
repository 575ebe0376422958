"""The four configurations: world (grounded | nominal) × behavior (MimicGen | planner).

Episode ``i`` of every configuration uses seed ``base_seed + i`` and the *same* trial plan
(object type, arrival time, lateral offset, yaw, belt speed), drawn from the nominal world's
randomization ranges widened by the coverage settings, and the same lighting (drawn from
``coverage.lighting`` with the episode seed). The grounded world is
``apply_grounding(nominal, artifact)``, so two configurations with the same behavior differ
only in what grounding changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from r2s2r_common.config import ConfigError, load_config, read_yaml
from r2s2r_sim.task import TrialPlan, sample_trial
from r2s2r_world.grounding import check_artifact, check_world_overrides, non_finite_numbers
from r2s2r_world.world import LightingParams, WorldParams, apply_grounding, load_world

from r2s2r_datagen.config import ConfigurationSpec, CoverageConfig, DatagenConfig, LightingRanges
from r2s2r_datagen.generator import EpisodeJob, EpisodeSkipped, generator_availability

BELT_SPEED_TOLERANCE_MPS = 1e-9

LIGHTING_STREAM = 0x11647
"""Second seed word of the lighting draw (independent of the trial plan's draw)."""


def with_coverage(world: WorldParams, coverage: CoverageConfig) -> WorldParams:
    """Return ``world`` with its randomization ranges replaced by the coverage settings.

    Raises:
        ConfigError: If ``object_mix`` names a type the world does not define.

    """
    randomization = world.randomization
    update: dict[str, Any] = {}
    if coverage.belt_speed_mps is not None:
        update["belt_speed_mps"] = tuple(coverage.belt_speed_mps)
    if coverage.object_mix is not None:
        unknown = sorted(set(coverage.object_mix) - set(world.objects))
        if unknown:
            raise ConfigError(
                f"coverage.object_mix: types {unknown} are not in the world's objects "
                f"{sorted(world.objects)}"
            )
        update["object_mix"] = dict(coverage.object_mix)
    if not update:
        return world
    return world.model_copy(update={"randomization": randomization.model_copy(update=update)})


def draw_lighting(seed: int, ranges: LightingRanges) -> LightingParams:
    """Draw the lighting of episode ``seed`` (the same in every configuration)."""
    rng = np.random.default_rng([seed, LIGHTING_STREAM])
    azimuth = np.radians(rng.uniform(*ranges.azimuth_deg))
    elevation = np.radians(rng.uniform(*ranges.elevation_deg))
    # The light travels from (azimuth, elevation) above the cell down into it.
    direction = -np.array(
        [
            np.cos(elevation) * np.cos(azimuth),
            np.cos(elevation) * np.sin(azimuth),
            np.sin(elevation),
        ]
    )
    return LightingParams(
        diffuse=float(rng.uniform(*ranges.diffuse)),
        ambient=float(rng.uniform(*ranges.ambient)),
        specular=float(rng.uniform(*ranges.specular)),
        direction=(float(direction[0]), float(direction[1]), float(direction[2])),
    )


class GroundingArtifactMissingError(ConfigError):
    """The grounded configurations need an artifact that does not exist yet."""


@dataclass(frozen=True)
class PreparedConfiguration:
    """A configuration ready to generate, or the reason it cannot run here.

    Attributes:
        spec: The configuration.
        world: Its world (``None`` when unavailable).
        world_config_id: ``nominal`` or ``grounded-<first 12 hex of the artifact's sha256>``.
        unavailable: Why it cannot run (missing generator or artifact), else ``None``.

    """

    spec: ConfigurationSpec
    world: WorldParams | None
    world_config_id: str
    unavailable: str | None = None


def load_datagen_config(path: str | Path) -> DatagenConfig:
    """Load ``configurations.yaml``.

    Raises:
        ConfigError: Missing file or invalid content (named key, value, expectation).

    """
    return load_config(DatagenConfig, path)


def nominal_world_path(config: DatagenConfig, config_path: str | Path) -> Path:
    """Return the nominal world file (relative paths are relative to the configurations file)."""
    path = Path(config.nominal_world_path)
    return path if path.is_absolute() else (Path(config_path).parent / path).resolve()


def with_inputs(
    config: DatagenConfig,
    config_path: str | Path | None = None,
    *,
    grounding_artifact: str | Path | None = None,
    mimicgen_source: str | Path | None = None,
) -> DatagenConfig:
    """Return the configurations with their inputs set, to be written anywhere and run.

    Args:
        config: The configurations (the loaded file is not changed).
        config_path: The file they were loaded from: the nominal world, relative to it, is
            made absolute (None: left as it is).
        grounding_artifact: The grounded world's artifact (``grounding_artifact_path``).
        mimicgen_source: MimicGen's source demonstrations
            (``behavior_options.mimicgen.source_dataset``).

    """
    update: dict[str, Any] = {}
    if config_path is not None:
        update["nominal_world_path"] = str(nominal_world_path(config, config_path))
    if grounding_artifact is not None:
        update["grounding_artifact_path"] = str(grounding_artifact)
    if mimicgen_source is not None:
        options = {name: dict(values) for name, values in config.behavior_options.items()}
        options.setdefault("mimicgen", {})["source_dataset"] = str(mimicgen_source)
        update["behavior_options"] = options
    return config.model_copy(update=update)


def load_grounding_overrides(path: str | Path) -> dict[str, Any]:
    """Read the world overrides of a grounding artifact.

    Accepts the artifact written by ``r2s2r ground`` (its ``world_overrides`` section, after
    :func:`r2s2r_world.grounding.check_artifact`, the full check every consumer of an artifact
    runs: schema, units, poses, intrinsics, records consistent with the overrides) or a plain
    override mapping mirroring :class:`WorldParams` (checked as ``world_overrides`` is).

    Raises:
        GroundingArtifactMissingError: The file does not exist (run ``r2s2r ground`` first).
        ConfigError: The file is not a valid artifact.

    """
    artifact_path = Path(path)
    if not artifact_path.is_file():
        raise GroundingArtifactMissingError(
            f"grounding artifact {artifact_path} not found: run `r2s2r ground` first (or set "
            "grounding_artifact_path)"
        )
    data = read_yaml(artifact_path)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{artifact_path}: expected a mapping, got {type(data).__name__}")
    if "schema_version" in data or "world_overrides" in data:
        # A grounding artifact (possibly cut short): the checks every consumer shares.
        return dict(check_artifact(dict(data), str(artifact_path))["world_overrides"])
    bad = non_finite_numbers(data)
    if bad:
        raise ConfigError(f"{artifact_path}: {', '.join(bad[:3])}: expected finite numbers")
    check_world_overrides(data, str(artifact_path), key="")
    return dict(data)


def artifact_config_id(overrides: Mapping[str, Any]) -> str:
    """``grounded-<hash>``: identifies the grounded world by its overrides' content."""
    text = json.dumps(overrides, sort_keys=True, default=str)
    return "grounded-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def prepare_configurations(
    config: DatagenConfig,
    config_path: str | Path,
    names: Sequence[str] = (),
    artifact_path: str | Path | None = None,
    generator_overrides: Mapping[str, str] | None = None,
) -> tuple[WorldParams, list[PreparedConfiguration]]:
    """Build the worlds of the requested configurations and check their generators.

    Args:
        config: The configurations file's content.
        config_path: Where it was read from (for relative paths).
        names: Configurations to prepare; empty for all.
        artifact_path: Grounding artifact (default: ``config.grounding_artifact_path``).
        generator_overrides: ``behavior → "module:factory"`` replacing registered generators.

    Returns:
        The nominal world and one entry per configuration; unavailable ones carry the reason.

    Raises:
        ConfigError: Unknown configuration name, or an invalid world or artifact.

    """
    specs = [config.configuration(n) for n in names] if names else list(config.configurations)
    nominal = with_coverage(load_world(nominal_world_path(config, config_path)), config.coverage)
    grounded: WorldParams | None = None
    grounded_id = "grounded"
    grounded_reason: str | None = None
    if any(s.world == "grounded" for s in specs):
        try:
            overrides = load_grounding_overrides(artifact_path or config.grounding_artifact_path)
        except GroundingArtifactMissingError as error:
            grounded_reason = str(error)
        else:
            grounded = apply_grounding(nominal, overrides)
            grounded_id = artifact_config_id(overrides)
    prepared = []
    for spec in specs:
        reason = generator_availability(
            spec.behavior, config.behavior_options.get(spec.behavior, {}), generator_overrides
        )
        if spec.world == "grounded":
            reason = grounded_reason or reason
            world, world_id = grounded, grounded_id
        else:
            world, world_id = nominal, "nominal"
        prepared.append(
            PreparedConfiguration(spec, world if reason is None else None, world_id, reason)
        )
    return nominal, prepared


def episode_seed(base_seed: int, episode_index: int) -> int:
    """Seed of episode ``episode_index`` in every configuration."""
    return base_seed + episode_index


def sample_plan(nominal: WorldParams, seed: int, randomize_belt_speed: bool) -> TrialPlan:
    """Return the trial of one seed: the same in every configuration (nominal world ranges)."""
    return sample_trial(nominal, seed, randomize_belt_speed=randomize_belt_speed)


def check_plan(plan: TrialPlan, world: WorldParams) -> None:
    """Reject bad input before simulating.

    Raises:
        EpisodeSkipped: ``belt_speed_out_of_range`` when the plan's belt speed is outside
            ``world.randomization.belt_speed_mps``; ``unknown_object`` for an object type the
            world does not define.

    """
    low, high = world.randomization.belt_speed_mps
    speed = plan.belt_speed_mps
    if not low - BELT_SPEED_TOLERANCE_MPS <= speed <= high + BELT_SPEED_TOLERANCE_MPS:
        raise EpisodeSkipped(
            "belt_speed_out_of_range",
            f"belt speed {speed:.4f} m/s outside the configured range [{low}, {high}] m/s",
        )
    for arrival in plan.arrivals:
        if arrival.instance.type_name not in world.objects:
            raise EpisodeSkipped(
                "unknown_object",
                f"object type {arrival.instance.type_name!r} not in the world's objects",
            )


def make_jobs(
    nominal: WorldParams,
    prepared: Sequence[PreparedConfiguration],
    episode_indices: Sequence[int],
    base_seed: int,
    config: DatagenConfig,
) -> list[EpisodeJob]:
    """One job per (available configuration, episode index), interleaved by episode index.

    Interleaving makes a partial run cover every configuration evenly.
    """
    jobs = []
    for index in episode_indices:
        seed = episode_seed(base_seed, index)
        plan = sample_plan(nominal, seed, config.randomize_belt_speed)
        lighting = None
        if config.coverage.lighting is not None:
            lighting = draw_lighting(seed, config.coverage.lighting)
        for entry in prepared:
            if entry.world is None:
                continue
            world = entry.world
            if lighting is not None:
                world = world.model_copy(update={"lighting": lighting})
            jobs.append(
                EpisodeJob(
                    configuration=entry.spec.name,
                    behavior=entry.spec.behavior,
                    episode_index=index,
                    seed=seed,
                    world=world,
                    world_config_id=entry.world_config_id,
                    plan=plan,
                    attempt=0,
                    recording=config.recording,
                    task=config.task,
                )
            )
    return jobs
