"""The experiment's results: the paper's table, main effects of the two grounding axes, files.

The 2×2 design crosses *world* grounding (nominal or grounded simulator world) with *behavior*
grounding (planner or MimicGen from the real demonstrations). Each of the four co-trained
policies is trained on the real demonstrations plus one simulated configuration; the real-only
policy is the baseline. As in the paper, the **main effect** of an axis is the mean success of
the two policies grounded on that axis minus the mean of the two that are not, i.e. averaged
over the other axis::

    world    = mean(grounded_mimicgen, grounded_planner) - mean(nominal_mimicgen, nominal_planner)
    behavior = mean(grounded_mimicgen, nominal_mimicgen) - mean(grounded_planner, nominal_planner)

reported in percentage points. Its 95% interval is the normal (Wald) interval of that contrast
of four independent binomial proportions, ``var = (v1 + v2 + v3 + v4) / 4`` with
``v = p (1 - p) / n``. The **simple effects** (one axis at a fixed level of the other) show the
interaction the paper discusses: behavior grounding matters mainly when the world is not
grounded. Success rates of single policies carry 95% Wilson intervals, as in
:mod:`r2s2r_policy.evaluation`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

from r2s2r_policy.evaluation.report import ALL, SHIFTED, EvaluationReport
from r2s2r_policy.evaluation.stats import wilson_interval
from r2s2r_policy.evaluation.trials import NOMINAL

REAL_ONLY = "real_only"
"""Name of the baseline policy (real demonstrations only)."""

GROUPS: tuple[str, ...] = (NOMINAL, SHIFTED, ALL)
"""Columns of the table: nominal trials, shifted trials, all trials."""

WORLD_LEVELS: tuple[str, str] = ("grounded", "nominal")
BEHAVIOR_LEVELS: tuple[str, str] = ("mimicgen", "planner")

PolicyStatus = Literal["ok", "not_run"]

_REASON_CHARS = 160


def configuration_name(world: str, behavior: str) -> str:
    """Name of the simulated configuration (and its co-trained policy), e.g. grounded_mimicgen."""
    return f"{world}_{behavior}"


@dataclass(frozen=True)
class GroupResult:
    """Success in one group of trials (nominal, shifted or all).

    Attributes:
        successes: Successful trials.
        trials: Trials run.

    """

    successes: int
    trials: int

    def __post_init__(self) -> None:
        if self.trials < 0 or not 0 <= self.successes <= self.trials:
            raise ValueError(
                f"successes = {self.successes}, trials = {self.trials}: expected "
                "0 <= successes <= trials"
            )

    @property
    def rate(self) -> float:
        """Success rate (0 when no trial)."""
        return self.successes / self.trials if self.trials else 0.0

    @property
    def ci95(self) -> tuple[float, float]:
        """95% Wilson interval of the rate."""
        return wilson_interval(self.successes, self.trials)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        low, high = self.ci95
        return {
            "successes": self.successes,
            "trials": self.trials,
            "rate": self.rate,
            "ci95": [low, high],
        }


@dataclass
class PolicyResult:
    """One policy of the experiment: what it was trained on and how it did.

    Attributes:
        name: ``real_only`` or the simulated configuration's name.
        world: World level of its simulated data (None for real-only).
        behavior: Behavior level of its simulated data (None for real-only).
        status: ``ok`` (trained and evaluated) or ``not_run``.
        reason: Why it was not run ('' when it ran).
        groups: Group name (nominal, shifted, all) -> result; empty when not run.
        failure_reasons: Failure reason -> count over all trials.
        checkpoint: The evaluated checkpoint ('' when not run).
        conditions: Condition -> ``{"successes", "trials", "failures": {reason: n}}``.

    """

    name: str
    world: str | None = None
    behavior: str | None = None
    status: PolicyStatus = "ok"
    reason: str = ""
    groups: dict[str, GroupResult] = field(default_factory=dict)
    failure_reasons: dict[str, int] = field(default_factory=dict)
    checkpoint: str = ""
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        """Whether the policy was trained and evaluated."""
        return self.status == "ok"

    @property
    def label(self) -> str:
        """Row label of the table."""
        if self.world is None:
            return "real only"
        return f"real + {self.world} world, {self.behavior}"

    @classmethod
    def from_report(
        cls,
        name: str,
        report: EvaluationReport,
        world: str | None = None,
        behavior: str | None = None,
        checkpoint: str = "",
    ) -> PolicyResult:
        """Summarise an evaluation report into the table's groups."""
        summary = report.summary()
        groups = {
            group: GroupResult(summary[group].successes, summary[group].trials)
            for group in GROUPS
            if group in summary
        }
        return cls(
            name=name,
            world=world,
            behavior=behavior,
            groups=groups,
            failure_reasons=dict(summary[ALL].failure_reasons) if ALL in summary else {},
            checkpoint=checkpoint,
        )

    @classmethod
    def not_run(
        cls, name: str, reason: str, world: str | None = None, behavior: str | None = None
    ) -> PolicyResult:
        """Make the row of a policy that could not be trained or evaluated, with the reason."""
        return cls(name=name, world=world, behavior=behavior, status="not_run", reason=reason)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "name": self.name,
            "label": self.label,
            "world": self.world,
            "behavior": self.behavior,
            "status": self.status,
            "reason": self.reason,
            "checkpoint": self.checkpoint,
            "groups": {k: v.to_dict() for k, v in self.groups.items()},
            "failure_reasons": self.failure_reasons,
            "conditions": self.conditions,
        }


def pooled_groups(records: list[dict[str, Any]], name: str) -> dict[str, GroupResult]:
    """Return the nominal, shifted and all trials of policy ``name`` added over ``records``.

    ``records`` are result summaries (:meth:`ExperimentResults.summary`, or the translation
    experiment's): ``{"commit", "policies": {name: {condition: {"successes", "trials"}}}}``.

    Raises:
        SystemExit: A record where the policy did not run (names the record's commit).

    """
    totals = {group: [0, 0] for group in (NOMINAL, SHIFTED, ALL)}
    for record in records:
        conditions = record["policies"].get(name)
        if not conditions or "not_run" in conditions:
            why = (conditions or {}).get("not_run", "no results")
            raise SystemExit(f"record at {record['commit']}: {name} cannot be pooled ({why})")
        for condition, counts in conditions.items():
            groups = (NOMINAL, ALL) if condition == NOMINAL else (SHIFTED, ALL)
            for group in groups:
                totals[group][0] += int(counts["successes"])
                totals[group][1] += int(counts["trials"])
    return {group: GroupResult(s, n) for group, (s, n) in totals.items()}


@dataclass(frozen=True)
class Effect:
    """A difference of success rates in percentage points, with its 95% interval.

    Attributes:
        points: Estimate (percentage points; positive: grounding helps).
        ci95_points: 95% interval (points), Agresti-Caffo adjusted Wald.

    """

    points: float
    ci95_points: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {"points": self.points, "ci95_points": list(self.ci95_points)}


def contrast(plus: Sequence[GroupResult], minus: Sequence[GroupResult]) -> Effect:
    """Mean rate of ``plus`` minus mean rate of ``minus``, in points, with a 95% interval.

    Args:
        plus: Results averaged with a positive sign.
        minus: Results averaged with a negative sign.

    Returns:
        The effect.

    Raises:
        ValueError: If either side is empty or a result has no trials.

    """
    if not plus or not minus:
        raise ValueError(f"contrast: {len(plus)} vs {len(minus)} results, expected >= 1 each")
    empty = [r for r in (*plus, *minus) if r.trials == 0]
    if empty:
        raise ValueError("contrast: a result with 0 trials has no success rate")
    mean_plus = sum(r.rate for r in plus) / len(plus)
    mean_minus = sum(r.rate for r in minus) / len(minus)
    estimate = mean_plus - mean_minus
    # Agresti-Caffo: one success and one failure added to every group. The plain Wald interval
    # collapses to zero width when a group's rate is 0 or 1 (0/50 vs 0/50 would read as
    # certain equality); the adjusted one keeps the uncertainty of small samples.
    adjusted = [((r.successes + 1) / (r.trials + 2), r.trials + 2) for r in (*plus, *minus)]
    center = sum(p for p, _ in adjusted[: len(plus)]) / len(plus) - sum(
        p for p, _ in adjusted[len(plus) :]
    ) / len(minus)
    variance = sum(p * (1 - p) / n for p, n in adjusted[: len(plus)]) / len(plus) ** 2
    variance += sum(p * (1 - p) / n for p, n in adjusted[len(plus) :]) / len(minus) ** 2
    z = NormalDist().inv_cdf(0.975)
    half = z * math.sqrt(variance)
    low, high = max(center - half, -1.0), min(center + half, 1.0)
    return Effect(100.0 * estimate, (100.0 * low, 100.0 * high))


@dataclass
class Effects:
    """Main and simple effects of world and behavior grounding in one trial group.

    Attributes:
        group: ``nominal``, ``shifted`` or ``all``.
        world: Main effect of world grounding (None when a co-trained policy is missing).
        behavior: Main effect of behavior grounding (None likewise).
        simple: Simple effects, e.g. ``behavior@nominal_world`` (only those computable).
        over_real_only: Policy name -> gain over the real-only policy (points).
        missing: Co-trained policies without a result (why effects are None).

    """

    group: str
    world: Effect | None = None
    behavior: Effect | None = None
    simple: dict[str, Effect] = field(default_factory=dict)
    over_real_only: dict[str, Effect] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "group": self.group,
            "world": self.world.to_dict() if self.world else None,
            "behavior": self.behavior.to_dict() if self.behavior else None,
            "simple": {k: v.to_dict() for k, v in self.simple.items()},
            "over_real_only": {k: v.to_dict() for k, v in self.over_real_only.items()},
            "missing": self.missing,
        }


def grounding_effects(policies: Mapping[str, PolicyResult], group: str = ALL) -> Effects:
    """Compute main effects (over the other axis), simple effects and gains over real-only.

    Args:
        policies: Policy name -> result; co-trained ones are named
            ``<world>_<behavior>`` (see :func:`configuration_name`).
        group: Trial group the effects are computed on.

    Returns:
        The effects; a main effect is None unless all four co-trained policies ran.

    """
    cell: dict[tuple[str, str], GroupResult] = {}
    missing = []
    for world in WORLD_LEVELS:
        for behavior in BEHAVIOR_LEVELS:
            name = configuration_name(world, behavior)
            policy = policies.get(name)
            if policy is None or not policy.ran or group not in policy.groups:
                missing.append(name)
            elif policy.groups[group].trials > 0:
                cell[(world, behavior)] = policy.groups[group]
            else:
                missing.append(name)
    effects = Effects(group=group, missing=missing)
    grounded_w, nominal_w = WORLD_LEVELS
    grounded_b, planner_b = BEHAVIOR_LEVELS
    if len(cell) == 4:
        effects.world = contrast(
            [cell[(grounded_w, b)] for b in BEHAVIOR_LEVELS],
            [cell[(nominal_w, b)] for b in BEHAVIOR_LEVELS],
        )
        effects.behavior = contrast(
            [cell[(w, grounded_b)] for w in WORLD_LEVELS],
            [cell[(w, planner_b)] for w in WORLD_LEVELS],
        )
    for world in WORLD_LEVELS:
        if (world, grounded_b) in cell and (world, planner_b) in cell:
            effects.simple[f"behavior@{world}_world"] = contrast(
                [cell[(world, grounded_b)]], [cell[(world, planner_b)]]
            )
    for behavior in BEHAVIOR_LEVELS:
        if (grounded_w, behavior) in cell and (nominal_w, behavior) in cell:
            effects.simple[f"world@{behavior}_behavior"] = contrast(
                [cell[(grounded_w, behavior)]], [cell[(nominal_w, behavior)]]
            )
    baseline = policies.get(REAL_ONLY)
    if (
        baseline is not None
        and baseline.ran
        and baseline.groups.get(group, GroupResult(0, 0)).trials
    ):
        for (world, behavior), result in cell.items():
            effects.over_real_only[configuration_name(world, behavior)] = contrast(
                [result], [baseline.groups[group]]
            )
    return effects


def _rate_cell(result: GroupResult | None) -> str:
    if result is None or result.trials == 0:
        return "-"
    low, high = result.ci95
    return f"{100 * result.rate:3.0f}% [{100 * low:2.0f},{100 * high:3.0f}] n={result.trials}"


def _effect_cell(effect: Effect | None) -> str:
    if effect is None:
        return "n/a"
    low, high = effect.ci95_points
    return f"{effect.points:+.1f} [{low:+.0f},{high:+.0f}]"


def format_table(policies: Sequence[PolicyResult], effects: Mapping[str, Effects]) -> str:
    """Format the paper's table: success per policy (nominal / shifted / all, 95% CI), effects.

    Args:
        policies: Rows, in order.
        effects: Group -> effects (from :func:`grounding_effects`).

    Returns:
        The table (several lines, no trailing newline).

    """
    width = max([len(p.label) for p in policies] + [len("policy")])
    header = f"{'policy':<{width}}  " + "  ".join(f"{g:<24}" for g in GROUPS)
    lines = [
        "success rate [95% Wilson CI, %] per policy",
        header,
        "-" * len(header),
    ]
    for policy in policies:
        if not policy.ran:
            reason = policy.reason
            if len(reason) > _REASON_CHARS:  # the full reason is in results.json
                reason = reason[: _REASON_CHARS - 25] + "... (see results.json)"
            lines.append(f"{policy.label:<{width}}  NOT RUN: {reason}")
            continue
        cells = "  ".join(f"{_rate_cell(policy.groups.get(g)):<24}" for g in GROUPS)
        lines.append(f"{policy.label:<{width}}  {cells}")
    lines += ["", "grounding effects, percentage points [95% CI] (averaged over the other axis)"]
    label_width = 30
    lines.append(f"{'effect':<{label_width}}  " + "  ".join(f"{g:<18}" for g in GROUPS))
    rows: list[tuple[str, str]] = [("world (main)", "world"), ("behavior (main)", "behavior")]
    simple_names = sorted({k for e in effects.values() for k in e.simple})
    gain_names = sorted({k for e in effects.values() for k in e.over_real_only})
    for title, key in rows:
        cells = "  ".join(
            f"{_effect_cell(getattr(effects[g], key) if g in effects else None):<18}"
            for g in GROUPS
        )
        lines.append(f"{title:<{label_width}}  {cells}")
    for name in simple_names:
        cells = "  ".join(
            f"{_effect_cell(effects[g].simple.get(name) if g in effects else None):<18}"
            for g in GROUPS
        )
        lines.append(f"{name:<{label_width}}  {cells}")
    for name in gain_names:
        cells = "  ".join(
            f"{_effect_cell(effects[g].over_real_only.get(name) if g in effects else None):<18}"
            for g in GROUPS
        )
        lines.append(f"{name + ' - real only':<{label_width}}  {cells}")
    missing = effects[ALL].missing if ALL in effects else []
    if missing:
        lines.append(f"main effects need all four co-trained policies; missing: {missing}")
    return "\n".join(lines)


def plot_results(policies: Sequence[PolicyResult], path: str | Path, title: str = "") -> Path:
    """Plot success per policy (nominal / shifted / all bars) with 95% Wilson CIs.

    Policies that did not run are shown with an empty slot and "not run" under their name.

    Returns:
        The PNG path.

    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    target = Path(path)
    colors = {NOMINAL: "#4c72b0", SHIFTED: "#dd8452", ALL: "#55a868"}
    width = 0.26
    positions = np.arange(len(policies))
    figure, axes = plt.subplots(figsize=(1.9 * len(policies) + 2.5, 4.2))
    for offset, group in enumerate(GROUPS):
        rates, lows, highs, xs = [], [], [], []
        for index, policy in enumerate(policies):
            result = policy.groups.get(group)
            if not policy.ran or result is None or result.trials == 0:
                continue
            low, high = result.ci95
            xs.append(index + (offset - 1) * width)
            rates.append(result.rate)
            lows.append(result.rate - low)
            highs.append(high - result.rate)
        axes.bar(xs, rates, width, yerr=[lows, highs], capsize=3, color=colors[group], label=group)
    labels = [
        p.label.replace(" world, ", "\nworld, ") + ("" if p.ran else "\n(not run)")
        for p in policies
    ]
    axes.set_xticks(positions, labels, fontsize=8)
    axes.set_ylim(0.0, 1.0)
    axes.set_ylabel("success rate (95% Wilson CI)")
    axes.set_title(title)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, dpi=100)
    plt.close(figure)
    return target


@dataclass
class ExperimentResults:
    """Everything the experiment reports.

    Attributes:
        policies: Per-policy results, table order (real-only first).
        effects: Group -> grounding effects.
        command: The command that reproduces the experiment.
        commit: Git commit of the code that ran this session ('' outside a git checkout).
        metadata: Scale, wall times per stage, evaluator, ...

    """

    policies: list[PolicyResult]
    command: str = ""
    commit: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    effects: dict[str, Effects] = field(default_factory=dict)
    capacity: PolicyResult | None = None

    def __post_init__(self) -> None:
        if not self.effects:
            by_name = {p.name: p for p in self.policies}
            self.effects = {g: grounding_effects(by_name, g) for g in GROUPS}

    def table(self) -> str:
        """Return the paper's table (see :func:`format_table`)."""
        return format_table(self.policies, self.effects)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            "policies": [p.to_dict() for p in self.policies],
            "effects": {k: v.to_dict() for k, v in self.effects.items()},
            "capacity": self.capacity.to_dict() if self.capacity is not None else None,
            "command": self.command,
            "metadata": self.metadata,
        }

    def summary(self) -> dict[str, Any]:
        """Return the compact result record committed under ``results/`` (one JSON).

        ``{"commit", "command", "evaluator", "wall_s", "capacity": {"successes", "trials"},
        "policies":
        {name: {condition: {"successes", "trials", "failures": {reason: n}}}}, "execution":
        {name: {"chosen", ...}}, "effects"}``;
        a policy that did not run has ``{"not_run": reason}``. ``commit`` is the code that ran
        this session; ``stage_commit`` names the code of each stage (a resumed experiment reuses
        stages made by earlier code when their inputs did not change). ``wall_s`` is the wall
        time the results took to make: the sum of the stages' walls, whichever session ran them
        (a cached rerun that only publishes keeps it), each stage's over all its sittings
        (``stage_sittings``, present when a stage was stopped and resumed); ``session_wall_s``
        is this session's.
        ``evaluator`` says which path judged every trial: ``in_process`` or ``ros`` (the
        launched ``evaluate`` graph; ``bench/bench_eval_fidelity.py`` measures how well the
        first predicts the second).
        """
        stage_wall_s: dict[str, float] = self.metadata.get("stage_wall_s") or {}
        policies: dict[str, Any] = {}
        for policy in self.policies:
            policies[policy.name] = (
                dict(policy.conditions) if policy.ran else {"not_run": policy.reason}
            )
        capacity: dict[str, Any] | None = None
        if self.capacity is not None and self.capacity.ran and ALL in self.capacity.groups:
            group = self.capacity.groups[ALL]
            capacity = {
                "successes": group.successes,
                "trials": group.trials,
                "failures": self.capacity.failure_reasons,
                "configuration": self.metadata.get("capacity_configuration", ""),
            }
        config = self.metadata.get("config") or {}
        sittings: dict[str, int] = self.metadata.get("stage_sittings") or {}
        resumed = {"stage_sittings": sittings} if any(n > 1 for n in sittings.values()) else {}
        return {
            "commit": self.commit,
            "command": self.command,
            "evaluator": config.get("evaluator", ""),
            "wall_s": (
                round(sum(stage_wall_s.values()), 1)
                if stage_wall_s
                else self.metadata.get("session_wall_s")
            ),
            "session_wall_s": self.metadata.get("session_wall_s"),
            "stage_wall_s": stage_wall_s,
            "stage_commit": self.metadata.get("stage_commit", {}),
            **resumed,
            "capacity": capacity,
            "policies": policies,
            "execution": self.metadata.get("execution", {}),
            "effects": {k: v.to_dict() for k, v in self.effects.items()},
        }

    def save(self, directory: str | Path) -> dict[str, Path]:
        """Write ``results.json``, ``results.png``, ``table.txt`` and ``command.txt``.

        Returns:
            Kind -> path.

        """
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        paths = {
            "json": target / "results.json",
            "summary": target / "summary.json",
            "png": target / "results.png",
            "table": target / "table.txt",
            "command": target / "command.txt",
        }
        paths["json"].write_text(json.dumps(self.to_dict(), indent=2))
        paths["summary"].write_text(json.dumps(self.summary(), indent=2))
        paths["table"].write_text(self.table() + "\n")
        paths["command"].write_text(self.command + "\n")
        plot_results(self.policies, paths["png"], title="co-training: success on the real twin")
        return paths
