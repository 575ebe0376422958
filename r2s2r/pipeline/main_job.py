"""The main job: ground, then record demonstrations on the grounded cell, then generate.

:func:`run_main_job` is what ``r2s2r launch sim_generate`` (this module's ``sim_generate``
executable, the node of ``config/graphs/sim_generate.yaml``) and ``r2s2r generate`` run:

1. :func:`prepare_prerequisites`: the configurations that need them get the grounding
   artifact (``prepare_grounding``: the ``grounding`` stage, ``r2s2r ground --launch
   real_deploy``, cached in ``runs/grounding``; MimicGen needs it too, since its demonstrations
   are recorded on the grounded cell) and then the real demonstrations (``prepare_demos``: the
   ``demos`` stage, ``r2s2r record-demos`` on the real twin run with the artifact, cached in
   ``runs/demos``),
   the stages of :mod:`r2s2r.pipeline.stages` with the pipeline's one caching rule
   (``stage.json``: the inputs, the outputs, the commit that made them). A file that is there
   without a record of this job (given from outside) is used as it is; one that a record says
   was made from other inputs (another number of demonstrations, another twin) is made again.
2. :func:`r2s2r_datagen.runner.run_generation` on what step 1 leaves; a configuration whose
   input could not be produced is reported and not run, nothing is faked.

The commands' logs are ``<output_dir>/logs/record_demos.log`` and ``ground.log``; the console
gets the stage lines (``[demos] up to date``, ``[grounding] running: ...``, ``done in N s``),
the commands' warnings and errors once each, and the job's progress and summary table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from r2s2r_common.config import resolve_config_path
from r2s2r_common.errors import ExitCode
from r2s2r_datagen.config import DatagenConfig, GenerateConfig, bundled_configurations_path
from r2s2r_datagen.configurations import load_datagen_config, with_inputs
from r2s2r_datagen.prerequisites import (
    PrerequisitesReport,
    PrerequisiteStep,
    mimicgen_source_path,
    selected_configurations,
)
from r2s2r_datagen.runner import ProgressCallback, run_generation
from r2s2r_datagen.summary import RunSummary

from r2s2r.pipeline.cache import StageRecord, StageRunner, content_hash, current_commit
from r2s2r.pipeline.commands import CommandRunner, command_runner
from r2s2r.pipeline.stages import (
    DEMOS,
    GROUNDING,
    CommandStage,
    CommandStageError,
    demos_stage,
    ground_argv,
    grounding_stage,
    record_demos_argv,
    run_command_stage,
    runnable,
)

# The schema the sim_generate node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = GenerateConfig

Say = Callable[[str], None]
# Stage -> how its failure is named (the command it runs).
_COMMAND_NAME = {DEMOS: "record-demos", GROUNDING: "`r2s2r ground`"}


def _twin_file(launch_args: list[str]) -> Path:
    """Return the twin file the cell graphs run (``twin_config:=``, else the shipped one)."""
    for argument in launch_args:
        name, separator, value = argument.partition(":=")
        if separator and name == "twin_config":
            return Path(value)
    return resolve_config_path("twin/default.yaml")


def _made_by_this_job(record: StageRecord | None, inputs: Mapping[str, Any]) -> bool:
    """Whether ``record`` is this job's record of a stage with these ``inputs``' keys.

    A record with other keys was written by another tool (an experiment's ``demos`` or
    ``grounding`` stage in the same folder): its file is given from outside, used as it is,
    never remade over nor its record removed.
    """
    return record is not None and set(record.inputs) == set(inputs)


def _demos_inputs(
    config: GenerateConfig, twin: Path, artifact: Path, grounded: bool
) -> dict[str, Any]:
    """Return the ``demos`` stage's cache key: what the recorded demonstrations depend on."""
    return {
        "episodes": config.demos_episodes,
        "seed": config.demos_seed,
        "twin": content_hash(twin),
        "cell_launch_args": list(config.cell_launch_args),
        "artifact": content_hash(artifact) if grounded else "",
    }


def _prepare(
    stage: CommandStage,
    stages: StageRunner,
    runner: CommandRunner,
    what: str,
    affects: list[str],
    say: Say,
) -> PrerequisiteStep:
    """Find or produce one prerequisite with its stage; say what happened once."""
    path = str(stage.output)
    if stage.output.exists() and not _made_by_this_job(stages.record(stage.name), stage.inputs):
        step = PrerequisiteStep(stage.name, "present", path, "found (not made by this job)")
        step.affects = affects
        say(step.stage_line())
        return step
    started = time.monotonic()
    try:
        outcome = run_command_stage(stages, stage, runner, what, clear_stale=False)
    except CommandStageError as failure:
        wall = time.monotonic() - started
        if failure.code == ExitCode.TIMEOUT:
            why = "timed out"
        elif failure.code is None:
            why = f"cannot run: {failure.summary}"
        elif failure.code == 0:
            why = "exit code 0 but it wrote no file"
        else:
            why = f"exit code {failure.code}"
        detail = f"{_COMMAND_NAME[stage.name]} failed ({why}): {failure.summary}"
        if failure.set_aside:
            detail += f"; its partial artifact was moved to {failure.set_aside}"
        step = PrerequisiteStep(
            stage.name, "failed", path, detail, affects, stage.command, wall, str(stage.log)
        )
        say(step.stage_line())
        return step
    if outcome.cached:
        detail = (
            f"made by an earlier run from the same inputs (commit {outcome.record.commit[:12]})"
        )
        return PrerequisiteStep(stage.name, "present", path, detail, affects)
    detail = "grounded against the real twin with `r2s2r ground`"
    if stage.name == DEMOS:
        tail = outcome.record.info.get("output_tail", [])
        made = next((line for line in reversed(tail) if "bag2dataset" in line), "no output")
        recorded = what.replace("recording", "recorded", 1)
        detail = f"{recorded} on the real twin and converted them ({made})"
    return PrerequisiteStep(
        stage.name,
        "produced",
        path,
        detail,
        affects,
        stage.command,
        outcome.record.wall_s,
        str(stage.log),
    )


def prepare_prerequisites(
    config: GenerateConfig,
    datagen: DatagenConfig,
    log_dir: Path,
    say: Say,
    runner: CommandRunner | None = None,
    progress: bool = True,
    commit: str = "",
) -> PrerequisitesReport:
    """Find or produce what the selected configurations need: grounding, then demonstrations.

    Steps run only when enabled (``prepare_demos``, ``prepare_grounding``); disabled ones
    leave the configurations exactly as before (generation reports what is missing).

    Args:
        config: The job's settings.
        datagen: The configurations file's content.
        log_dir: Folder for the commands' logs.
        say: Stage lines (``[demos] running: ...``, ``[demos] done in 95 s``, ``[demos] up to
            date``) and the commands' warnings and errors.
        runner: How commands run; :func:`r2s2r.pipeline.commands.command_runner` when None.
        progress: Progress line while a command runs.
        commit: Git commit of the running code, recorded with what a stage makes.

    Raises:
        r2s2r_common.config.ConfigError: Unknown configuration name or a bad MimicGen config.

    """
    run = runner or command_runner(say, progress)
    steps: list[PrerequisiteStep] = []
    selected = selected_configurations(config, datagen)
    twin = _twin_file(config.cell_launch_args)
    demo_users = [c.name for c in selected if c.behavior == "mimicgen"]
    if "mimicgen" in config.overrides():
        demo_users = []
    path, origin = mimicgen_source_path(config, datagen)
    demo_stages = StageRunner(path.parent, say, commit, {DEMOS: path.parent})
    artifact = Path(config.grounding_artifact_path or datagen.grounding_artifact_path).resolve()
    # A dataset there without a record of this job is given from outside: used as it is.
    demos_given = path.exists() and not _made_by_this_job(
        demo_stages.record(DEMOS), _demos_inputs(config, twin, artifact, grounded=False)
    )
    record_demos = config.prepare_demos and bool(demo_users) and not demos_given
    # The order of work (docs/architecture.md section 3): ground the cell first, then record
    # on the grounded cell, so the demonstrations' tracked objects (MimicGen's source poses)
    # come from grounded perception.
    grounded = False
    if config.prepare_grounding:
        affects = [c.name for c in selected if c.world == "grounded"]
        if record_demos:
            affects += [DEMOS] + [c for c in demo_users if c not in affects]
        if not affects:
            step = PrerequisiteStep(
                GROUNDING, "not_needed", str(artifact), "no grounded configuration"
            )
            say(step.stage_line())
        else:
            stage = grounding_stage(
                runnable(ground_argv(artifact, config.cell_launch_args)),
                artifact,
                log_dir / "ground.log",
                config.prepare_timeout_s,
                {"twin": content_hash(twin), "cell_launch_args": list(config.cell_launch_args)},
            )
            stages = StageRunner(artifact.parent, say, commit, {GROUNDING: artifact.parent})
            what = "r2s2r ground against the twin"
            step = _prepare(stage, stages, run, what, affects, say)
            grounded = step.status in ("present", "produced")
        steps.append(step)
    if config.prepare_demos:
        # With prepare_grounding off, the cell runs as cell_launch_args say; on, grounded.
        unusable = ""
        if record_demos and not config.prepare_grounding:
            say(
                "[demos] note: prepare_grounding is off: the demonstrations are recorded on the "
                "cell as cell_launch_args run it (the pipeline grounds first: prepare_grounding)"
            )
        elif record_demos and not grounded:
            unusable = (
                f"the cell is not grounded ({artifact}): demonstrations are recorded on the "
                "grounded cell"
            )
        if not demo_users:
            detail = (
                "the mimicgen generator is overridden"
                if "mimicgen" in config.overrides()
                else "no mimicgen configuration"
            )
            step = PrerequisiteStep(DEMOS, "not_needed", str(path), detail)
            say(step.stage_line())
        elif unusable:
            step = PrerequisiteStep(DEMOS, "failed", str(path), unusable, demo_users)
            say(step.stage_line())
        else:
            command = runnable(
                record_demos_argv(
                    path.parent,
                    config.demos_episodes,
                    config.demos_seed,
                    artifact=artifact if grounded else None,
                    dataset=path,
                    real_time_factor=config.demos_real_time_factor,
                    launch_args=config.cell_launch_args,
                    quiet=True,
                )
            )
            inputs = _demos_inputs(config, twin, artifact, grounded)
            stage = demos_stage(
                command, path, log_dir / "record_demos.log", config.prepare_timeout_s, inputs
            )
            what = f"recording {config.demos_episodes} demonstrations"
            step = _prepare(stage, demo_stages, run, what, demo_users, say)
            if step.status in ("present", "produced") and origin == "default":
                datagen = with_inputs(datagen, mimicgen_source=path)
        steps.append(step)
    return PrerequisitesReport(steps, datagen)


def run_main_job(
    config: GenerateConfig,
    progress: ProgressCallback | None = None,
    log: Say | None = None,
    runner: CommandRunner | None = None,
    commit: str | None = None,
) -> RunSummary:
    """Run the main job: the prerequisites, then generation (see the module docstring).

    Args:
        config: The job's settings (the ``sim_generate`` node's parameters).
        progress: Extra progress callback of the generation (e.g. the node's diagnostics).
        log: Where the stage lines go (default: stderr).
        runner: How the prerequisites' commands run (default: owned child processes).
        commit: Git commit recorded with the prerequisites it makes (None: this checkout's).

    Returns:
        The run summary (also saved as ``<output_dir>/summary.json``).

    Raises:
        r2s2r_common.config.ConfigError: Bad configurations file, unknown configuration name,
            a run directory that holds a different run, or an invalid world or artifact.

    """
    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    configurations_path = Path(config.configurations_path or bundled_configurations_path())
    prerequisites = prepare_prerequisites(
        config,
        load_datagen_config(configurations_path),
        Path(config.output_dir).resolve() / "logs",
        say,
        runner,
        config.progress,
        current_commit(Path(__file__).parent) if commit is None else commit,
    )
    return run_generation(config, progress, say, prerequisites)


def main(args: Any = None) -> None:
    """Run the ``sim_generate`` node with the main job (prerequisites, then generation)."""
    from r2s2r_datagen.nodes.sim_generate_node import main as node_main  # rclpy: the node only

    node_main(args, job=run_main_job)
