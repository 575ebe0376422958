"""Projected wall time of an experiment preset on N machines, from measured unit costs.

The unit costs (seconds) and where each comes from:

- ``grounding_s``: one ``r2s2r ground`` (one cell, not split);
- ``demo_s``: one successful real demonstration, failed takes included (one cell, real time:
  not split);
- ``episode_worker_s``: one successful simulated episode on one generation worker (failed
  attempts included): generation wall time x workers / episodes;
- ``step_s``: one training step of one policy at the preset's size on one machine;
- ``trial_s``: one evaluation (or execution-selection) trial in process;
- ``ddp_speedup_2``: a step on 2 processes (each half the global batch) over a step on one.

They are read from an experiment's record (``--record results/experiment_*.json``, or
``--experiment DIR`` for one in progress: its stages' ``stage.json``) and may be replaced one
by one (``--step-s`` and ``--episode-worker-s`` from ``bench/bench_cluster.py``). The sizes come
from ``--preset`` (default ``paper``). On N machines of ``--workers`` generation workers each:

    grounding + demos     = grounding_s + real_demos x demo_s                      (one cell)
    generation            = configurations x episodes x episode_worker_s / (N x workers)
    training (N <= P)     = ceil(P / N) x steps x step_s          (P policies, one per machine)
    training (N > P)      = steps x step_s / max(1, floor(N / P) x ddp_speedup_2 / 2)
                            (DDP over the machines a policy gets, where it beats one machine;
                            ddp_speedup_2 measured on one machine: a stand-in for a network)
    evaluation            = (P x trials + selection trials) x trial_s / N   (trials independent)

P is the co-trained policies plus real only, plus the capacity policy when the preset has one.
The stages run one after another, as ``r2s2r experiment`` runs them.

    python bench/scaling_projection.py --record results/experiment_reduced.json --machines 1 2 4 8
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import benchlib


@dataclass(frozen=True)
class UnitCosts:
    """Measured seconds per unit of work (see the module docstring)."""

    grounding_s: float
    demo_s: float
    episode_worker_s: float
    step_s: float
    trial_s: float
    ddp_speedup_2: float = 1.0


@dataclass(frozen=True)
class ExperimentSize:
    """How much work a preset asks for."""

    real_demos: int
    episodes: int
    steps: int
    policies: int
    trials: int


def experiment_size(config: Any) -> ExperimentSize:
    """The work of an :class:`~r2s2r.experiment.config.ExperimentConfig`."""
    policies = len(config.configurations) + 1 + (1 if config.capacity_configuration else 0)
    per_policy = sum(config.trials_per_condition.values())
    evaluated = (policies - 1) * per_policy + (
        config.capacity_trials if config.capacity_configuration else per_policy
    )
    selection = 2 * config.execution_selection_trials * policies
    return ExperimentSize(
        real_demos=config.real_demos,
        episodes=len(config.configurations) * config.sim_episodes_per_configuration,
        steps=config.train_steps,
        policies=policies,
        trials=evaluated + selection,
    )


def project(
    costs: UnitCosts, size: ExperimentSize, machines: int, workers: int
) -> dict[str, float]:
    """Seconds per stage (and ``total_s``) on ``machines`` machines of ``workers`` workers."""
    if machines <= size.policies:
        training = math.ceil(size.policies / machines) * size.steps * costs.step_s
    else:  # DDP over the machines a policy gets, where it beats one machine
        speedup = (machines // size.policies) * costs.ddp_speedup_2 / 2.0
        training = size.steps * costs.step_s / max(speedup, 1.0)
    stages = {
        "grounding_demos_s": costs.grounding_s + size.real_demos * costs.demo_s,
        "generation_s": size.episodes * costs.episode_worker_s / (machines * workers),
        "training_s": training,
        "evaluation_s": size.trials * costs.trial_s / machines,
    }
    return {**stages, "total_s": sum(stages.values())}


def _config_from_command(command: str) -> Any:
    """The ExperimentConfig a record's reproduce command ran (preset + options)."""
    from r2s2r.experiment.options import CONFIG_OPTIONS, config_from_options

    by_flag = {option.flag: option for option in CONFIG_OPTIONS}
    words = shlex.split(command)
    preset = "reduced"
    values: dict[str, Any] = {}
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--preset":
            preset = words[index + 1]
        elif word in by_flag:
            option = by_flag[word]
            if option.kind == "flag":
                values[option.parameter] = True
                index += 1
                continue
            value = words[index + 1]
            if option.kind in ("counts", "paths", "choices"):
                values[option.parameter] = (*values.get(option.parameter, ()), value)
            else:
                values[option.parameter] = option.value_type(value)
        elif word == "--config":
            raise ValueError(f"{command!r}: a --config run; give its experiment directory")
        index += 1
    for option in CONFIG_OPTIONS:  # click gives an empty tuple for a repeatable option not given
        if option.kind in ("counts", "paths", "choices"):
            values.setdefault(option.parameter, ())
    return config_from_options(preset, None, values)


def costs_from_stages(stage_wall_s: dict[str, float], config: Any) -> dict[str, float]:
    """Unit costs from an experiment's wall time per stage (the stages it ran)."""

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else math.nan

    per_policy = sum(config.trials_per_condition.values())
    trial = []
    for name, wall in stage_wall_s.items():
        if name.startswith("evaluation/"):
            capacity = name == "evaluation/capacity"
            trial.append(wall / (config.capacity_trials if capacity else per_policy))
        elif name.startswith("selection/") and config.execution_selection_trials:
            trial.append(wall / (2 * config.execution_selection_trials))
    return {
        "grounding_s": stage_wall_s.get("grounding", math.nan),
        "demo_s": stage_wall_s.get("demos", math.nan) / config.real_demos,
        "episode_worker_s": mean(
            [
                wall * config.generation_workers / config.sim_episodes_per_configuration
                for name, wall in stage_wall_s.items()
                if name.startswith("generation/")
            ]
        ),
        "step_s": mean(
            [w / config.train_steps for n, w in stage_wall_s.items() if n.startswith("policies/")]
        ),
        "trial_s": mean(trial),
    }


def recorded_costs(record: Path | None, experiment: Path | None) -> tuple[dict[str, float], str]:
    """Unit costs from a result record or a (running) experiment directory, and what they are."""
    from r2s2r_common.config import load_config

    from r2s2r.experiment.config import ExperimentConfig

    if record is not None:
        data = json.loads(record.read_text())
        return costs_from_stages(data["stage_wall_s"], _config_from_command(data["command"])), str(
            record
        )
    if experiment is not None:
        config = load_config(ExperimentConfig, experiment / "experiment.yaml")
        walls = {
            str(path.parent.relative_to(experiment)): json.loads(path.read_text())["wall_s"]
            for path in experiment.rglob("stage.json")
        }
        return costs_from_stages(walls, config), str(experiment)
    return {}, "none"


def main() -> None:
    """Print the projection per machine count."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--preset", default="paper", help="preset whose sizes are projected")
    parser.add_argument("--record", type=Path, help="an experiment record (stage_wall_s)")
    parser.add_argument("--experiment", type=Path, help="an experiment directory (stage.json)")
    parser.add_argument("--machines", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--workers", type=int, default=2, help="generation workers per machine")
    for name in UnitCosts.__dataclass_fields__:
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, help=f"replace {name}")
    args = parser.parse_args()
    from r2s2r.experiment.config import load_preset

    measured, source = recorded_costs(args.record, args.experiment)
    sources = {name: source for name in measured}
    for name in UnitCosts.__dataclass_fields__:
        given = getattr(args, name)
        if given is not None:
            measured[name], sources[name] = given, "option"
    missing = [n for n in ("grounding_s", "demo_s", "episode_worker_s", "step_s", "trial_s")
               if not math.isfinite(measured.get(n, math.nan))]  # fmt: skip
    if missing:
        parser.error(f"unit costs missing: {missing}; give --record, --experiment or the options")
    costs = UnitCosts(**measured)
    size = experiment_size(load_preset(args.preset))
    print(f"preset {args.preset}: {size}")
    for name, value in asdict(costs).items():
        print(f"  {name:<17} {value:10.3f}  ({sources.get(name, 'default')})")
    figures = []
    for machines in args.machines:
        stages = project(costs, size, machines, args.workers)
        for name, seconds in stages.items():
            figures.append(
                benchlib.Figure(
                    f"{machines}m_{name.removesuffix('_s')}_h", round(seconds / 3600, 2), "h"
                )
            )
    benchlib.report(
        "scaling_projection",
        figures,
        preset=args.preset,
        workers_per_machine=args.workers,
        costs=asdict(costs),
        sources=sources,
    )


if __name__ == "__main__":
    main()
