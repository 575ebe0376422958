"""The ungrounded behavior: grasp proposals + motion planner (``r2s2r_planner``), recorded.

Wraps ``r2s2r_planner``'s ``plan_and_execute_pick(backend, world, plan, rng)``: the planner
plays the whole trial on the backend it is given (reset, intercept, grasp, transport, release)
and returns its outcome. It is given a :class:`~r2s2r_datagen.recording.RecordingBackend`, so
the episode is recorded exactly as the real dataset is sampled, whatever the planner does.

Contract with the planner function (imported lazily; a clear "not available" otherwise):

- it resets the backend itself (``TrialRunner(backend, world, plan).start()``);
- it returns the trial outcome: an object with ``success: bool`` and ``reason: str``
  (:class:`r2s2r_sim.task.TrialOutcome`), or one with an ``outcome`` attribute holding such an
  object; optional ``attempts: int`` and ``provenance: dict`` attributes are recorded;
- with the default function, the generator passes ``planner=``: one
  :class:`r2s2r_planner.pick.PickPlanner` per world, reused across the worker's episodes of
  that world (its IK and collision models and the pinch-hand tables are built once; planning
  results are the same as with a fresh one, which holds no per-episode state);
- an unreachable object raises :class:`r2s2r_world.kinematics.IkError` or an exception whose
  class name contains ``Unreachable`` (skipped, counted); a failed plan one whose name
  contains ``Planning`` (a failed attempt).
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from r2s2r_sim.backend import SimBackend
from r2s2r_world.world import WorldParams

from r2s2r_datagen.generator import EpisodeJob, GenerationResult
from r2s2r_datagen.recording import RecordingBackend

DEFAULT_PLANNER_FUNCTION = "r2s2r_planner.pick:plan_and_execute_pick"
"""Where the planner's pick function lives (option ``function`` overrides it)."""

DEFAULT_PICK_PLANNER = "r2s2r_planner.pick:PickPlanner"
"""The reusable planner the default function accepts as ``planner=`` (built once per world)."""

PlannerFunction = Callable[..., Any]
PickPlannerFactory = Callable[[WorldParams], Any]


def load_planner_function(spec: str) -> PlannerFunction:
    """Import ``"module:function"``.

    Raises:
        ImportError: If the module or the function does not exist (yet).

    """
    module_name, _, attribute = spec.partition(":")
    module = importlib.import_module(module_name)
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ImportError(f"{module_name!r} has no function {attribute!r} (not built yet?)")
    return function  # type: ignore[no-any-return]


def interpret_outcome(result: Any) -> tuple[bool, str, int, dict[str, Any]]:
    """``(success, reason, attempts, provenance)`` from what the planner function returned.

    Raises:
        TypeError: If ``result`` carries no ``success``/``reason`` (see the module docstring).

    """
    outcome = getattr(result, "outcome", result)
    if not hasattr(outcome, "success") or not hasattr(outcome, "reason"):
        raise TypeError(
            f"planner returned {type(result).__name__}: expected an object with success and "
            "reason (a TrialOutcome) or with an outcome attribute holding one"
        )
    attempts = int(getattr(result, "attempts", 1) or 1)
    provenance = dict(getattr(result, "provenance", {}) or {})
    return bool(outcome.success), str(outcome.reason), attempts, provenance


class PlannerGenerator:
    """Episode generator over the planner's pick function.

    Args:
        function: ``plan_and_execute_pick(backend, world, plan, rng) -> outcome``.
        options: Behavior options (recorded in the provenance).
        planner_factory: Builds the reusable planner of a world, passed to ``function`` as
            ``planner=``; None to let ``function`` build its own every episode.

    """

    def __init__(
        self,
        function: PlannerFunction,
        options: Mapping[str, Any],
        planner_factory: PickPlannerFactory | None = None,
    ) -> None:
        self.function = function
        self.options = dict(options)
        self.planner_factory = planner_factory
        self._planner: Any = None
        self._planner_world = ""

    def _planner_for(self, world: WorldParams) -> Any:
        """Return the planner of ``world``, rebuilt only when the world changes."""
        assert self.planner_factory is not None
        key = world.model_dump_json(exclude={"lighting", "shifts", "randomization"})
        if self._planner is None or key != self._planner_world:
            self._planner = self.planner_factory(world)
            self._planner_world = key
        return self._planner

    def generate(self, job: EpisodeJob, backend: SimBackend) -> GenerationResult:
        """See :meth:`r2s2r_datagen.generator.EpisodeGenerator.generate`."""
        started = time.perf_counter()
        recorder = RecordingBackend(backend, job.recording)
        rng = np.random.default_rng(job.seed)
        extra: dict[str, Any] = {}
        if "object_ready" in inspect.signature(self.function).parameters:
            # Plan when the cell's perception has the object, as a cell would: never from
            # what the tracker cannot see yet (the policy would be taught unobservable timing).
            extra["object_ready"] = recorder.object_tracked
        if self.planner_factory is None:
            result = self.function(recorder, job.world, job.plan, rng, **extra)
        else:
            planner = self._planner_for(job.world)
            result = self.function(recorder, job.world, job.plan, rng, planner=planner, **extra)
        success, reason, attempts, provenance = interpret_outcome(result)
        episode = None
        if success:
            arrival = job.plan.arrivals[0]
            episode = recorder.to_episode(
                world_config_id=job.world_config_id,
                behavior_source="planner",
                task=job.task,
                object_type=arrival.instance.type_name,
                belt_speed_mps=job.plan.belt_speed_mps,
                success=True,
                provenance={"generator": "planner", **provenance},
            )
        return GenerationResult(
            episode=episode,
            outcome="success" if success else reason,
            attempts=attempts,
            timings={"rollout": time.perf_counter() - started, "render": recorder.render_s},
            provenance=provenance,
        )


def make_generator(options: Mapping[str, Any]) -> PlannerGenerator:
    """Build the planner generator (the factory registered as behavior ``planner``).

    Options: ``function`` (``"module:function"``, default :data:`DEFAULT_PLANNER_FUNCTION`).

    Raises:
        ImportError: If the planner function is not available (yet).

    """
    spec = str(options.get("function", DEFAULT_PLANNER_FUNCTION))
    try:
        function = load_planner_function(spec)
    except ImportError as error:
        raise ImportError(f"planner function {spec!r} not importable: {error}") from None
    planner_factory = None
    if spec == DEFAULT_PLANNER_FUNCTION:
        planner_factory = load_planner_function(DEFAULT_PICK_PLANNER)
    return PlannerGenerator(function, options, planner_factory)
