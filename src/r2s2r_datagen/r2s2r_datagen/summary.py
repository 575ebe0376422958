"""The per-configuration summary of a generation run: table (rich) and ``summary.json``."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from r2s2r_common.errors import ExitCode
from r2s2r_common.files import write_json_atomic

from r2s2r_datagen.ledger import is_interrupted

LOW_YIELD_FRACTION = 0.10
"""A configuration's yield (successes per attempt) below this is far below usual: on the
family's edge twin ``twin_outer_fifth_seed1`` the four configurations yielded 70-88 % from sound
inputs (MimicGen 70 % and 78 %, the planner 70 % and 88 %), and MimicGen 0 % from demos tracked
before grounding (issue 34)."""

LOW_YIELD_MIN_ATTEMPTS = 20
"""Attempts before a low but non-zero yield is called far below usual (a yield of 0 always is)."""

TOP_FAILURE_REASONS = 3
"""Failure reasons named in a low-yield diagnosis."""


@dataclass
class ConfigurationSummary:
    """Counts of one configuration over the whole run directory (all sessions).

    Attributes:
        name: Configuration name.
        world: ``nominal`` or ``grounded``.
        behavior: ``mimicgen`` or ``planner``.
        world_config_id: World identifier written into the episodes.
        unavailable: Why the configuration could not run here, else ``None``.
        requested: Episodes asked for.
        successes: Episodes generated and written.
        failed: Episodes whose generation failed (trial failures, crashes, timeouts, failed
            writes).
        interrupted: Of ``failed``, those without a verdict
            (:func:`~r2s2r_datagen.ledger.is_interrupted`).
        skipped: Bad-input episodes skipped with a reason.
        attempts: Simulator rollouts tried (the yield's denominator).
        failure_reasons: Reason → count over failed and skipped episodes.
        job_wall_s: Sum of job wall times (worker seconds).
        finished_this_session: Episodes finished by this invocation.
        episodes_per_min: ``finished_this_session`` per minute of this invocation's
            generation jobs (prerequisites such as recording demos or grounding excluded).
        dataset: Merged dataset path ('' if none).
        dataset_episodes: Episodes in the merged dataset.
        excluded_shards: ``"shard: reason"`` for shards left out of the merge.
        missing: Ledger successes not found in any readable shard (re-run on resume).
        source_check: MimicGen's check of its source demos
            (:meth:`r2s2r_datagen.mimicgen.source_check.SourceCheck.as_dict`), else ``None``.
        diagnosis: One line when the yield is far below usual (:func:`low_yield_diagnosis`).

    """

    name: str
    world: str
    behavior: str
    world_config_id: str
    unavailable: str | None = None
    requested: int = 0
    successes: int = 0
    failed: int = 0
    interrupted: int = 0
    skipped: int = 0
    attempts: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    job_wall_s: float = 0.0
    finished_this_session: int = 0
    episodes_per_min: float = 0.0
    dataset: str = ""
    dataset_episodes: int = 0
    excluded_shards: list[str] = field(default_factory=list)
    missing: int = 0
    source_check: dict[str, Any] | None = None
    diagnosis: str = ""

    @property
    def finished(self) -> int:
        """Episodes finished (success, failed or skipped)."""
        return self.successes + self.failed + self.skipped

    @property
    def unfinished(self) -> int:
        """Requested episodes without a result: not run, or failed without a verdict."""
        return max(0, self.requested - self.finished) + self.interrupted

    @property
    def yield_fraction(self) -> float | None:
        """Successes per attempt (``None`` before any attempt)."""
        return self.successes / self.attempts if self.attempts else None

    def add_records(self, records: Iterable[dict[str, Any]]) -> None:
        """Count the latest ledger records of this configuration."""
        reasons: Counter[str] = Counter(self.failure_reasons)
        for record in records:
            status = record["status"]
            if status == "success":
                self.successes += 1
            elif status == "failed":
                self.failed += 1
                self.interrupted += is_interrupted(record)
                reasons[str(record["reason"])] += 1
            elif status == "skipped":
                self.skipped += 1
                reasons[str(record["reason"])] += 1
            self.attempts += int(record.get("total_attempts", record.get("attempts", 0)))
            self.job_wall_s += float(record.get("timings", {}).get("total", 0.0))
        self.failure_reasons = dict(sorted(reasons.items()))

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (with yield and finished)."""
        data = asdict(self)
        data["finished"] = self.finished
        data["unfinished"] = self.unfinished
        data["yield"] = self.yield_fraction
        return data


def low_yield_diagnosis(item: ConfigurationSummary) -> str:
    """Say why a configuration yielded nothing or far below usual, in one line ('' otherwise).

    Far below usual: no success after at least one attempt, or a yield under
    :data:`LOW_YIELD_FRACTION` after :data:`LOW_YIELD_MIN_ATTEMPTS` attempts. The line names
    the top failure reasons and, for MimicGen, its source check's verdict.
    """
    fraction = item.yield_fraction
    if item.unavailable or fraction is None:
        return ""
    if item.successes and (
        item.attempts < LOW_YIELD_MIN_ATTEMPTS or fraction >= LOW_YIELD_FRACTION
    ):
        return ""
    ranked = sorted(item.failure_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    reasons = ", ".join(f"{k} {v}" for k, v in ranked[:TOP_FAILURE_REASONS]) or "none recorded"
    line = (
        f"{item.name}: yield {fraction:.0%} ({item.successes} successes in {item.attempts} "
        f"attempts), far below usual; top failures: {reasons}"
    )
    check = item.source_check
    if check is not None:
        if check.get("message"):
            line += f"; source check: {check['message']}"
        else:
            line += (
                f"; source check {check.get('verdict')}: the demos' tracked object sat "
                f"{100.0 * float(check.get('mean_horizontal_m', 0.0)):.1f} cm from the palm at "
                "grasp on average (no tracker bias seen)"
            )
    return line


@dataclass
class RunSummary:
    """Summary of one invocation over its run directory.

    Attributes:
        run_dir: The run directory.
        session: Invocation number in this run directory (0 first).
        elapsed_s: Wall time of this invocation.
        workers: Worker count.
        executor: ``process`` or ``ray``.
        configurations: Per-configuration summaries.
        notes: Messages for the user (unavailable generators, lost episodes...).
        exit_code: ``ExitCode.OK``; ``NOTHING_DONE`` when no requested configuration could
            run (generators or artifact missing); ``INCOMPLETE`` when episodes are left
            without a result (a failed write, a crash, a timeout, not run): a resume runs them.
        jobs_elapsed_s: Wall time from the first job handed out to the last one finished
            (throughput without worker start-up and merge).

    """

    run_dir: str
    session: int
    elapsed_s: float
    workers: int
    executor: str
    configurations: list[ConfigurationSummary] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    exit_code: int = ExitCode.OK
    jobs_elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "run_dir": self.run_dir,
            "session": self.session,
            "elapsed_s": round(self.elapsed_s, 3),
            "workers": self.workers,
            "executor": self.executor,
            "configurations": [c.as_dict() for c in self.configurations],
            "notes": self.notes,
            "exit_code": self.exit_code,
            "jobs_elapsed_s": round(self.jobs_elapsed_s, 3),
        }

    def save(self, path: str | Path) -> None:
        """Write the summary as JSON (atomically)."""
        write_json_atomic(path, self.as_dict())  # a full disk: no partial summary is left

    def table(self) -> Any:
        """Build a :class:`rich.table.Table` of the configurations."""
        from rich.table import Table

        table = Table(title=f"sim_generate: {self.run_dir} (session {self.session})")
        table.add_column("configuration", no_wrap=True)  # names are never cut short
        for column in (
            "attempts",
            "successes",
            "yield",
            "failed",
            "skipped",
            "failure reasons",
            "ep/min",
            "job wall s",
            "dataset",
        ):
            table.add_column(column)
        for c in self.configurations:
            if c.unavailable:
                table.add_row(c.name, "-", "-", "-", "-", "-", f"NOT RUN: {c.unavailable}")
                continue
            yield_text = f"{c.yield_fraction:.0%}" if c.yield_fraction is not None else "-"
            reasons = ", ".join(f"{k}={v}" for k, v in c.failure_reasons.items()) or "-"
            table.add_row(
                c.name,
                str(c.attempts),
                f"{c.successes}/{c.requested}",
                yield_text,
                str(c.failed),
                str(c.skipped),
                reasons,
                f"{c.episodes_per_min:.1f}",
                f"{c.job_wall_s:.1f}",
                f"{c.dataset_episodes} ep" if c.dataset else "-",
            )
        return table

    def print(self, file: Any = None) -> None:
        """Print the table and the notes with rich."""
        from rich.console import Console

        # A terminal's width (or COLUMNS, which `r2s2r launch` sets for its nodes); else 160.
        width = None if os.environ.get("COLUMNS", "").isdigit() else 160
        console = Console(file=file, width=width)
        console.print(self.table())
        for note in self.notes:
            console.print(f"note: {note}", markup=False, highlight=False)
