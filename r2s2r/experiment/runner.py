"""The 2×2 co-training experiment end to end, as resumable cached stages.

Stages (each in its own folder of the experiment directory, cached by the pipeline's one rule,
:mod:`r2s2r.pipeline.cache`; a module of this package each)::

    grounding/            the grounding artifact (``r2s2r ground``), first         .cell
    demos/                real demonstrations on the grounded twin                 .cell
    generation/<config>/  simulated episodes of one configuration (world × behavior)  .generation
    policies/<policy>/    training: real_only, and real + each configuration       .training
    selection/<policy>/   how its chunks are executed, chosen on validation seeds  .evaluation
    evaluation/<policy>/  the 50-trial protocol on the real twin                   .evaluation

The cell is grounded before anything is recorded on it (docs/architecture.md section 3, "The
order of work"): the demonstrations are recorded and every policy is evaluated on the cell run
with the artifact (``grounded_cell_arguments``: grounded camera_info, ``/tf_static``, roller
radius), so real data, simulated data (whose perception knows its simulated world) and
deployment see the same, grounded perception. Every policy uses the same real demonstrations,
the same training seed and the same trials.
An input that cannot be produced (the demos command fails, grounding fails, a generator is
unavailable or yields no episode) marks the policies that need it as *not run*, with the
reason; nothing is substituted for it. The results (table, plot, JSON, the command that
reproduces them) are written to the experiment directory.
"""

from __future__ import annotations

import time
from pathlib import Path

from r2s2r_common.config import dump_yaml
from r2s2r_common.folder_lock import hold_folder_lock
from r2s2r_policy.evaluation.report import ALL, SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL, EvaluationConfig

from r2s2r.experiment.cell import ground_cell, real_demos
from r2s2r.experiment.config import ExperimentConfig
from r2s2r.experiment.evaluation import (
    evaluate_policy,
    policy_result_from_json,
    select_execution,
)
from r2s2r.experiment.generation import simulated, split_world_behavior
from r2s2r.experiment.products import ArtifactProduct, DatasetProduct, Unavailable
from r2s2r.experiment.results import REAL_ONLY, ExperimentResults, PolicyResult
from r2s2r.experiment.session import ExperimentSession, Log, resolve_config
from r2s2r.experiment.training import train_policy
from r2s2r.pipeline.cache import StageError, StageRunner, current_commit
from r2s2r.pipeline.commands import CommandRunner, command_runner


def open_session(
    config: ExperimentConfig,
    directory: str | Path,
    log: Log | None = None,
    progress_bars: bool = True,
    commands: CommandRunner | None = None,
) -> ExperimentSession:
    """Return the session of an experiment directory (created when the experiment runs).

    Args:
        config: The experiment's configuration.
        directory: Experiment directory (stages cache their outputs here).
        log: Progress lines (default: print to stdout).
        progress_bars: Show training/generation/evaluation progress bars.
        commands: Runs the demos and grounding commands (default: owned children in a
            private ROS domain, :func:`r2s2r.pipeline.commands.command_runner`).

    """
    say: Log = log or (lambda text: print(text, flush=True))
    root = Path(directory).resolve()
    hold_folder_lock(root, "r2s2r experiment")  # two runs in one folder would redo every stage
    commit = current_commit(Path(__file__).parent)
    return ExperimentSession(
        config=config,
        directory=root,
        stages=StageRunner(root, say, commit),
        commands=commands or command_runner(say, progress_bars),
        log=say,
        progress_bars=progress_bars,
        commit=commit,
        twin_path=resolve_config(config.twin_config),
    )


def run_policy(
    session: ExperimentSession,
    name: str,
    real: DatasetProduct | Unavailable,
    sim: DatasetProduct | Unavailable | None,
) -> PolicyResult:
    """Train and evaluate one policy, or say why it cannot run."""
    world, behavior = (None, None) if name == REAL_ONLY else split_world_behavior(name)
    if isinstance(real, Unavailable):
        return PolicyResult.not_run(name, real.reason, world, behavior)
    if isinstance(sim, Unavailable):
        return PolicyResult.not_run(name, sim.reason, world, behavior)
    return train_select_evaluate(session, name, real, sim, world, behavior)


def train_select_evaluate(
    session: ExperimentSession,
    name: str,
    real: DatasetProduct,
    sim: DatasetProduct | None,
    world: str | None,
    behavior: str | None,
) -> PolicyResult:
    """Train one policy, choose its execution on validation seeds, evaluate it on the twin."""
    try:
        checkpoint = train_policy(session, name, real, sim)
        inference = select_execution(session, name, checkpoint, session.twin_path)
        data = evaluate_policy(session, name, checkpoint, inference=inference)
    except StageError as error:
        session.log(f"[{name}] NOT RUN: {error}")
        return PolicyResult.not_run(name, str(error), world, behavior)
    return policy_result_from_json(name, data, world, behavior, checkpoint.path)


def run_capacity_check(
    session: ExperimentSession, sim: DatasetProduct | Unavailable | None
) -> PolicyResult | None:
    """Run the capacity check (proves the learner can learn the task).

    A policy trained on one configuration's simulated data only, evaluated in that
    configuration's own simulator world.
    """
    configuration = session.config.capacity_configuration
    if not configuration:
        return None
    name = "capacity"
    if sim is None or isinstance(sim, Unavailable):
        reason = sim.reason if isinstance(sim, Unavailable) else "not generated"
        return PolicyResult.not_run(name, f"capacity: {configuration}: {reason}")
    protocol = EvaluationConfig(
        trials_per_condition={NOMINAL: session.config.capacity_trials},
        base_seed=session.config.evaluation_base_seed,
    )
    try:
        checkpoint = train_policy(session, name, None, sim, sim_ratio=1.0)
        world = resolve_config(session.config.capacity_world)
        inference = select_execution(session, name, checkpoint, world)
        data = evaluate_policy(session, name, checkpoint, world, protocol, inference)
    except StageError as error:
        session.log(f"[{name}] NOT RUN: {error}")
        return PolicyResult.not_run(name, str(error))
    return policy_result_from_json(name, data, None, None, checkpoint.path)


def ground_if_needed(session: ExperimentSession) -> ArtifactProduct | Unavailable | None:
    """Ground the cell when anything needs it, first (docs/architecture.md section 3).

    The order of work: ground the cell, then record on it and evaluate on it with grounded
    perception. Not run when the real dataset is given and no grounded world is generated
    (None, with a note), unless an artifact is given.
    """
    config = session.config
    needs_artifact = not config.real_dataset or any(
        split_world_behavior(c)[0] == "grounded" and c not in config.sim_datasets
        for c in config.configurations
    )
    artifact: ArtifactProduct | Unavailable | None = None
    if needs_artifact or config.grounding_artifact:
        artifact = ground_cell(session)
        if isinstance(artifact, Unavailable):
            session.log(f"[grounding] NOT AVAILABLE: {artifact.reason}")
    else:
        session.log(
            "note: grounding not run (the real dataset is given, no grounded world is "
            "generated) and no grounding_artifact: the policies are evaluated on the cell "
            "before grounding, whose perception differs from the grounded cell's and the "
            "simulator's; give the artifact the cell was grounded with (--artifact)"
        )
    return artifact


def run(session: ExperimentSession, command: str = "") -> ExperimentResults:
    """Run (or resume) every stage and write the results.

    Args:
        session: The experiment (:func:`open_session`).
        command: The command that reproduces this experiment (written with the results).

    Returns:
        The results (also saved to the experiment directory).

    """
    started = time.perf_counter()
    if session.config.generation_ray_address:
        from r2s2r_datagen.pool import check_ray_address

        check_ray_address(session.config.generation_ray_address)  # before any stage
    session.directory.mkdir(parents=True, exist_ok=True)
    dump_yaml(session.config.model_dump(mode="json"), session.directory / "experiment.yaml")
    config = session.config
    artifact = ground_if_needed(session)
    real = real_demos(session)
    if isinstance(real, Unavailable):
        session.log(f"[demos] NOT AVAILABLE: {real.reason}")
    sims: dict[str, DatasetProduct | Unavailable] = {}
    wanted = list(config.configurations)
    if config.capacity_configuration and config.capacity_configuration not in wanted:
        wanted.append(config.capacity_configuration)
    for configuration in wanted:
        sim = sims[configuration] = simulated(session, configuration, real, artifact)
        if isinstance(sim, Unavailable):
            session.log(f"[generation/{configuration}] NOT AVAILABLE: {sim.reason}")
    capacity = run_capacity_check(session, sims.get(config.capacity_configuration))
    policies = [run_policy(session, REAL_ONLY, real, None)]
    policies += [run_policy(session, c, real, sims[c]) for c in config.configurations]
    results = ExperimentResults(
        policies=policies,
        command=command,
        commit=session.commit,
        capacity=capacity,
        metadata={
            "capacity_configuration": config.capacity_configuration,
            "experiment_dir": str(session.directory),
            "config": config.model_dump(mode="json"),
            "session_wall_s": time.perf_counter() - started,
            "stage_wall_s": session.state.stage_wall_s,
            "stage_cached": session.state.stage_cached,
            "stage_commit": session.state.stage_commit,
            "stage_sittings": session.state.stage_sittings,
            "training": session.state.training,
            "generation": session.state.generation,
            "execution": session.state.execution,
            "stages_run_this_session": list(session.stages.ran),
            "stages_skipped_this_session": list(session.stages.skipped),
            "groups": {NOMINAL: "nominal trials", SHIFTED: "shifted trials", ALL: "all"},
        },
    )
    paths = results.save(session.directory)
    session.log("")
    session.log(results.table())
    session.log("")
    session.log(f"reproduce: {command}")
    session.log(f"wrote {', '.join(str(p) for p in paths.values())}")
    return results


def run_experiment(
    config: ExperimentConfig,
    directory: str | Path,
    command: str = "",
    log: Log | None = None,
    progress_bars: bool = True,
    commands: CommandRunner | None = None,
) -> ExperimentResults:
    """Run (or resume) the experiment in ``directory``; see the module docstring.

    Args:
        config: The experiment's configuration.
        directory: Experiment directory (stages cache their outputs here; rerun to resume).
        command: The command that reproduces it (written with the results).
        log: Progress lines (default: print to stdout).
        progress_bars: Show progress bars.
        commands: Runs the demos and grounding commands (see :func:`open_session`).

    Returns:
        The results (also saved to the experiment directory).

    """
    return run(open_session(config, directory, log, progress_bars, commands), command)
