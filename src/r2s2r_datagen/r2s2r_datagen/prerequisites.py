"""What the main job needs before it generates: the real demonstrations and the grounding artifact.

On a fresh machine neither exists. With ``prepare_demos`` the job records them on the real twin
(``r2s2r record-demos``, a subprocess: the twin, the human-like demonstrator and the recorder,
each its own process) and points MimicGen's ``source_dataset`` at the result; with
``prepare_grounding`` it runs ``r2s2r ground`` against the twin if that command can start the
twin itself. Each step is recorded as a :class:`PrerequisiteStep` (present, produced,
failed, skipped) and ends up in the job's output and ``summary.json`` notes; a step that fails
leaves its configurations unavailable (reported by the runner), and nothing is ever faked.

ROS-free: the steps run commands through a :data:`CommandRunner` (a subprocess by default;
tests pass a fake).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from r2s2r_common.console import (
    PROGRESS_ENV,
    duration_text,
    parse_line,
    progress_reporter,
)
from r2s2r_common.process import spawn_owned, stop_process_group

from r2s2r_datagen.config import DatagenConfig, GenerateConfig

StepStatus = Literal["present", "produced", "failed", "skipped", "not_needed"]

CommandRunner = Callable[[list[str], float, Path], tuple[int, str]]
"""``(command, timeout_s, log_path) -> (exit code, last lines of output)``; 124 on timeout."""

EXIT_TIMEOUT = 124
_TAIL_LINES = 15
GROUND_GRAPH = "real_deploy"
# Log file stem -> the stage its command is (the console's [stage] label).
_STAGE_OF_LOG = {"record_demos": "demos", "ground": "grounding", "ground_help": "grounding"}


@dataclass
class PrerequisiteStep:
    """One prerequisite and what the job did about it.

    Attributes:
        name: ``demos`` or ``grounding``.
        status: present (found), produced (made now), failed (tried, failed), skipped (not
            tried: disabled or not possible here), not_needed (no selected configuration
            uses it).
        path: The file it concerns.
        detail: Why (the reason for skipped/failed, what was produced).
        affects: Configurations that depend on it.
        command: The command run ([] if none).
        wall_s: Wall time of the command.
        log: Log file of the command ('' if none).

    """

    name: str
    status: StepStatus
    path: str
    detail: str
    affects: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    log: str = ""

    def stage_line(self) -> str:
        """Return the console's line for this step (``[demos] up to date``, ``done in 95 s``)."""
        label = {
            "present": "up to date",
            "produced": f"done in {duration_text(self.wall_s)}",
            "failed": f"FAILED after {duration_text(self.wall_s)}: {self.detail}",
            "skipped": f"skipped: {self.detail}",
            "not_needed": f"not needed ({self.detail})",
        }[self.status]
        if self.status in ("failed", "skipped") and self.affects:
            label += f" -> {', '.join(self.affects)} not run"
        return f"[{self.name}] {label}"

    def note(self) -> str:
        """One line for the job's output and summary notes."""
        text = f"prerequisite {self.name}: {self.status}: {self.path}: {self.detail}"
        if self.status in ("failed", "skipped") and self.affects:
            text += f" -> {', '.join(self.affects)} not run"
        if self.log:
            text += f" (log: {self.log})"
        return text


@dataclass
class PrerequisitesReport:
    """The steps and the configurations file content the job should use afterwards.

    Attributes:
        steps: One entry per prerequisite looked at.
        datagen: The configurations, with ``behavior_options.mimicgen.source_dataset`` set to
            the demonstrations when they were found or produced at the job's default path.

    """

    steps: list[PrerequisiteStep]
    datagen: DatagenConfig

    def notes(self) -> list[str]:
        """One note per step that matters (everything but not_needed)."""
        return [s.note() for s in self.steps if s.status != "not_needed"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``prerequisites.json``)."""
        return {"steps": [asdict(s) for s in self.steps]}

    def save(self, path: str | Path) -> None:
        """Write :meth:`as_dict` as JSON (atomically)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(target)


def subprocess_runner(say: Callable[[str], None], progress: bool = True) -> CommandRunner:
    """Return a :data:`CommandRunner` that runs each command in its own process group.

    The whole output goes to ``log_path``, once; ``say`` gets only its warnings and errors
    (one line each, ``[stage] WARN: text``, no ROS timestamp), and while it runs a progress
    line shows the elapsed time and the command's last line (``progress``: on a terminal, or
    drawn by the parent, see :mod:`r2s2r_common.console`). On timeout the group gets SIGINT
    (a graph shuts down cleanly), then SIGKILL after 20 s; the code is 124. The command dies
    with this process (:func:`r2s2r_common.process.spawn_owned`), and when this process is
    interrupted while it runs, its group is stopped first.
    """

    def run(command: list[str], timeout_s: float, log_path: Path) -> tuple[int, str]:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        stage = _STAGE_OF_LOG.get(log_path.stem, log_path.stem)
        tail: deque[str] = deque(maxlen=_TAIL_LINES)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop(PROGRESS_ENV, None)  # its output goes to a file: no progress lines in it
        with log_path.open("w", encoding="utf-8") as log:
            log.write("$ " + " ".join(command) + "\n")
            log.flush()
            process = spawn_owned(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
            )
            assert process.stdout is not None
            deadline = time.monotonic() + timeout_s
            timed_out = False
            bar = progress_reporter(stage, None, progress and "--help" not in command)
            last = [""]  # the command's last status line, shown after the elapsed time

            def watchdog() -> None:
                nonlocal timed_out
                while process.poll() is None:
                    if time.monotonic() > deadline:
                        timed_out = True
                        _stop_group(process)
                        return
                    bar.update(0, last[0])
                    time.sleep(1.0)

            guard = threading.Thread(target=watchdog, daemon=True)
            guard.start()
            try:
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    tail.append(line.rstrip())
                    parsed = parse_line(line)
                    if parsed.problem:
                        say(f"[{stage}] {parsed.console_text()}")
                    elif parsed.message.strip():
                        last[0] = parsed.message.strip()
                process.wait()
            except BaseException:
                _stop_group(process)
                raise
            finally:
                guard.join(timeout=2.0)
                bar.close()
        code = EXIT_TIMEOUT if timed_out else int(process.returncode)
        return code, "\n".join(tail)

    return run


def _stop_group(process: subprocess.Popen[str]) -> None:
    stop_process_group(process, 20.0, (signal.SIGINT, signal.SIGKILL))


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "r2s2r.cli", *args]


def _selected(config: GenerateConfig, datagen: DatagenConfig) -> list[Any]:
    if not config.configurations:
        return list(datagen.configurations)
    return [datagen.configuration(name) for name in config.configurations]


def mimicgen_source_path(
    config: GenerateConfig, datagen: DatagenConfig
) -> tuple[Path, Literal["configurations", "mimicgen_config", "default"]]:
    """Where MimicGen's source demonstrations are expected, and who says so.

    ``behavior_options.mimicgen.source_dataset`` first (relative to the current directory, as
    the generator reads it), then ``source_dataset`` of the MimicGen config file (relative to
    that file), else the job's ``demos_dataset_path``.
    """
    options = datagen.behavior_options.get("mimicgen", {})
    if options.get("source_dataset"):
        return Path(str(options["source_dataset"])).resolve(), "configurations"
    from r2s2r_datagen.mimicgen.config import load_mimicgen_config, resolve

    mimicgen, base_dir = load_mimicgen_config(options.get("config_path"))
    if mimicgen.source_dataset:
        return resolve(base_dir, mimicgen.source_dataset), "mimicgen_config"
    return Path(config.demos_dataset_path).resolve(), "default"


def _with_source(datagen: DatagenConfig, path: Path) -> DatagenConfig:
    options = {k: dict(v) for k, v in datagen.behavior_options.items()}
    options.setdefault("mimicgen", {})["source_dataset"] = str(path)
    return datagen.model_copy(update={"behavior_options": options})


def prepare_demos(
    config: GenerateConfig,
    datagen: DatagenConfig,
    log_dir: Path,
    runner: CommandRunner,
    say: Callable[[str], None] | None = None,
) -> tuple[PrerequisiteStep, DatagenConfig]:
    """Find or record MimicGen's source demonstrations (see the module docstring).

    ``say`` gets one ``[demos] running`` line before the recording starts.
    """
    affects = [c.name for c in _selected(config, datagen) if c.behavior == "mimicgen"]
    path, origin = mimicgen_source_path(config, datagen)
    if not affects:
        return PrerequisiteStep("demos", "not_needed", str(path), "no mimicgen configuration"), (
            datagen
        )
    if "mimicgen" in config.overrides():
        detail = "the mimicgen generator is overridden"
        return PrerequisiteStep("demos", "not_needed", str(path), detail, affects), datagen
    updated = _with_source(datagen, path) if origin == "default" else datagen
    if path.exists():
        detail = f"MimicGen source demonstrations found (from the {origin} setting)"
        return PrerequisiteStep("demos", "present", str(path), detail, affects), updated
    out_dir = path.parent
    command = _cli(
        "record-demos",
        "--episodes",
        str(config.demos_episodes),
        "--out",
        str(out_dir),
        "--dataset",
        str(path),
        "--seed",
        str(config.demos_seed),
        "--real-time-factor",
        str(config.demos_real_time_factor),
        "--quiet",
    )
    for argument in config.cell_launch_args:
        command += ["--launch-arg", argument]
    log = log_dir / "record_demos.log"
    if say is not None:
        say(f"[demos] running: recording {config.demos_episodes} demonstrations (log {log})")
    started = time.monotonic()
    code, tail = runner(command, config.prepare_timeout_s, log)
    wall = time.monotonic() - started
    if code == 0 and path.exists():
        detail = (
            f"recorded {config.demos_episodes} demonstrations on the real twin and converted "
            f"them ({_last_line(tail, 'bag2dataset')})"
        )
        step = PrerequisiteStep("demos", "produced", str(path), detail, affects, command, wall)
        step.log = str(log)
        return step, updated
    why = "timed out" if code == EXIT_TIMEOUT else f"exit code {code}"
    detail = f"record-demos failed ({why}): {_last_line(tail, '')}"
    step = PrerequisiteStep("demos", "failed", str(path), detail, affects, command, wall, str(log))
    return step, datagen


def _last_line(text: str, containing: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    matching = [line for line in lines if containing in line]
    return (matching or lines or ["no output"])[-1]


def ground_command(
    help_text: str, artifact: Path, launch_args: Sequence[str] = ()
) -> list[str] | None:
    """Return the ``r2s2r ground`` command that starts the cell graph itself, or None.

    Uses ``--launch real_deploy`` plus one ``--launch-arg`` per cell launch argument when the
    command has those options (the arguments are passed on unread).
    """
    if "--launch " not in help_text or "--launch-arg" not in help_text:
        return None
    command = _cli("ground", "--output", str(artifact), "--launch", GROUND_GRAPH)
    for argument in launch_args:
        command += ["--launch-arg", argument]
    return command


def prepare_grounding(
    config: GenerateConfig,
    datagen: DatagenConfig,
    log_dir: Path,
    runner: CommandRunner,
    say: Callable[[str], None] | None = None,
) -> PrerequisiteStep:
    """Find the grounding artifact or run ``r2s2r ground`` against the twin to make it.

    ``say`` gets one ``[grounding] running`` line before ``r2s2r ground`` starts.
    """
    affects = [c.name for c in _selected(config, datagen) if c.world == "grounded"]
    path = Path(config.grounding_artifact_path or datagen.grounding_artifact_path).resolve()
    if not affects:
        return PrerequisiteStep("grounding", "not_needed", str(path), "no grounded configuration")
    if path.exists():
        return PrerequisiteStep("grounding", "present", str(path), "artifact found", affects)
    help_code, help_text = runner(_cli("ground", "--help"), 120.0, log_dir / "ground_help.log")
    command = ground_command(help_text, path, config.cell_launch_args) if help_code == 0 else None
    if command is None:
        detail = "artifact missing and `r2s2r ground` cannot start the twin here " + (
            f"(`ground --help` failed with exit code {help_code}: {_last_line(help_text, '')})"
            if help_code
            else "(it has no --launch/--launch-arg options)"
        )
        return PrerequisiteStep("grounding", "skipped", str(path), detail, affects)
    log = log_dir / "ground.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    if say is not None:
        say(f"[grounding] running: r2s2r ground against the twin (log {log})")
    started = time.monotonic()
    code, tail = runner(command, config.prepare_timeout_s, log)
    wall = time.monotonic() - started
    if code == 0 and path.exists():
        detail = "grounded against the real twin with `r2s2r ground`"
        return PrerequisiteStep(
            "grounding", "produced", str(path), detail, affects, command, wall, str(log)
        )
    why = "timed out" if code == EXIT_TIMEOUT else f"exit code {code}"
    if code == 0:
        why = "exit code 0 but no artifact written"
    failures = [line.strip() for line in tail.splitlines() if " failed" in line]
    detail = f"`r2s2r ground` failed ({why}): {'; '.join(failures) or _last_line(tail, '')}"
    if path.exists():
        # A failed run may still write an artifact (without its failed steps); grounded
        # configurations on it would be nominal ones under another name, so it is set aside.
        kept = path.with_name(f"{path.stem}.failed{path.suffix}")
        path.replace(kept)
        detail += f"; its partial artifact was moved to {kept}"
    return PrerequisiteStep(
        "grounding", "failed", str(path), detail, affects, command, wall, str(log)
    )


def prepare_prerequisites(
    config: GenerateConfig,
    datagen: DatagenConfig,
    log_dir: Path,
    say: Callable[[str], None],
    runner: CommandRunner | None = None,
    progress: bool = True,
) -> PrerequisitesReport:
    """Find or produce what the selected configurations need (see the module docstring).

    Steps run only when enabled (``prepare_demos``, ``prepare_grounding``); disabled ones
    leave the configurations exactly as before (the runner reports what is missing).

    Args:
        config: The job's settings.
        datagen: The configurations file's content.
        log_dir: Folder for the commands' logs.
        say: Stage lines (``[demos] running``, ``[demos] done in 95 s``, ``[demos] up to
            date``) and the commands' warnings and errors.
        runner: How commands run; :func:`subprocess_runner` when None.
        progress: Progress line while a command runs (:func:`subprocess_runner`).

    Raises:
        r2s2r_common.config.ConfigError: Unknown configuration name or a bad MimicGen config.

    """
    run = runner or subprocess_runner(say, progress)
    steps: list[PrerequisiteStep] = []
    if config.prepare_demos:
        step, datagen = prepare_demos(config, datagen, log_dir, run, say)
        steps.append(step)
        say(step.stage_line())
    if config.prepare_grounding:
        steps.append(prepare_grounding(config, datagen, log_dir, run, say))
        say(steps[-1].stage_line())
    return PrerequisitesReport(steps, datagen)
