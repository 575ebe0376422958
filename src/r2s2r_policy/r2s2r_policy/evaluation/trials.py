"""The evaluation protocol: which trials run (seed + condition), and what each one produced.

The paper evaluates 50 trials on the real cell: 24 nominal and 26 under shifts the real
demonstrations do not cover. The default :class:`EvaluationConfig` does the same with the twin's
shift conditions (lighting 9, belt_speed 9, unseen_object 8). Trial ``i`` gets seed
``base_seed + i``, so every policy of an experiment meets exactly the same trials, in the ROS
harness and in the in-process evaluator alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pydantic import Field, field_validator
from r2s2r_common.config import ConfigModel

NOMINAL = "nominal"
NOT_RUN = "not_run"
"""The reason of a trial that did not run to an outcome (:attr:`TrialRecord.not_run` says why)."""
DEFAULT_CONDITION_COUNTS: dict[str, int] = {
    NOMINAL: 24,
    "lighting": 9,
    "belt_speed": 9,
    "unseen_object": 8,
}
"""The paper's 24 nominal + 26 shifted trials, split over the twin's three shifts."""
EVALUATION_BASE_SEED = 10_000
"""Seed of evaluation trial 0 (trial i: + i): the trials a policy is reported on."""
VALIDATION_BASE_SEED = 20_000
"""Seed of validation trial 0: the trials choices are made on (execution selection, bench
variants and learning curves), disjoint from the evaluation's (at most 10000 trials). The
experiment presets (``config/experiment/*.yaml``) spell both numbers; a test pins them here."""


class EvaluationConfig(ConfigModel):
    """Which trials an evaluation runs (``config/evaluation/default.yaml``)."""

    trials_per_condition: dict[str, int] = Field(
        default_factory=lambda: dict(DEFAULT_CONDITION_COUNTS),
        min_length=1,
        description="Condition -> number of trials ('nominal' or a twin shift name).",
    )
    base_seed: int = Field(
        default=EVALUATION_BASE_SEED, ge=0, description="Seed of trial 0; trial i: + i."
    )
    interleave: bool = Field(
        default=True,
        description="Alternate conditions (round robin) instead of running them in blocks, so "
        "drift over a session (temperature, wear) does not fall on one condition.",
    )
    settle_s: float = Field(
        default=0.5,
        ge=0.0,
        le=60.0,
        description="Cell seconds the reset cell idles before each trial starts (both "
        "evaluators), so that belt speed and tracking settle on the idle cell as between the "
        "trials of a real cell, and every trial starts from the same sensing state.",
    )
    in_process_inference_delay_s: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="In-process evaluator: cell seconds from an observation to its command, as "
        "the ROS graph's perception and inference take (the graph itself is not affected).",
    )
    trial_wall_timeout_s: float = Field(
        default=120.0, gt=0.0, le=3600.0, description="ROS harness: wall-clock limit per trial."
    )

    @field_validator("trials_per_condition")
    @classmethod
    def _counts(cls, value: dict[str, int]) -> dict[str, int]:
        bad = {k: v for k, v in value.items() if v < 0}
        if bad:
            raise ValueError(f"trial counts must be >= 0, got {bad}")
        if sum(value.values()) == 0:
            raise ValueError("at least one trial expected, all counts are 0")
        return value

    @property
    def total_trials(self) -> int:
        """Number of trials."""
        return sum(self.trials_per_condition.values())


@dataclass(frozen=True)
class TrialSpec:
    """One trial to run.

    Attributes:
        index: Position in the protocol (0-based).
        seed: Trial seed (objects, arrival times, offsets).
        condition: ``nominal`` or a shift name.

    """

    index: int
    seed: int
    condition: str

    @property
    def twin_condition(self) -> str:
        """The condition as ``/trial/start`` takes it ('' for nominal is also accepted)."""
        return self.condition


def trial_plan(config: EvaluationConfig) -> list[TrialSpec]:
    """List the ordered trials of an evaluation (deterministic from the config)."""
    remaining = {k: v for k, v in config.trials_per_condition.items() if v > 0}
    order: list[str] = []
    if config.interleave:
        while remaining:
            for condition in list(remaining):
                order.append(condition)
                remaining[condition] -= 1
                if remaining[condition] == 0:
                    del remaining[condition]
    else:
        for condition, count in remaining.items():
            order += [condition] * count
    return [TrialSpec(index=i, seed=config.base_seed + i, condition=c) for i, c in enumerate(order)]


@dataclass(frozen=True)
class TrialRecord:
    """What one trial produced (the operator's judgement plus bookkeeping).

    Attributes:
        index: Protocol position.
        seed: Trial seed.
        condition: Condition.
        success: Operator's success judgement.
        reason: ``success`` or the failure reason (``timeout``, ``dropped``...), or
            :data:`NOT_RUN`.
        object_type: Object type(s) of the trial.
        duration_s: Simulated (cell) time from start to decision.
        wall_s: Wall-clock time the trial took.
        commands_sent: Action chunks sent during the trial (-1 if unknown).
        started_at_s: Cell time the trial started (its outcome's stamp less its duration;
            -1 if unknown): the origin of the trial's inference trace.
        not_run: Why the trial did not run to the cell's judgement (the outcome never came,
            a node of the graph died, the graph stopped answering); empty when it did. Such a
            trial says nothing about the policy and counts in no rate.
        safety_stop: The safety layer's stop during the trial (its cause and reason), empty
            when it never stopped the policy; a failed trial with a stop has reason
            :data:`SAFETY_STOP`.

    """

    index: int
    seed: int
    condition: str
    success: bool
    reason: str
    object_type: str = ""
    duration_s: float = 0.0
    wall_s: float = 0.0
    commands_sent: int = -1
    started_at_s: float = -1.0
    not_run: str = ""
    safety_stop: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)


SAFETY_STOP = "safety_stop"
"""Failure reason of a trial in which the safety layer stopped the policy."""
NO_ACTION = "no_action"
"""Failure reason of a trial in which the policy sent no command at all (it never moved)."""
POLICY_FAULTS = (SAFETY_STOP, NO_ACTION)
"""Failure reasons that say the policy misbehaved, not that it missed: counted apart, and an
evaluation with any of them exits non-zero."""


def policy_fault_reason(success: bool, reason: str, commands_sent: int, safety_stop: str) -> str:
    """Return the reason a trial is recorded with: the cell's, unless the policy faulted.

    A trial the cell judged a failure is a :data:`NO_ACTION` when the policy sent no command
    (whether or not the safety layer then stopped it), else a :data:`SAFETY_STOP` when the
    safety layer stopped the policy during it.
    """
    if success:
        return reason
    if commands_sent == 0:
        return NO_ACTION
    if safety_stop:
        return SAFETY_STOP
    return reason


def trace_file_name(index: int) -> str:
    """File name of trial ``index``'s inference trace (both evaluation paths)."""
    return f"trial_{index:03d}.npz"
