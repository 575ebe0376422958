"""Evaluation results: success per condition with 95% Wilson intervals, failure reasons, files.

:class:`EvaluationReport` is what both evaluators return. :meth:`EvaluationReport.save` writes
``<name>.json`` (every trial, the summary, the protocol and how it was run) and ``<name>.png``
(a bar plot of success per condition with the interval as error bars; matplotlib Agg).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2s2r_common.errors import RunFailedError

from .stats import wilson_interval
from .trials import NOMINAL, POLICY_FAULTS, EvaluationConfig, TrialRecord


class PolicyFaultError(RunFailedError):
    """Trials in which the policy misbehaved (stopped by the safety layer, or never acted)."""


SHIFTED = "shifted"
ALL = "all"


@dataclass(frozen=True)
class ConditionSummary:
    """Success of one condition (or group of conditions).

    Attributes:
        trials: Number of trials.
        successes: Successful trials.
        rate: ``successes / trials`` (0 when no trial).
        ci_low: Lower bound of the 95% Wilson interval.
        ci_high: Upper bound.
        failure_reasons: Failure reason -> count.
        not_run: Trials that did not run to an outcome (in no count above).

    """

    trials: int
    successes: int
    rate: float
    ci_low: float
    ci_high: float
    failure_reasons: dict[str, int]
    not_run: int = 0

    @classmethod
    def of(cls, records: list[TrialRecord]) -> ConditionSummary:
        """Summarise ``records`` (trials that did not run are counted apart)."""
        not_run = sum(1 for r in records if r.not_run)
        records = [r for r in records if not r.not_run]
        successes = sum(1 for r in records if r.success)
        low, high = wilson_interval(successes, len(records))
        reasons = Counter(r.reason for r in records if not r.success)
        return cls(
            trials=len(records),
            successes=successes,
            rate=successes / len(records) if records else 0.0,
            ci_low=low,
            ci_high=high,
            failure_reasons=dict(sorted(reasons.items())),
            not_run=not_run,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (``not_run`` only when some trial did not run)."""
        out: dict[str, Any] = {
            "trials": self.trials,
            "successes": self.successes,
            "rate": self.rate,
            "ci95": [self.ci_low, self.ci_high],
            "failure_reasons": self.failure_reasons,
        }
        if self.not_run:
            out["not_run"] = self.not_run
        return out


@dataclass
class EvaluationReport:
    """Results of one policy's evaluation.

    Attributes:
        policy: Checkpoint path or a name.
        mode: The evaluator: ``ros`` (through the ROS graph) or ``in_process``.
        config: The protocol.
        records: One record per trial, protocol order.
        wall_s: Wall-clock time of the whole evaluation.
        metadata: Anything else worth keeping (twin config name, real-time factor, ...).

    """

    policy: str
    mode: str
    config: EvaluationConfig
    records: list[TrialRecord] = field(default_factory=list)
    wall_s: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, ConditionSummary]:
        """Per condition (protocol order), then ``shifted`` (all non-nominal) and ``all``."""
        conditions = list(dict.fromkeys(r.condition for r in self.records))
        out = {
            c: ConditionSummary.of([r for r in self.records if r.condition == c])
            for c in conditions
        }
        shifted = [r for r in self.records if r.condition != NOMINAL]
        if shifted and NOMINAL in conditions:
            out[SHIFTED] = ConditionSummary.of(shifted)
        out[ALL] = ConditionSummary.of(self.records)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (summary, trials, protocol, metadata)."""
        return {
            "policy": self.policy,
            "mode": self.mode,
            "wall_s": self.wall_s,
            "summary": {k: v.to_dict() for k, v in self.summary().items()},
            "trials": [r.to_dict() for r in self.records],
            "protocol": self.config.model_dump(),
            "metadata": self.metadata,
        }

    @property
    def not_run(self) -> list[TrialRecord]:
        """Trials that did not run to an outcome."""
        return [r for r in self.records if r.not_run]

    @property
    def policy_faults(self) -> list[TrialRecord]:
        """Trials in which the policy faulted (reasons :data:`~.trials.POLICY_FAULTS`)."""
        return [r for r in self.records if r.reason in POLICY_FAULTS]

    def raise_for_policy_faults(self, where: str) -> None:
        """Raise :class:`PolicyFaultError` naming how many trials faulted and the first cause.

        Args:
            where: The file the full records are in (named in the message).

        """
        faults = self.policy_faults
        if not faults:
            return
        counts = Counter(r.reason for r in faults)
        first = next((r.safety_stop for r in faults if r.safety_stop), "")
        raise PolicyFaultError(
            f"{len(faults)} of {len(self.records)} trials with a policy fault ("
            + ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
            + f"; records in {where})"
            + (f": first {first}" if first else "")
            + "; do not deploy this checkpoint unattended"
        )

    def table(self) -> str:
        """Format a readable table: condition, n, success rate, 95% CI, failure reasons."""
        lines = [f"{'condition':<15} {'n':>3} {'success':>8}  {'95% CI':<15} failures"]
        for name, item in self.summary().items():
            reasons = ", ".join(f"{k} {v}" for k, v in item.failure_reasons.items()) or "-"
            if item.not_run:
                reasons += f"; {item.not_run} not run"
            lines.append(
                f"{name:<15} {item.trials:>3} {item.rate:>8.0%}  "
                f"[{item.ci_low:.2f}, {item.ci_high:.2f}]{'':<3} {reasons}"
            )
        return "\n".join(lines)

    def save(self, directory: str | Path, name: str = "evaluation") -> tuple[Path, Path]:
        """Write ``<name>.json`` and ``<name>.png`` into ``directory`` (created if needed).

        Returns:
            The two paths.

        """
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        json_path = target / f"{name}.json"
        json_path.write_text(json.dumps(self.to_dict(), indent=2))
        png_path = target / f"{name}.png"
        plot_success(self.summary(), png_path, title=f"{Path(self.policy).name} ({self.mode})")
        return json_path, png_path


def plot_success(summary: dict[str, ConditionSummary], path: Path, title: str = "") -> None:
    """Bar plot of success rate per condition with 95% Wilson intervals (matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(summary)
    rates = [summary[n].rate for n in names]
    errors = [
        [summary[n].rate - summary[n].ci_low for n in names],
        [summary[n].ci_high - summary[n].rate for n in names],
    ]
    colors = ["#4c72b0" if n not in (SHIFTED, ALL) else "#55a868" for n in names]
    figure, axes = plt.subplots(figsize=(1.3 * len(names) + 2.0, 3.5))
    axes.bar(names, rates, yerr=errors, capsize=4, color=colors)
    for index, name in enumerate(names):
        axes.text(index, 0.02, f"n={summary[name].trials}", ha="center", fontsize=8, color="white")
    axes.set_ylim(0.0, 1.0)
    axes.set_ylabel("success rate (95% Wilson CI)")
    axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
