"""What the main job needs before it generates: the real demonstrations and the grounding artifact.

On a fresh machine neither exists. The bring-up's pipeline (``r2s2r.pipeline.main_job``) finds
or produces them before generation (``prepare_demos``: record on the real twin with ``r2s2r
record-demos`` and point MimicGen's ``source_dataset`` at the result; ``prepare_grounding``:
``r2s2r ground`` against the twin) and hands :func:`r2s2r_datagen.runner.run_generation` a
:class:`PrerequisitesReport`. This module says what is needed and where
(:func:`mimicgen_source_path`, :func:`selected_configurations`; the source is set with
:func:`r2s2r_datagen.configurations.with_inputs`) and how
each step ended (:class:`PrerequisiteStep`: present, produced, failed, not needed); the steps
end up in the job's output and ``summary.json`` notes, a step that failed leaves its
configurations unavailable (reported by the runner), and nothing is ever faked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from r2s2r_common.console import (
    duration_text,
)
from r2s2r_common.files import write_json_atomic

from r2s2r_datagen.config import DatagenConfig, GenerateConfig

StepStatus = Literal["present", "produced", "failed", "not_needed"]


@dataclass
class PrerequisiteStep:
    """One prerequisite and what the job did about it.

    Attributes:
        name: ``demos`` or ``grounding``.
        status: present (found: made by an earlier run with the same inputs, or given),
            produced (made now), failed (tried, failed), not_needed (no selected
            configuration uses it).
        path: The file it concerns.
        detail: Why (the reason it failed or is not needed, what was found or produced).
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
            "not_needed": f"not needed ({self.detail})",
        }[self.status]
        if self.status == "failed" and self.affects:
            label += f" -> {', '.join(self.affects)} not run"
        return f"[{self.name}] {label}"

    def note(self) -> str:
        """One line for the job's output and summary notes."""
        text = f"prerequisite {self.name}: {self.status}: {self.path}: {self.detail}"
        if self.status == "failed" and self.affects:
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

    def wall_s(self) -> float:
        """Wall time of the steps' commands."""
        return sum(step.wall_s for step in self.steps)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (``prerequisites.json``)."""
        return {"steps": [asdict(s) for s in self.steps]}

    def save(self, path: str | Path) -> None:
        """Write :meth:`as_dict` as JSON (atomically)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(target, self.as_dict())


def selected_configurations(config: GenerateConfig, datagen: DatagenConfig) -> list[Any]:
    """Return the configurations the job runs (all of the file's when none are named).

    Raises:
        r2s2r_common.config.ConfigError: An unknown configuration name.

    """
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
