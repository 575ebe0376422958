"""Ground, then record demonstrations on the grounded cell: the two stages that start a cell.

Both are a command that starts a cell graph of its own and writes one file: ``r2s2r ground``
writes the grounding artifact, ``r2s2r record-demos`` the real dataset, on the cell run with
that artifact (:func:`grounded_cell_arguments`; docs/architecture.md section 3). The main job
(:mod:`r2s2r.pipeline.main_job`) and the experiment (:mod:`r2s2r.experiment`) run
them through :func:`run_command_stage` (a :class:`~r2s2r.pipeline.cache.StageRunner` stage:
``stage.json``, skipped when up to date) with the one command line of each
(:func:`record_demos_argv`, :func:`ground_argv`).

A stage fails (:class:`~r2s2r.pipeline.cache.StageError`) when its command exits non-zero,
runs past its time limit, cannot start, or does not write its file; a grounding artifact that
a failed run wrote anyway (without its failed steps) is set aside as ``<name>.failed.yaml``:
grounded configurations on it would be nominal ones under another name.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2s2r_common.errors import ExitCode
from r2s2r_description.cameras import CAMERA_NAMES

from r2s2r.pipeline.cache import StageError, StageOutcome, StageRunner
from r2s2r.pipeline.commands import CommandRunner, cli_command

DEMOS = "demos"
GROUNDING = "grounding"
CELL_GRAPH = "real_deploy"
"""The graph ``r2s2r ground`` starts for the main job (the deployed cell with the twin)."""


class CommandStageError(StageError):
    """A command stage's command failed.

    Attributes:
        why: ``exited with N``, ``ran past N s``, ``exited with 0 but did not write F`` or
            ``cannot run: ...``.
        code: Its exit code (``ExitCode.TIMEOUT`` when it timed out; None when it could not
            start).
        summary: What failed, from its last lines of output.
        set_aside: Where a partial output was moved ('' if none).

    """

    def __init__(
        self, stage: CommandStage, why: str, code: int | None, summary: str, set_aside: str = ""
    ) -> None:
        self.why, self.code, self.summary, self.set_aside = why, code, summary, set_aside
        text = f"{stage.name}: {shlex.join(stage.command)} {why} (log {stage.log}): {summary}"
        if set_aside:
            text += f"; its partial artifact was moved to {set_aside}"
        super().__init__(text)


@dataclass(frozen=True)
class CommandStage:
    """A stage whose work is one command that writes one file.

    Attributes:
        name: Stage name (``demos``, ``grounding``): its ``[name]`` console label.
        command: The command.
        output: The file the command must write.
        output_key: Its name among the stage's outputs (``dataset``, ``artifact``).
        log: The command's log file.
        timeout_s: Wall-clock limit of the command.
        inputs: What the output depends on: the stage's cache key (the command's settings,
            the content of what it reads).

    """

    name: str
    command: list[str]
    output: Path
    output_key: str
    log: Path
    timeout_s: float
    inputs: dict[str, Any] = field(default_factory=dict)


def demos_stage(
    command: list[str], dataset: Path, log: Path, timeout_s: float, inputs: dict[str, Any]
) -> CommandStage:
    """Return the ``demos`` stage: ``command`` records demonstrations into ``dataset``."""
    return CommandStage(DEMOS, command, dataset, "dataset", log, timeout_s, inputs)


def grounding_stage(
    command: list[str], artifact: Path, log: Path, timeout_s: float, inputs: dict[str, Any]
) -> CommandStage:
    """Return the ``grounding`` stage: ``command`` grounds the twin into ``artifact``."""
    return CommandStage(GROUNDING, command, artifact, "artifact", log, timeout_s, inputs)


def record_demos_argv(
    out_dir: str | Path,
    successes: int | str,
    seed: int | str,
    *,
    twin_config: str | Path | None = None,
    artifact: str | Path | None = None,
    dataset: str | Path | None = None,
    real_time_factor: float | None = None,
    launch_args: Sequence[str] = (),
    quiet: bool = False,
) -> list[str]:
    """Return ``r2s2r record-demos ...``: the one command line of the ``demos`` stage.

    Records until ``successes`` takes succeeded (failed takes are re-recorded with the next
    seed) into ``out_dir`` (``dataset``: another file than ``OUT/dataset.hdf5``); with
    ``artifact``, on the cell grounded with it (``--artifact``: :func:`grounded_cell_arguments`).
    The experiment keys its stage on this command line built with the field names in braces
    for its per-run values (``{out_dir}``, ...), so a change here re-runs the stage. The
    first word is ``r2s2r``; :func:`runnable` makes it this interpreter's.
    """
    argv = ["r2s2r", "record-demos", "--out", str(out_dir), "--successes", str(successes)]
    argv += ["--seed", str(seed)]
    if twin_config is not None:
        argv += ["--twin-config", str(twin_config)]
    if artifact is not None:
        argv += ["--artifact", str(artifact)]
    if dataset is not None:
        argv += ["--dataset", str(dataset)]
    if real_time_factor is not None:
        argv += ["--real-time-factor", str(real_time_factor)]
    if quiet:
        argv.append("--quiet")
    for argument in launch_args:
        argv += ["--launch-arg", argument]
    return argv


def ground_argv(artifact: str | Path, launch_args: Sequence[str] = ()) -> list[str]:
    """Return ``r2s2r ground ...``: the one command line of the ``grounding`` stage.

    ``--launch real_deploy`` (it starts the cell graph itself) plus one ``--launch-arg`` per
    cell launch argument (passed on unread). The first word is ``r2s2r`` (:func:`runnable`).
    """
    argv = ["r2s2r", "ground", "--output", str(artifact), "--launch", CELL_GRAPH]
    for argument in launch_args:
        argv += ["--launch-arg", argument]
    return argv


def runnable(argv: Sequence[str]) -> list[str]:
    """Return ``argv`` with its ``r2s2r`` run by this interpreter (:func:`cli_command`)."""
    if argv and argv[0] == "r2s2r":
        return cli_command(*argv[1:])
    return list(argv)


def grounded_cell_arguments(artifact: Path, export_dir: Path) -> dict[str, str]:
    """Return the launch arguments that run a cell graph grounded by ``artifact``.

    The cell's drivers publish the artifact's camera intrinsics as ``camera_info`` (its
    camera_calibration files, written into ``export_dir`` by
    :func:`r2s2r_calibration.export.export_artifact`), the cell state publisher puts its mounts
    on ``/tf_static``, ``belt_speed`` takes its roller radius, and the object tracker trusts
    those extrinsics instead of anchoring to the belt plane (``bench/bench_tracker.py``). The
    same arguments serve ``real_deploy``, ``record_demos`` and ``evaluate``: what a lab runs
    once its cell is grounded (docs/architecture.md section 3).

    Raises:
        r2s2r_calibration.errors.ArtifactError: A missing or invalid artifact.

    """
    from r2s2r_calibration.export import export_artifact

    written = export_artifact(artifact, export_dir)
    arguments = {"grounding_artifact": str(artifact), "tracker_anchor_to_belt": "false"}
    for camera in CAMERA_NAMES:
        if camera in written:
            arguments[f"{camera}_info"] = str(written[camera])
    return arguments


def failure_summary(tail: str) -> str:
    """Return the lines of a command's last output that say what failed, else its last line."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    failures = [line for line in lines if " failed" in line]
    return "; ".join(failures) or (lines or ["no output"])[-1]


def run_command_stage(
    stages: StageRunner,
    stage: CommandStage,
    runner: CommandRunner,
    what: str = "",
    clear_stale: bool = True,
) -> StageOutcome:
    """Run a command stage unless it is up to date (``stage.json`` in its folder).

    Args:
        stages: The stage runner whose folder ``stage.name`` is the stage's.
        stage: The stage.
        runner: How the command runs.
        what: What the stage does, for its ``[name] running: what`` line.
        clear_stale: See :meth:`StageRunner.run`.

    Returns:
        The outcome; its record's ``info`` holds the command and the last line of its
        output.

    Raises:
        CommandStageError: The command failed (exit code, or timed out, with what failed), could
            not start, or did not write its file.

    """

    def body(_folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        stage.output.parent.mkdir(parents=True, exist_ok=True)
        try:
            code, tail = runner(stage.command, stage.timeout_s, stage.log)
        except FileNotFoundError as error:
            raise CommandStageError(stage, "cannot run", None, str(error)) from None
        summary = failure_summary(tail)
        if code == 0 and stage.output.exists():
            lines = [line.strip() for line in tail.splitlines() if line.strip()]
            info = {"command": shlex.join(stage.command), "output_tail": lines[-5:]}
            return {stage.output_key: str(stage.output)}, info
        if code == ExitCode.TIMEOUT:
            why = f"ran past {stage.timeout_s:.0f} s"
        elif code == 0:
            why = f"exited with 0 but did not write {stage.output}"
        else:
            why = f"exited with {code}"
        set_aside = ""
        if stage.name == GROUNDING and stage.output.exists():
            kept = stage.output.with_name(f"{stage.output.stem}.failed{stage.output.suffix}")
            stage.output.replace(kept)
            set_aside = str(kept)
        raise CommandStageError(stage, why, code, summary, set_aside)

    return stages.run(
        stage.name,
        stage.inputs,
        body,
        note=f"log {stage.log}",
        what=what,
        clear_stale=clear_stale,
    )
