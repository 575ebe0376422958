"""The episode-generator interface, the job it is given, what it returns, and the registry.

A generator turns one :class:`EpisodeJob` (a configuration, an episode index and its seed, the
world to run in and the sampled trial) into one :class:`GenerationResult`: the recorded
:class:`~r2s2r_dataset.Episode` when the trial succeeded, otherwise ``None`` and the
failure reason. It runs in a worker process, on that worker's simulator backend, and records
through :class:`r2s2r_datagen.recording.RecordingBackend`.

Behaviors are registered by name (:data:`GENERATOR_FACTORIES`) and imported lazily, so that a
run can go ahead with the generators that exist and say clearly which do not. Factories take
the behavior's options (a mapping from the configurations file) and return a generator.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from r2s2r_sim.backend import SimBackend
from r2s2r_sim.task import TrialPlan
from r2s2r_world.world import WorldParams

from r2s2r_datagen.config import RecordingConfig
from r2s2r_dataset import Episode

GENERATOR_FACTORIES: dict[str, str] = {
    "mimicgen": "r2s2r_datagen.mimicgen:make_generator",
    "planner": "r2s2r_datagen.planner_generator:make_generator",
}
"""Behavior name → ``"module:factory"``; a factory is ``(options: Mapping) -> EpisodeGenerator``."""

SKIP_REASONS: tuple[str, ...] = (
    "belt_speed_out_of_range",
    "unreachable_object",
    "no_detectable_grasp",
)
"""Bad-input reasons: the episode is skipped (counted), never retried, never a crash."""


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to generate: independent and deterministic from its seed.

    Attributes:
        configuration: Configuration name (e.g. ``grounded_mimicgen``).
        behavior: Behavior name (a key of :data:`GENERATOR_FACTORIES`).
        episode_index: Index of the episode within the configuration.
        seed: ``base_seed + episode_index`` (the same in every configuration).
        world: The world to generate in (nominal, or nominal + grounding artifact).
        world_config_id: Identifier written into the episode (``nominal`` or
            ``grounded-<artifact hash>``).
        plan: The sampled trial (objects, arrival times, offsets, yaw, belt speed).
        attempt: 0 for the first try, 1 for the retry after a crashed or hung worker.
        recording: How frames are sampled.
        task: Task name for the episode metadata.

    """

    configuration: str
    behavior: str
    episode_index: int
    seed: int
    world: WorldParams
    world_config_id: str
    plan: TrialPlan
    attempt: int
    recording: RecordingConfig
    task: str = "pick_sort"

    @property
    def key(self) -> tuple[str, int]:
        """``(configuration, episode_index)``: the unit of resume bookkeeping."""
        return (self.configuration, self.episode_index)


@dataclass
class GenerationResult:
    """What a generator returns for one job.

    Attributes:
        episode: The recorded episode (successful trials only), else ``None``.
        outcome: ``"success"`` or the failure reason (e.g. ``missed_grasp``, ``dropped``,
            ``unreachable_object``).
        attempts: Simulator rollouts tried for this episode (MimicGen may try several).
        timings: Seconds spent per phase (``total`` at least).
        skipped: True when the job was bad input (see :data:`SKIP_REASONS`) and not tried.
        detail: Human-readable detail of a failure.
        provenance: Extra provenance the generator recorded (also inside the episode).

    """

    episode: Episode | None
    outcome: str
    attempts: int = 1
    timings: dict[str, float] = field(default_factory=dict)
    skipped: bool = False
    detail: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """Whether an episode was produced."""
        return self.episode is not None and self.outcome == "success"


@runtime_checkable
class EpisodeGenerator(Protocol):
    """Generates one episode per job on a simulator backend."""

    def generate(self, job: EpisodeJob, backend: SimBackend) -> GenerationResult:
        """Run the job on ``backend`` (reset it first) and return the result.

        Bad input may be reported by raising :class:`EpisodeSkipped`; any other exception is
        recorded as the episode's failure by the job runner.
        """
        ...


GeneratorFactory = Callable[[Mapping[str, Any]], EpisodeGenerator]


class EpisodeSkipped(Exception):  # noqa: N818 - it is a signal, not an error of the code
    """Raised by a generator (or the job) for bad input: skipped with a counted reason.

    Args:
        reason: A short machine-readable reason (see :data:`SKIP_REASONS`).
        detail: Human-readable explanation.

    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class GeneratorUnavailableError(RuntimeError):
    """A behavior's generator cannot be imported (not built yet, or a missing dependency)."""


def resolve_factory(behavior: str, overrides: Mapping[str, str] | None = None) -> str:
    """Return the ``"module:factory"`` of ``behavior`` (an override wins over the registry).

    Raises:
        GeneratorUnavailableError: Unknown behavior name.

    """
    if overrides and behavior in overrides:
        return overrides[behavior]
    if behavior not in GENERATOR_FACTORIES:
        raise GeneratorUnavailableError(
            f"behavior {behavior!r}: no generator registered; expected one of "
            f"{sorted(GENERATOR_FACTORIES)}"
        )
    return GENERATOR_FACTORIES[behavior]


def load_factory(spec: str, behavior: str = "") -> GeneratorFactory:
    """Import the factory named by ``"module:attribute"``.

    Raises:
        GeneratorUnavailableError: The module does not exist (yet), fails to import, or lacks
            the attribute; the message names which.

    """
    module_name, _, attribute = spec.partition(":")
    label = f"generator for behavior {behavior!r}" if behavior else "generator"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or module_name
        raise GeneratorUnavailableError(
            f"{label} not available: module {module_name!r} cannot be imported "
            f"({missing!r} not found; not built yet?)"
        ) from None
    except ImportError as error:
        raise GeneratorUnavailableError(
            f"{label} not available: importing {module_name!r} failed: {error}"
        ) from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise GeneratorUnavailableError(
            f"{label} not available: {module_name!r} has no callable {attribute!r}"
        )
    return factory  # type: ignore[no-any-return]


def make_generator(
    behavior: str,
    options: Mapping[str, Any] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> EpisodeGenerator:
    """Build the generator of ``behavior`` with its options.

    Raises:
        GeneratorUnavailableError: See :func:`load_factory`; also when the factory itself
            reports a missing dependency (ImportError).

    """
    factory = load_factory(resolve_factory(behavior, overrides), behavior)
    try:
        generator = factory(dict(options or {}))
    except ImportError as error:
        raise GeneratorUnavailableError(
            f"generator for behavior {behavior!r} not available: {error}"
        ) from None
    if not isinstance(generator, EpisodeGenerator):
        raise GeneratorUnavailableError(
            f"generator for behavior {behavior!r}: factory returned {type(generator).__name__}, "
            "which has no generate(job, backend) method"
        )
    return generator


def generator_availability(
    behavior: str,
    options: Mapping[str, Any] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> str | None:
    """Return ``None`` when ``behavior`` can be built here, else the reason it cannot."""
    try:
        make_generator(behavior, options, overrides)
    except GeneratorUnavailableError as error:
        return str(error)
    return None


def classify_exception(error: BaseException) -> tuple[str, bool]:
    """Map a generator's exception to ``(reason, skipped)``.

    :class:`EpisodeSkipped` gives its reason (skipped). An IK failure
    (:class:`r2s2r_world.kinematics.IkError`) or an exception class named ``*Unreachable*`` is an
    unreachable object (skipped); one named ``*Planning*`` a planning failure (a failed
    attempt). Anything else is ``error:<ExceptionType>`` (a failed attempt).
    """
    if isinstance(error, EpisodeSkipped):
        return error.reason, True
    name = type(error).__name__
    if name == "IkError" or "Unreachable" in name:
        return "unreachable_object", True
    if "Planning" in name:
        return "planning_failed", False
    return f"error:{name}", False
