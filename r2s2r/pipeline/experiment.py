"""The 2×2 co-training experiment end to end, as resumable cached stages.

Stages (each in its own folder of the experiment directory, cached by the pipeline's one rule,
:mod:`r2s2r.pipeline.cache`; demos and grounding are the stages of :mod:`r2s2r.pipeline.stages`
that the main job runs too)::

    grounding/             grounding artifact (``r2s2r ground`` against the twin), first
    demos/                 real demonstrations on the grounded twin (``r2s2r record-demos``)
    generation/<config>/   simulated episodes of one configuration (world × behavior)
    policies/<policy>/     training: real_only, and real + each configuration
    evaluation/<policy>/   the 50-trial protocol on the real twin

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

import copy
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from r2s2r_common.config import ConfigError, dump_yaml, load_config, parse_config
from r2s2r_common.console import progress_reporter
from r2s2r_policy.evaluation.report import ALL, SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL, EvaluationConfig
from r2s2r_policy.experiment.config import ExperimentConfig
from r2s2r_policy.experiment.results import (
    GROUPS,
    REAL_ONLY,
    ExperimentResults,
    GroupResult,
    PolicyResult,
)

from r2s2r.pipeline.cache import (
    StageError,
    StageOutcome,
    StageRunner,
    content_hash,
    current_commit,
    file_fingerprint,
)
from r2s2r.pipeline.commands import command_runner
from r2s2r.pipeline.stages import (
    DEMOS,
    GROUNDING,
    demos_stage,
    grounded_cell_arguments,
    grounding_stage,
    run_command_stage,
)

Log = Callable[[str], None]


def _resolve_config(path: str) -> Path:
    from r2s2r_common.config import resolve_config_path

    return resolve_config_path(path).resolve()


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def deploy_command(checkpoint: str | Path, inference: Any) -> str:
    """Return the ``ros2 launch`` line that runs ``checkpoint`` on the cell, as ``inference``."""
    from r2s2r_policy.evaluation.ros import deploy_graph_arguments

    arguments = deploy_graph_arguments(checkpoint, inference.execution, inference.executed_steps)
    return "ros2 launch r2s2r real_deploy.launch.py " + " ".join(
        f"{name}:={shlex.quote(value)}" for name, value in arguments.items()
    )


def evaluator_config_hashes() -> dict[str, str]:
    """Content hashes of what the evaluators read besides the twin (cache inputs of a stage).

    The published nominal world, the belt_speed and object_tracker parameters (the in-process
    evaluator runs the same perception cores as the graph), the evaluate graph and the cell
    state publisher's parameters (what the graph's perception is told).
    """
    return {
        "nominal_world": content_hash(_resolve_config("world/nominal.yaml")),
        "belt_speed": content_hash(_resolve_config("nodes/belt_speed.yaml")),
        "object_tracker": content_hash(_resolve_config("nodes/object_tracker.yaml")),
        "evaluate_graph": content_hash(_resolve_config("graphs/evaluate.yaml")),
        "cell_state_publisher": content_hash(_resolve_config("nodes/cell_state_publisher.yaml")),
    }


def split_world_behavior(configuration: str) -> tuple[str, str]:
    """``grounded_mimicgen`` -> ``("grounded", "mimicgen")``."""
    world, _, behavior = configuration.partition("_")
    return world, behavior


@dataclass
class Dataset:
    """A dataset the experiment uses: its path and the fingerprint downstream stages hash."""

    path: str
    fingerprint: str


@dataclass
class Unavailable:
    """An input that could not be produced, and why."""

    reason: str


@dataclass
class ExperimentState:
    """What the stages produced so far (for the report).

    Attributes:
        stage_wall_s: Stage name -> wall time of the run that produced it.
        stage_cached: Stage name -> skipped this session because up to date.
        stage_commit: Stage name -> git commit of the code that produced it ('' if unknown).
        training: Policy -> training info (steps, loss, samples/s).
        generation: Configuration -> generation info (episodes, yield, episodes/min).
        execution: Policy -> the execution it was evaluated with and, when chosen on
            validation seeds, each candidate's validation successes.

    """

    stage_wall_s: dict[str, float] = field(default_factory=dict)
    stage_cached: dict[str, bool] = field(default_factory=dict)
    stage_commit: dict[str, str] = field(default_factory=dict)
    training: dict[str, dict[str, Any]] = field(default_factory=dict)
    generation: dict[str, dict[str, Any]] = field(default_factory=dict)
    execution: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note(self, name: str, outcome: StageOutcome) -> None:
        """Remember a stage's wall time and whether it was cached."""
        self.stage_wall_s[name] = outcome.record.wall_s
        self.stage_cached[name] = outcome.cached
        self.stage_commit[name] = outcome.record.commit


def resolve_command(command: Sequence[str], values: dict[str, str]) -> list[str]:
    """Fill ``{placeholders}`` of a command template; ``r2s2r`` runs as ``python -m r2s2r.cli``.

    Raises:
        ConfigError: On an unknown placeholder.

    """
    try:
        filled = [part.format(**values) for part in command]
    except (KeyError, IndexError) as error:
        raise ConfigError(
            f"command {list(command)}: unknown placeholder {error}; expected {sorted(values)}"
        ) from None
    if filled and filled[0] == "r2s2r":
        # The same interpreter (and package paths) as this experiment, wherever PATH points.
        filled = [sys.executable, "-m", "r2s2r.cli", *filled[1:]]
    return filled


def train_config_for(
    config: ExperimentConfig,
    real: Dataset | None,
    sim: Dataset | None,
    sim_ratio: float | None = None,
) -> dict[str, Any]:
    """Build one policy's TrainConfig (as a dict): the base YAML + the experiment's sizes.

    ``sim_ratio`` defaults to the experiment's co-training ratio with a simulated dataset and
    0 without; the capacity check trains on simulated data alone (1.0, ``real`` None).
    """
    from r2s2r_policy.training import TrainConfig

    if sim_ratio is None:
        sim_ratio = config.sim_ratio if sim is not None else 0.0
    base = load_config(TrainConfig, _resolve_config(config.train_config)).model_dump(mode="json")
    base.update(
        real_dataset=real.path if real is not None else None,
        sim_dataset=sim.path if sim is not None else None,
        sim_ratio=sim_ratio,
        steps=config.train_steps,
        batch_size=config.batch_size,
        seed=config.seed,
        checkpoint_every_steps=min(base["checkpoint_every_steps"], config.train_steps),
    )
    base["policy"]["image_height_px"] = config.image_px
    base["policy"]["image_width_px"] = config.image_px
    merged = _deep_merge(base, config.train_overrides)
    return parse_config(TrainConfig, merged, "experiment training config").model_dump(mode="json")


def evaluation_protocol(config: ExperimentConfig) -> EvaluationConfig:
    """Return the evaluation protocol of the experiment (same trials for every policy)."""
    return EvaluationConfig(
        trials_per_condition=dict(config.trials_per_condition),
        base_seed=config.evaluation_base_seed,
    )


def policy_result_from_json(
    name: str, data: dict[str, Any], world: str | None, behavior: str | None, checkpoint: str
) -> PolicyResult:
    """Rebuild a policy's table row from its ``evaluation.json`` (also for cached stages)."""
    summary = data["summary"]
    groups = {
        group: GroupResult(int(summary[group]["successes"]), int(summary[group]["trials"]))
        for group in GROUPS
        if group in summary
    }
    conditions = {
        condition: {
            "successes": int(entry["successes"]),
            "trials": int(entry["trials"]),
            "failures": dict(entry.get("failure_reasons", {})),
        }
        for condition, entry in summary.items()
        if condition not in (SHIFTED, ALL)
    }
    return PolicyResult(
        name=name,
        world=world,
        behavior=behavior,
        groups=groups,
        failure_reasons=dict(summary.get(ALL, {}).get("failure_reasons", {})),
        checkpoint=checkpoint,
        conditions=conditions,
    )


class Experiment:
    """One experiment directory: runs the stages and assembles the results.

    Args:
        config: The experiment's configuration.
        directory: Experiment directory (created; stages cache their outputs here).
        log: Progress lines (default: print to stdout).
        progress_bars: Show training/generation progress bars.

    """

    def __init__(
        self,
        config: ExperimentConfig,
        directory: str | Path,
        log: Log | None = None,
        progress_bars: bool = True,
    ) -> None:
        self.config = config
        self.directory = Path(directory).resolve()
        self.log: Log = log or (lambda text: print(text, flush=True))
        self.progress_bars = progress_bars
        self.commit = current_commit(Path(__file__).parent)
        self.stages = StageRunner(self.directory, self.log, self.commit)
        self.command_runner = command_runner(self.log, progress_bars)
        self.state = ExperimentState()
        self.twin_path = _resolve_config(config.twin_config)
        self.artifact: Dataset | Unavailable | None = None
        self.cell_arguments: dict[str, str] = {}

    # ---- inputs -------------------------------------------------------------------------
    def real_demos(self) -> Dataset | Unavailable:
        """Return the real dataset: given, or recorded on the twin by the demos command."""
        if self.config.real_dataset:
            path = Path(self.config.real_dataset).resolve()
            if not path.exists():
                return Unavailable(f"real_dataset {path}: not found")
            return Dataset(str(path), file_fingerprint(path))
        if not isinstance(self.artifact, Dataset):
            why = self.artifact.reason if self.artifact is not None else "not run"
            return Unavailable(
                f"demonstrations are recorded on the grounded cell, and it is not grounded: {why}"
            )
        folder = self.stages.folder(DEMOS)
        command = resolve_command(
            self.config.demos_command,
            {
                "out_dir": str(folder),
                "episodes": str(self.config.real_demos),
                "seed": str(self.config.demo_seed),
                "twin_config": str(self.twin_path),
                "artifact": self.artifact.path,
            },
        )
        inputs = {
            "episodes": self.config.real_demos,
            "seed": self.config.demo_seed,
            "twin": content_hash(self.twin_path),
            "command": self.config.demos_command,
            "artifact": self.artifact.fingerprint,
        }
        stage = demos_stage(
            command,
            folder / "dataset.hdf5",
            folder / "demos.log",
            self.config.command_timeout_s,
            inputs,
        )
        try:
            outcome = run_command_stage(self.stages, stage, self.command_runner)
        except StageError as error:
            return Unavailable(f"real demonstrations not recorded: {error}")
        self.state.note(DEMOS, outcome)
        return Dataset(outcome.outputs["dataset"], outcome.fingerprint)

    def grounding(self) -> Dataset | Unavailable:
        """Return the grounding artifact: given, or produced by the ground command."""
        if self.config.grounding_artifact:
            path = Path(self.config.grounding_artifact).resolve()
            if not path.is_file():
                return Unavailable(f"grounding_artifact {path}: not found")
            return Dataset(str(path), content_hash(path))
        folder = self.stages.folder(GROUNDING)
        artifact = folder / "artifact.yaml"
        command = resolve_command(
            self.config.ground_command,
            {"artifact": str(artifact), "twin_config": str(self.twin_path)},
        )
        stage = grounding_stage(
            command,
            artifact,
            folder / "ground.log",
            self.config.command_timeout_s,
            {"twin": content_hash(self.twin_path), "command": self.config.ground_command},
        )
        try:
            outcome = run_command_stage(self.stages, stage, self.command_runner)
        except StageError as error:
            return Unavailable(f"grounding artifact not produced: {error}")
        self.state.note(GROUNDING, outcome)
        return Dataset(outcome.outputs["artifact"], content_hash(outcome.outputs["artifact"]))

    def ground_cell(self) -> Dataset | Unavailable:
        """Ground the cell (:meth:`grounding`) and derive the grounded cell's launch arguments."""
        artifact = self.grounding()
        if isinstance(artifact, Dataset):
            export = self.directory / "grounded_cell"  # camera_info files of the artifact
            try:
                self.cell_arguments = grounded_cell_arguments(Path(artifact.path), export)
            except (ConfigError, ValueError) as error:
                artifact = Unavailable(f"grounding artifact {artifact.path} unusable: {error}")
        self.artifact = artifact
        return artifact

    def simulated(
        self,
        configuration: str,
        real: Dataset | Unavailable,
        artifact: Dataset | Unavailable | None,
    ) -> Dataset | Unavailable:
        """One configuration's simulated dataset: given, or generated (``run_generation``)."""
        given = self.config.sim_datasets.get(configuration)
        if given:
            path = Path(given).resolve()
            if not path.exists():
                return Unavailable(f"sim dataset {path}: not found")
            return Dataset(str(path), file_fingerprint(path))
        world, behavior = split_world_behavior(configuration)
        if behavior == "mimicgen" and isinstance(real, Unavailable):
            return Unavailable(f"MimicGen needs the real demonstrations: {real.reason}")
        if world == "grounded" and (artifact is None or isinstance(artifact, Unavailable)):
            reason = artifact.reason if artifact is not None else "not requested"
            return Unavailable(f"grounded world needs the grounding artifact: {reason}")
        from r2s2r_datagen.config import bundled_configurations_path

        bundled = bundled_configurations_path()
        bundled_data = yaml.safe_load(bundled.read_text())
        nominal_world = (bundled.parent / bundled_data["nominal_world_path"]).resolve()
        mimicgen_file = bundled.parent / "mimicgen.yaml"
        resume_inputs: dict[str, Any] = {
            "configuration": configuration,
            "seed": self.config.generation_seed,
            "configurations_file": content_hash(bundled),
            "nominal_world": content_hash(nominal_world),
            "mimicgen_config": content_hash(mimicgen_file)
            if behavior == "mimicgen" and mimicgen_file.is_file()
            else "",
            "real": real.fingerprint
            if behavior == "mimicgen" and isinstance(real, Dataset)
            else "",
            "artifact": artifact.fingerprint if isinstance(artifact, Dataset) else "",
        }
        if world != "grounded":
            resume_inputs["artifact"] = ""
        inputs = {**resume_inputs, "episodes": self.config.sim_episodes_per_configuration}

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            from r2s2r_datagen.config import GenerateConfig
            from r2s2r_datagen.runner import run_generation

            data = copy.deepcopy(bundled_data)
            data["nominal_world_path"] = str(nominal_world)
            if isinstance(artifact, Dataset):
                data["grounding_artifact_path"] = artifact.path
            if isinstance(real, Dataset):
                options = data.setdefault("behavior_options", {})
                mimicgen = dict(options.get("mimicgen") or {})
                mimicgen["source_dataset"] = real.path
                options["mimicgen"] = mimicgen
            configurations_path = folder / "configurations.yaml"
            dump_yaml(data, configurations_path)
            try:
                summary = run_generation(
                    GenerateConfig(
                        configurations_path=str(configurations_path),
                        configurations=[configuration],
                        episodes_per_configuration=self.config.sim_episodes_per_configuration,
                        base_seed=self.config.generation_seed,
                        workers=self.config.generation_workers,
                        output_dir=str(folder / "run"),
                        progress=self.progress_bars,
                    ),
                    # Its stage lines would repeat this stage's; what makes a configuration
                    # unavailable comes back in the summary (and is raised below).
                    log=lambda _text: None,
                )
            except (ConfigError, RuntimeError) as error:  # bad artifact, workers that die
                raise StageError(f"generation of {configuration}: {error}") from None
            item = next(c for c in summary.configurations if c.name == configuration)
            info = {
                "successes": item.successes,
                "failed": item.failed,
                "skipped": item.skipped,
                "attempts": item.attempts,
                "yield": item.yield_fraction,
                "failure_reasons": item.failure_reasons,
                "episodes_per_min": item.episodes_per_min,
                "dataset_episodes": item.dataset_episodes,
                "source_check": item.source_check,
                "diagnosis": item.diagnosis,
            }
            if item.source_check and item.source_check.get("message"):
                self.log(f"[generation/{configuration}] WARNING: {item.source_check['message']}")
            if item.diagnosis:
                self.log(f"[generation/{configuration}] {item.diagnosis}")
            if item.unavailable:
                raise StageError(f"generation of {configuration} unavailable: {item.unavailable}")
            if not item.dataset or item.dataset_episodes == 0:
                raise StageError(
                    f"generation of {configuration}: no successful episode out of "
                    f"{item.finished} (failures {item.failure_reasons})"
                    + (f": {item.diagnosis}" if item.diagnosis else "")
                )
            return {"dataset": item.dataset}, info

        name = f"generation/{configuration}"
        try:
            outcome = self.stages.run(name, inputs, body, resume_inputs=resume_inputs)
        except StageError as error:
            return Unavailable(str(error))
        self.state.note(name, outcome)
        self.state.generation[configuration] = outcome.record.info
        return Dataset(outcome.outputs["dataset"], outcome.fingerprint)

    # ---- policies -----------------------------------------------------------------------
    def train_policy(
        self,
        name: str,
        real: Dataset | None,
        sim: Dataset | None,
        sim_ratio: float | None = None,
    ) -> Dataset:
        """Train one policy (resuming its checkpoints); returns its checkpoint.

        Raises:
            StageError: Training failed (e.g. a dataset lacks a feature the policy needs).

        """
        from r2s2r_policy.data import MissingFeatureError
        from r2s2r_policy.training import TrainConfig, train

        train_data = train_config_for(self.config, real, sim, sim_ratio)
        # Settings that change how fast a policy trains, not what it learns (another device
        # only by float rounding, as the trainer's resume rule has it): a trained policy is kept.
        cache_free = {"progress_bar", "num_workers", "num_threads", "log_every_steps", "device"}
        inputs = {
            "config": {k: v for k, v in train_data.items() if k not in cache_free},
            "real": real.fingerprint if real is not None else "",
            "sim": sim.fingerprint if sim is not None else "",
        }

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            data = dict(train_data, progress_bar=self.progress_bars)
            train_config = parse_config(TrainConfig, data, f"training {name}")
            dump_yaml(train_config.model_dump(mode="json"), folder / "train_config.yaml")
            try:
                result = train(train_config, folder / "run")
            except (MissingFeatureError, ValueError) as error:
                raise StageError(f"training {name}: {error}") from None
            if result.checkpoint is None:
                raise StageError(f"training {name}: no checkpoint written")
            info = {
                "steps": result.step,
                "resumed_from_step": result.start_step,
                "final_loss": result.losses[-1] if result.losses else None,
                "samples_per_s": result.samples_per_s,
                "data_fraction": result.data_fraction,
                "validation": result.validation,
            }
            return {"checkpoint": str(result.checkpoint)}, info

        stage = f"policies/{name}"
        outcome = self.stages.run(stage, inputs, body)
        self.state.note(stage, outcome)
        self.state.training[name] = outcome.record.info
        return Dataset(outcome.outputs["checkpoint"], outcome.fingerprint)

    def inference_config(self) -> Any:
        """Return the engine settings of the preset (``execution``, ``executed_steps``)."""
        from r2s2r_policy.inference import InferenceConfig

        return InferenceConfig(
            execution=self.config.execution, executed_steps=self.config.executed_steps
        )

    def execution_candidates(self) -> dict[str, Any]:
        """Label -> engine settings the selection compares (the preset's own first)."""
        preset = self.inference_config()
        receding = preset.model_copy(update={"execution": "receding"})
        ensemble = preset.model_copy(update={"execution": "temporal_ensemble"})
        candidates = {
            f"receding_{receding.executed_steps}": receding,
            "temporal_ensemble": ensemble,
        }
        first = next(k for k, v in candidates.items() if v.execution == preset.execution)
        return {first: candidates[first]} | candidates

    def select_execution(self, name: str, checkpoint: Dataset, world: Path) -> Any:
        """Choose how ``checkpoint``'s chunks are executed, on validation seeds.

        With ``execution_selection_trials`` = 0 the preset's settings. Otherwise each candidate
        runs that many nominal trials from ``validation_base_seed`` in ``world`` (in process,
        whatever the evaluator) and the one with more successes is returned (ties: the
        preset's). Stage ``selection/<name>``.

        Raises:
            StageError: The evaluator failed.

        """
        from r2s2r_policy.inference import InferenceConfig

        trials = self.config.execution_selection_trials
        preset = self.inference_config()
        if trials == 0:
            self.state.execution[name] = {
                "chosen": preset.model_dump(mode="json"),
                "deploy": deploy_command(checkpoint.path, preset),
            }
            return preset
        candidates = self.execution_candidates()
        protocol = EvaluationConfig(
            trials_per_condition={NOMINAL: trials}, base_seed=self.config.validation_base_seed
        )
        inputs: dict[str, Any] = {
            "checkpoint": checkpoint.fingerprint,
            "protocol": protocol.model_dump(mode="json"),
            "twin": content_hash(world),
            "cell": self.cell_knowledge(world),
            "candidates": {k: v.model_dump(mode="json") for k, v in candidates.items()},
            **evaluator_config_hashes(),
        }

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            successes = {}
            for label, candidate in candidates.items():
                report = self._run_trials(
                    f"selection/{name} {label}",
                    checkpoint,
                    protocol,
                    world,
                    candidate,
                    "in_process",
                    folder / "logs",
                )
                successes[label] = [sum(r.success for r in report.records), len(report.records)]
            chosen = max(candidates, key=lambda label: successes[label][0])  # first on ties
            record = {
                "validation_successes": successes,
                "validation_base_seed": self.config.validation_base_seed,
                "chosen": chosen,
                "settings": candidates[chosen].model_dump(mode="json"),
            }
            path = folder / "selection.json"
            path.write_text(json.dumps(record, indent=1))
            self.log(
                f"[selection/{name}] "
                + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in successes.items())
                + f": {chosen}"
            )
            return {"selection": str(path)}, record

        stage = f"selection/{name}"
        outcome = self.stages.run(stage, inputs, body)
        self.state.note(stage, outcome)
        data: dict[str, Any] = json.loads(Path(outcome.outputs["selection"]).read_text())
        chosen = parse_config(InferenceConfig, data["settings"], str(outcome.outputs["selection"]))
        self.state.execution[name] = {
            "chosen": data["settings"],
            "validation_successes": data["validation_successes"],
            "validation_base_seed": data["validation_base_seed"],
            "deploy": deploy_command(checkpoint.path, chosen),
        }
        return chosen

    def cell_knowledge(self, world: Path) -> str:
        """Return what the perception of a cell evaluated in ``world`` knows (a cache input).

        The twin is the grounded cell (the artifact's fingerprint); any other world (the
        capacity check's simulator world) is a simulated cell that knows itself.
        """
        if world == self.twin_path and isinstance(self.artifact, Dataset):
            return f"grounded {self.artifact.fingerprint}"
        return "ungrounded" if world == self.twin_path else "simulated world"

    def _run_trials(
        self,
        label: str,
        checkpoint: Dataset,
        protocol: EvaluationConfig,
        world: Path,
        inference: Any,
        evaluator: str,
        log_dir: Path,
    ) -> Any:
        """Run ``protocol``'s trials of ``checkpoint`` with a progress bar; the report.

        Args:
            label: Progress bar and error prefix.
            checkpoint: The checkpoint.
            protocol: Trials.
            world: World (twin file) to run them in.
            inference: Engine settings.
            evaluator: ``in_process``, or ``ros`` (the evaluate graph, launched).
            log_dir: Folder for the graph's logs (``ros``).

        Raises:
            StageError: The evaluator failed (graph not up, checkpoint refused, ...).

        """
        bar = progress_reporter(
            label, sum(protocol.trials_per_condition.values()), self.progress_bars, unit="trial"
        )
        counts = {"done": 0, "successes": 0}

        def echo(record: Any) -> None:
            # Every trial is in the report; the console shows the count so far.
            counts["done"] += 1
            counts["successes"] += bool(record.success)
            bar.update(counts["done"], f"{counts['successes']} succeeded")

        try:
            if evaluator == "ros":
                from r2s2r.pipeline.evaluate import evaluate_over_ros

                # The evaluate graph's policy node gets the checkpoint's image size (as the
                # in-process evaluator resizes to the spec) and the engine settings.
                return evaluate_over_ros(
                    checkpoint.path,
                    protocol,
                    launch=True,
                    twin_config=str(world),
                    real_time_factor=self.config.real_time_factor,
                    policy_overrides={
                        "execution": inference.execution,
                        "executed_steps": inference.executed_steps,
                    },
                    # A simulator world is a cell that knows itself: its own camera_info and
                    # mounts (the twin's datasheet ones), extrinsics trusted.
                    cell_arguments=self.cell_arguments
                    if world == self.twin_path
                    else {"tracker_anchor_to_belt": "false"},
                    log_dir=log_dir,
                    progress=echo,
                )
            from r2s2r_policy.evaluation.in_process import evaluate_in_process

            return evaluate_in_process(
                checkpoint.path,
                protocol,
                twin_config_path=world,
                inference=inference,
                grounding_artifact=self.cell_arguments.get("grounding_artifact")
                if world == self.twin_path
                else None,
                progress=echo,
            )
        except (RuntimeError, ValueError) as error:
            raise StageError(f"{label}: {error}") from None
        finally:
            bar.close()

    def evaluate_policy(
        self,
        name: str,
        checkpoint: Dataset,
        world_path: Path | None = None,
        protocol: EvaluationConfig | None = None,
        inference: Any = None,
    ) -> dict[str, Any]:
        """Evaluate one checkpoint on the protocol; returns the ``evaluation.json`` content.

        Args:
            name: Policy name (stage ``evaluation/<name>``).
            checkpoint: The checkpoint.
            world_path: World to evaluate in (default: the twin's).
            protocol: Trials (default: the experiment's protocol).
            inference: Engine settings (default: the preset's).

        Raises:
            StageError: The evaluator failed (graph not up, checkpoint refused, ...).

        """
        protocol = protocol or evaluation_protocol(self.config)
        world = world_path or self.twin_path
        inference = inference or self.inference_config()
        inputs: dict[str, Any] = {
            "checkpoint": checkpoint.fingerprint,
            "protocol": protocol.model_dump(mode="json"),
            "evaluator": self.config.evaluator,
            "twin": content_hash(world),
            "cell": self.cell_knowledge(world),
            "inference": inference.model_dump(mode="json"),
            **evaluator_config_hashes(),
        }
        if self.config.evaluator == "ros":
            inputs["real_time_factor"] = self.config.real_time_factor

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            report = self._run_trials(
                f"evaluation/{name}",
                checkpoint,
                protocol,
                world,
                inference,
                evaluator=self.config.evaluator,
                log_dir=folder / "logs",
            )
            json_path, _ = report.save(folder, "evaluation")
            successes = sum(r.success for r in report.records)
            self.log(f"[evaluation/{name}] {successes}/{len(report.records)} trials succeeded")
            return {"evaluation": str(json_path)}, {"wall_s": report.wall_s}

        stage = f"evaluation/{name}"
        outcome = self.stages.run(stage, inputs, body)
        self.state.note(stage, outcome)
        data: dict[str, Any] = json.loads(Path(outcome.outputs["evaluation"]).read_text())
        return data

    def policy(
        self, name: str, real: Dataset | Unavailable, sim: Dataset | Unavailable | None
    ) -> PolicyResult:
        """Train and evaluate one policy, or say why it cannot run."""
        world, behavior = (None, None) if name == REAL_ONLY else split_world_behavior(name)
        if isinstance(real, Unavailable):
            return PolicyResult.not_run(name, real.reason, world, behavior)
        if isinstance(sim, Unavailable):
            return PolicyResult.not_run(name, sim.reason, world, behavior)
        try:
            checkpoint = self.train_policy(name, real, sim)
            inference = self.select_execution(name, checkpoint, self.twin_path)
            data = self.evaluate_policy(name, checkpoint, inference=inference)
        except StageError as error:
            self.log(f"[{name}] NOT RUN: {error}")
            return PolicyResult.not_run(name, str(error), world, behavior)
        return policy_result_from_json(name, data, world, behavior, checkpoint.path)

    def capacity(self, sim: Dataset | Unavailable | None) -> PolicyResult | None:
        """Run the capacity check (proves the learner can learn the task).

        A policy trained on one configuration's simulated data only, evaluated in that
        configuration's own simulator world.
        """
        configuration = self.config.capacity_configuration
        if not configuration:
            return None
        name = "capacity"
        if sim is None or isinstance(sim, Unavailable):
            reason = sim.reason if isinstance(sim, Unavailable) else "not generated"
            return PolicyResult.not_run(name, f"capacity: {configuration}: {reason}")
        protocol = EvaluationConfig(
            trials_per_condition={NOMINAL: self.config.capacity_trials},
            base_seed=self.config.evaluation_base_seed,
        )
        try:
            checkpoint = self.train_policy(name, None, sim, sim_ratio=1.0)
            world = _resolve_config(self.config.capacity_world)
            inference = self.select_execution(name, checkpoint, world)
            data = self.evaluate_policy(name, checkpoint, world, protocol, inference)
        except StageError as error:
            self.log(f"[{name}] NOT RUN: {error}")
            return PolicyResult.not_run(name, str(error))
        return policy_result_from_json(name, data, None, None, checkpoint.path)

    # ---- everything ---------------------------------------------------------------------
    def run(self, command: str = "") -> ExperimentResults:
        """Run (or resume) every stage and write the results.

        Args:
            command: The command that reproduces this experiment (written with the results).

        Returns:
            The results (also saved to the experiment directory).

        """
        started = time.perf_counter()
        self.directory.mkdir(parents=True, exist_ok=True)
        dump_yaml(self.config.model_dump(mode="json"), self.directory / "experiment.yaml")
        config = self.config
        # The order of work (docs/architecture.md section 3): ground the cell, then record on
        # it and evaluate on it with grounded perception.
        needs_artifact = not config.real_dataset or any(
            split_world_behavior(c)[0] == "grounded" and c not in config.sim_datasets
            for c in config.configurations
        )
        artifact: Dataset | Unavailable | None = None
        if needs_artifact or config.grounding_artifact:
            artifact = self.ground_cell()
            if isinstance(artifact, Unavailable):
                self.log(f"[grounding] NOT AVAILABLE: {artifact.reason}")
        else:
            self.log(
                "note: grounding not run (the real dataset is given, no grounded world is "
                "generated) and no grounding_artifact: the policies are evaluated on the cell "
                "before grounding, whose perception differs from the grounded cell's and the "
                "simulator's; give the artifact the cell was grounded with (--artifact)"
            )
        real = self.real_demos()
        if isinstance(real, Unavailable):
            self.log(f"[demos] NOT AVAILABLE: {real.reason}")
        sims: dict[str, Dataset | Unavailable] = {}
        wanted = list(config.configurations)
        if config.capacity_configuration and config.capacity_configuration not in wanted:
            wanted.append(config.capacity_configuration)
        for configuration in wanted:
            sim = sims[configuration] = self.simulated(configuration, real, artifact)
            if isinstance(sim, Unavailable):
                self.log(f"[generation/{configuration}] NOT AVAILABLE: {sim.reason}")
        capacity = self.capacity(sims.get(config.capacity_configuration))
        policies = [self.policy(REAL_ONLY, real, None)]
        policies += [self.policy(c, real, sims[c]) for c in config.configurations]
        results = ExperimentResults(
            policies=policies,
            command=command,
            commit=self.commit,
            capacity=capacity,
            metadata={
                "capacity_configuration": config.capacity_configuration,
                "experiment_dir": str(self.directory),
                "config": config.model_dump(mode="json"),
                "session_wall_s": time.perf_counter() - started,
                "stage_wall_s": self.state.stage_wall_s,
                "stage_cached": self.state.stage_cached,
                "stage_commit": self.state.stage_commit,
                "training": self.state.training,
                "generation": self.state.generation,
                "execution": self.state.execution,
                "stages_run_this_session": list(self.stages.ran),
                "stages_skipped_this_session": list(self.stages.skipped),
                "groups": {NOMINAL: "nominal trials", SHIFTED: "shifted trials", ALL: "all"},
            },
        )
        paths = results.save(self.directory)
        self.log("")
        self.log(results.table())
        self.log("")
        self.log(f"reproduce: {command}")
        self.log(f"wrote {', '.join(str(p) for p in paths.values())}")
        return results


def run_experiment(
    config: ExperimentConfig,
    directory: str | Path,
    command: str = "",
    log: Log | None = None,
    progress_bars: bool = True,
) -> ExperimentResults:
    """Run (or resume) the experiment in ``directory``; see :class:`Experiment`."""
    return Experiment(config, directory, log, progress_bars).run(command)
