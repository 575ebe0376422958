"""The planner generator builds one reusable pick planner per world, not one per episode."""

from dataclasses import dataclass
from typing import Any

import numpy as np
from datagen_support import NOMINAL
from r2s2r_datagen.config import RecordingConfig
from r2s2r_datagen.generator import EpisodeJob
from r2s2r_datagen.planner_generator import (
    DEFAULT_PLANNER_FUNCTION,
    PlannerGenerator,
    make_generator,
)
from r2s2r_sim.task import sample_trial
from r2s2r_testing.generation import ARTIFACT_OVERRIDES
from r2s2r_world.world import WorldParams, apply_grounding, load_world


@dataclass
class _Outcome:
    success: bool
    reason: str


def _job(world: WorldParams, index: int) -> EpisodeJob:
    return EpisodeJob(
        configuration="nominal_planner",
        behavior="planner",
        episode_index=index,
        seed=index,
        world=world,
        world_config_id="test",
        plan=sample_trial(world, index),
        attempt=0,
        recording=RecordingConfig(),
    )


def test_one_planner_per_world_reused_across_episodes() -> None:
    built: list[WorldParams] = []
    used: list[tuple[Any, WorldParams, int]] = []

    def factory(world: WorldParams) -> object:
        built.append(world)
        return object()

    def pick(backend: Any, world: WorldParams, plan: Any, rng: Any, planner: Any) -> _Outcome:
        used.append((planner, world, plan.seed))
        return _Outcome(False, "outcome_missed_grasp")

    nominal = load_world(NOMINAL)
    grounded = apply_grounding(nominal, ARTIFACT_OVERRIDES)
    generator = PlannerGenerator(pick, {}, factory)
    worlds = [nominal, nominal, grounded, grounded, nominal]
    results = [
        generator.generate(_job(world, index), backend=None)  # type: ignore[arg-type]
        for index, world in enumerate(worlds)
    ]

    assert [r.outcome for r in results] == ["outcome_missed_grasp"] * len(worlds)
    assert built == [nominal, grounded, nominal]  # rebuilt only when the world changes
    planners = [planner for planner, _, _ in used]
    assert planners[0] is planners[1] and planners[2] is planners[3]
    assert planners[1] is not planners[2] and planners[3] is not planners[4]
    assert [world for _, world, _ in used] == worlds
    assert [seed for _, _, seed in used] == list(range(len(worlds)))


def test_the_default_pick_function_gets_the_reusable_planner() -> None:
    for options in ({}, {"function": DEFAULT_PLANNER_FUNCTION}):
        generator = make_generator(options)
        assert generator.planner_factory is not None
        assert generator.planner_factory.__name__ == "PickPlanner"
    other = make_generator({"function": "numpy:zeros"})  # any other function builds its own
    assert other.planner_factory is None and other.function is np.zeros


def test_the_planner_is_told_to_wait_for_the_cells_perception() -> None:
    seen: list[bool] = []

    def pick(backend: Any, world: WorldParams, plan: Any, rng: Any, object_ready: Any) -> _Outcome:
        seen.append(object_ready())  # the recording's tracker: no frame yet, nothing seen
        return _Outcome(False, "outcome_missed_grasp")

    def plain(backend: Any, world: WorldParams, plan: Any, rng: Any) -> _Outcome:
        return _Outcome(False, "outcome_missed_grasp")

    nominal = load_world(NOMINAL)
    PlannerGenerator(pick, {}).generate(_job(nominal, 0), backend=None)  # type: ignore[arg-type]
    assert seen == [False]
    # A pick function without the argument is called as before.
    result = PlannerGenerator(plain, {}).generate(_job(nominal, 1), backend=None)  # type: ignore[arg-type]
    assert result.outcome == "outcome_missed_grasp"
