"""One experiment directory as the stages see it: its config, stage cache, cell and record.

Every stage of the experiment (:mod:`.cell`, :mod:`.generation`, :mod:`.training`,
:mod:`.evaluation`) is a function of an :class:`ExperimentSession`; the runner
(:mod:`.runner`) composes them. A new stage is a module with a function of the session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2s2r_common.config import resolve_config_path

from r2s2r.experiment.config import ExperimentConfig
from r2s2r.experiment.products import ArtifactProduct, Unavailable
from r2s2r.pipeline.cache import StageOutcome, StageRunner, content_hash
from r2s2r.pipeline.commands import CommandRunner

Log = Callable[[str], None]


def resolve_config(path: str) -> Path:
    """Return a config file named relative to ``config/`` (or absolute), resolved."""
    return resolve_config_path(path).resolve()


def evaluator_config_hashes() -> dict[str, str]:
    """Content hashes of what the evaluators read besides the twin (cache inputs of a stage).

    The published nominal world, the belt_speed and object_tracker parameters (the in-process
    evaluator runs the same perception cores as the graph), the evaluate graph and the cell
    state publisher's parameters (what the graph's perception is told).
    """
    return {
        "nominal_world": content_hash(resolve_config("world/nominal.yaml")),
        "belt_speed": content_hash(resolve_config("nodes/belt_speed.yaml")),
        "object_tracker": content_hash(resolve_config("nodes/object_tracker.yaml")),
        "evaluate_graph": content_hash(resolve_config("graphs/evaluate.yaml")),
        "cell_state_publisher": content_hash(resolve_config("nodes/cell_state_publisher.yaml")),
    }


@dataclass
class ExperimentState:
    """What the stages produced so far (for the report).

    Attributes:
        stage_wall_s: Stage name -> wall time of the run that produced it.
        stage_cached: Stage name -> skipped this session because up to date.
        stage_commit: Stage name -> git commit of the code that produced it ('' if unknown).
        stage_sittings: Stage name -> runs it took (> 1: stopped and resumed; its wall time
            adds them up).
        training: Policy -> training info (steps, loss, samples/s).
        generation: Configuration -> generation info (episodes, yield, episodes/min).
        execution: Policy -> the execution it was evaluated with and, when chosen on
            validation seeds, each candidate's validation successes.

    """

    stage_wall_s: dict[str, float] = field(default_factory=dict)
    stage_cached: dict[str, bool] = field(default_factory=dict)
    stage_commit: dict[str, str] = field(default_factory=dict)
    stage_sittings: dict[str, int] = field(default_factory=dict)
    training: dict[str, dict[str, Any]] = field(default_factory=dict)
    generation: dict[str, dict[str, Any]] = field(default_factory=dict)
    execution: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note(self, name: str, outcome: StageOutcome) -> None:
        """Remember a stage's wall time and whether it was cached."""
        self.stage_wall_s[name] = outcome.record.wall_s
        self.stage_cached[name] = outcome.cached
        self.stage_commit[name] = outcome.record.commit
        self.stage_sittings[name] = outcome.record.sittings


@dataclass
class ExperimentSession:
    """One run (or resumption) of an experiment directory.

    Attributes:
        config: The experiment's configuration.
        directory: The experiment directory (stages cache their outputs here).
        stages: The stage runner (the pipeline's one caching rule).
        commands: Runs the demos and grounding commands (owned children, private ROS domain).
        log: Progress lines.
        progress_bars: Show training/generation/evaluation progress bars.
        commit: Git commit of the running code.
        twin_path: The real twin's world file.
        artifact: The grounding artifact once the cell is grounded (None: not asked for).
        cell_arguments: Launch arguments of the grounded cell (``grounded_cell_arguments``).
        state: What the stages produced so far.

    """

    config: ExperimentConfig
    directory: Path
    stages: StageRunner
    commands: CommandRunner
    log: Log
    progress_bars: bool
    commit: str
    twin_path: Path
    artifact: ArtifactProduct | Unavailable | None = None
    cell_arguments: dict[str, str] = field(default_factory=dict)
    state: ExperimentState = field(default_factory=ExperimentState)

    def cell_knowledge(self, world: Path) -> str:
        """Return what the perception of a cell evaluated in ``world`` knows (a cache input).

        The twin is the grounded cell (the artifact's fingerprint); any other world (the
        capacity check's simulator world) is a simulated cell that knows itself.
        """
        if world == self.twin_path and isinstance(self.artifact, ArtifactProduct):
            return f"grounded {self.artifact.fingerprint}"
        return "ungrounded" if world == self.twin_path else "simulated world"
