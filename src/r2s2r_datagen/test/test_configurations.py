import dataclasses
from pathlib import Path

import pytest
from r2s2r_common.config import ConfigError
from r2s2r_datagen.config import GenerateConfig, bundled_configurations_path
from r2s2r_datagen.configurations import (
    check_plan,
    load_datagen_config,
    make_jobs,
    prepare_configurations,
)
from r2s2r_datagen.generator import (
    EpisodeSkipped,
    GeneratorUnavailableError,
    classify_exception,
    make_generator,
)
from r2s2r_testing.generation import ARTIFACT_OVERRIDES, OVERRIDES
from r2s2r_world.kinematics import IkError
from r2s2r_world.world import deep_override


def _overrides() -> dict[str, str]:
    return GenerateConfig(generator_overrides=OVERRIDES).overrides()


def test_four_configurations_share_seeds_and_plans(configurations_file: Path) -> None:
    config = load_datagen_config(configurations_file)
    nominal, prepared = prepare_configurations(
        config, configurations_file, generator_overrides=_overrides()
    )
    assert [p.unavailable for p in prepared] == [None] * 4
    jobs = make_jobs(nominal, prepared, range(5), base_seed=100, config=config)
    assert len(jobs) == 20
    for index in range(5):
        group = [j for j in jobs if j.episode_index == index]
        assert {j.configuration for j in group} == {c.name for c in config.configurations}
        assert {j.seed for j in group} == {100 + index}
        assert all(j.plan == group[0].plan for j in group)  # identical trials
    plans = [j.plan for j in jobs if j.configuration == "nominal_planner"]
    assert len({p.belt_speed_mps for p in plans}) == 5  # randomized per episode
    low, high = nominal.randomization.belt_speed_mps
    assert all(low <= p.belt_speed_mps <= high for p in plans)
    # The worlds differ exactly by the artifact's overrides.
    grounded = next(j.world for j in jobs if j.configuration == "grounded_planner")
    nominal_world = next(j.world for j in jobs if j.configuration == "nominal_planner")
    expected = deep_override(nominal_world.model_dump(), ARTIFACT_OVERRIDES)
    assert grounded.model_dump() == expected
    assert grounded != nominal_world
    ids = {j.configuration: j.world_config_id for j in jobs}
    assert ids["nominal_planner"] == "nominal"
    assert ids["grounded_planner"].startswith("grounded-") and len(ids["grounded_planner"]) == 21


def test_missing_artifact_and_generator_are_reported(configurations_file: Path) -> None:
    (configurations_file.parent / "artifact.yaml").unlink()
    config = load_datagen_config(configurations_file)
    nominal, prepared = prepare_configurations(config, configurations_file)
    reasons = {p.spec.name: p.unavailable for p in prepared}
    assert "run `r2s2r ground` first" in reasons["grounded_planner"]
    # MimicGen may or may not be buildable here; if not, the reason names it.
    assert reasons["nominal_mimicgen"] is None or "mimicgen" in reasons["nominal_mimicgen"]
    runnable = {p.spec.name for p in prepared if p.world is not None}
    assert not runnable & {"grounded_mimicgen", "grounded_planner"}
    jobs = make_jobs(nominal, prepared, range(3), 0, config)
    assert {j.configuration for j in jobs} == runnable
    assert len(jobs) == 3 * len(runnable)
    with pytest.raises(GeneratorUnavailableError, match="no generator registered"):
        make_generator("teleport")
    with pytest.raises(GeneratorUnavailableError, match="cannot be imported"):
        make_generator("planner", overrides={"planner": "no_such_module_xyz:factory"})
    with pytest.raises(ConfigError, match="unknown"):
        prepare_configurations(config, configurations_file, names=["nope"])


def test_bad_input_is_classified(configurations_file: Path) -> None:
    config = load_datagen_config(configurations_file)
    nominal, prepared = prepare_configurations(
        config, configurations_file, generator_overrides=_overrides()
    )
    job = make_jobs(nominal, prepared, [0], 0, config)[0]
    check_plan(job.plan, job.world)  # in range: no exception
    too_fast = dataclasses.replace(job.plan, belt_speed_mps=0.5)
    with pytest.raises(EpisodeSkipped) as skipped:
        check_plan(too_fast, job.world)
    assert skipped.value.reason == "belt_speed_out_of_range"
    assert classify_exception(IkError("far")) == ("unreachable_object", True)
    assert classify_exception(EpisodeSkipped("no_detectable_grasp")) == (
        "no_detectable_grasp",
        True,
    )
    assert classify_exception(ZeroDivisionError()) == ("error:ZeroDivisionError", False)


def test_bundled_configurations_define_the_four() -> None:
    config = load_datagen_config(bundled_configurations_path())
    pairs = {(c.world, c.behavior) for c in config.configurations}
    assert pairs == {(w, b) for w in ("grounded", "nominal") for b in ("mimicgen", "planner")}
    with pytest.raises(ValueError, match="behavior=module"):
        GenerateConfig(generator_overrides=["planner:oops"])


def test_coverage_widens_the_trials_and_lights_every_configuration_alike(
    configurations_file: Path,
) -> None:
    import yaml

    data = yaml.safe_load(configurations_file.read_text())
    data["coverage"] = {
        "belt_speed_mps": [0.05, 0.2],
        "object_mix": {"cube": 1.0, "cylinder": 1.0, "block": 1.0, "sphere": 1.0},
        "lighting": {"diffuse": [0.3, 0.9], "elevation_deg": [20.0, 90.0]},
    }
    configurations_file.write_text(yaml.safe_dump(data))
    config = load_datagen_config(configurations_file)
    nominal, prepared = prepare_configurations(
        config, configurations_file, generator_overrides=_overrides()
    )
    assert nominal.randomization.belt_speed_mps == (0.05, 0.2)
    jobs = make_jobs(nominal, prepared, range(40), base_seed=0, config=config)
    plans = [j.plan for j in jobs if j.configuration == "nominal_planner"]
    speeds = [p.belt_speed_mps for p in plans]
    assert min(speeds) < 0.07 and max(speeds) > 0.15  # beyond the nominal 0.07-0.13 m/s
    assert "sphere" in {p.arrivals[0].instance.type_name for p in plans}
    for index in range(40):
        group = [j for j in jobs if j.episode_index == index]
        lights = {j.world.lighting.model_dump_json() for j in group}
        assert len(lights) == 1  # every configuration sees the same light
        light = group[0].world.lighting
        assert 0.3 <= light.diffuse <= 0.9 and light.direction[2] < 0.0  # from above
        for job in group:
            check_plan(job.plan, job.world)  # the widened ranges are the world's own
    assert len({j.world.lighting.model_dump_json() for j in jobs}) == 40  # drawn per episode
    # The same seed draws the same light on another run.
    again = make_jobs(nominal, prepared, range(3), base_seed=0, config=config)
    assert [j.world.lighting for j in again] == [j.world.lighting for j in jobs[:12]]


def test_bad_coverage_is_refused_with_the_key() -> None:
    from r2s2r_datagen.config import CoverageConfig, LightingRanges

    with pytest.raises(ValueError, match="belt_speed_mps"):
        CoverageConfig(belt_speed_mps=(0.2, 0.1))
    with pytest.raises(ValueError, match="elevation_deg"):
        LightingRanges(elevation_deg=(-10.0, 90.0))
    from datagen_support import NOMINAL
    from r2s2r_datagen.configurations import with_coverage
    from r2s2r_world.world import load_world

    with pytest.raises(ConfigError, match="teapot"):
        with_coverage(load_world(NOMINAL), CoverageConfig(object_mix={"teapot": 1.0}))
