"""The mixture finding on a finished experiment: its inputs and the analysis stages.

``r2s2r analyze experiment EXPDIR`` reads what the experiment's stages recorded (the policies'
checkpoints and chosen execution, the datasets, the grounded cell) and adds its own cached
stages under ``EXPDIR/analysis/`` (the pipeline's one caching rule, :mod:`r2s2r.pipeline.cache`):

    references/<configuration>  a sim-only policy of that configuration's dataset: the
                                co-trained policy's training config with the real data left
                                out (sim ratio 1); the behavior measure's sim reference
    rollouts/<policy>           the experiment's protocol in process, every trial kept with
                                its images, latents and events (``evaluation.rollouts``)
    frames/<dataset>            sampled frames of each training dataset (every ``stride``-th)

then :mod:`r2s2r.experiment.analysis_report` (``run_analysis``) writes
``EXPDIR/analysis/report/``: ``latent.json`` (per policy: success, alignment and
discernibility of its real and sim training latents, state and behavior real-likeness of its
rollouts per condition group with bootstrap intervals over trials, their correlation), a
table, and figures (latent maps, one attribution timeline per policy, a summary). The
real-only policy is every co-trained policy's real reference; it has no sim data of its own,
so its row holds only its success.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from r2s2r_common.config import dump_yaml, parse_config, read_yaml
from r2s2r_common.console import progress_reporter
from r2s2r_policy.evaluation.report import SHIFTED
from r2s2r_policy.evaluation.trials import NOMINAL, EvaluationConfig, trial_plan
from r2s2r_policy.inference.engine import InferenceConfig

from r2s2r.experiment.config import ExperimentConfig, co_trained_configuration, policy_names
from r2s2r.experiment.evaluation import evaluation_protocol, inference_config
from r2s2r.pipeline.cache import StageError, StageRunner, content_hash, current_commit

ANALYSIS_DIR = "analysis"
REPORT_FILE = "latent.json"
MEASURES = ("knn_real_share", "probe_p_real", "nearest_real_ratio", "behavior_real_likeness")
"""Per-step measures of a rollout, in the report's order (see r2s2r_policy.analysis.attribution)."""
GROUP_NAMES = (NOMINAL, SHIFTED)


class AnalysisError(ValueError):
    """The experiment directory cannot be analysed (a stage missing, a file unreadable)."""


@dataclass(frozen=True)
class FinishedPolicy:
    """A trained and evaluated policy of the experiment."""

    name: str
    checkpoint: Path
    train_config: Path
    inference: InferenceConfig
    evaluation: dict[str, Any]
    configuration: str | None


@dataclass(frozen=True)
class FinishedExperiment:
    """What the analysis reads from an experiment directory."""

    directory: Path
    config: ExperimentConfig
    twin: Path
    artifact: Path | None
    policies: dict[str, FinishedPolicy]


def _record(stages: StageRunner, name: str, what: str) -> dict[str, str]:
    record = stages.record(name)
    if record is None or not all(Path(p).exists() for p in record.outputs.values()):
        raise AnalysisError(
            f"{stages.folder(name)}: {what} not finished (run `r2s2r experiment --out "
            f"{stages.root}` to completion first)"
        )
    return record.outputs


def read_finished(directory: str | Path) -> FinishedExperiment:
    """Read a finished experiment's products.

    Raises:
        AnalysisError: No experiment there, or a policy's training, execution selection or
            evaluation stage is missing.

    """
    from r2s2r.experiment.session import resolve_config

    root = Path(directory).resolve()
    config_path = root / "experiment.yaml"
    if not config_path.is_file():
        raise AnalysisError(f"{root}: no experiment.yaml (not an experiment directory)")
    data = read_yaml(config_path)
    # Keys an older version wrote (e.g. its command lines) do not matter to the analysis.
    known = {k: v for k, v in data.items() if k in ExperimentConfig.model_fields}
    config = parse_config(ExperimentConfig, known, str(config_path))
    stages = StageRunner(root)
    artifact: Path | None = None
    if stages.record("grounding") is not None:
        artifact = Path(_record(stages, "grounding", "grounding")["artifact"])
    elif config.grounding_artifact:
        artifact = Path(config.grounding_artifact)
    policies: dict[str, FinishedPolicy] = {}
    for name in policy_names(config):
        trained = _record(stages, f"policies/{name}", f"training of {name}")
        evaluation = _record(stages, f"evaluation/{name}", f"evaluation of {name}")
        if config.execution_selection_trials > 0:
            selection = _record(stages, f"selection/{name}", f"execution selection of {name}")
            chosen = json.loads(Path(selection["selection"]).read_text())["settings"]
            inference = parse_config(InferenceConfig, chosen, selection["selection"])
        else:
            inference = inference_config(config)
        policies[name] = FinishedPolicy(
            name,
            Path(trained["checkpoint"]),
            stages.folder(f"policies/{name}") / "train_config.yaml",
            inference,
            json.loads(Path(evaluation["evaluation"]).read_text()),
            None if co_trained_configuration(config, name) is None else name,
        )
    return FinishedExperiment(root, config, resolve_config(config.twin_config), artifact, policies)


@dataclass
class AnalysisOptions:
    """Sizes of an analysis run.

    Attributes:
        stride: Keep every ``stride``-th frame of each training episode.
        trials: Cap on the protocol's trials per condition (None: the experiment's protocol).
        k: Neighbours of the kNN real share.
        projection: ``pca``, ``umap`` or ``tsne`` (falls back to PCA when not installed).
        probe_frames: At most this many latents per domain for the probes and alignment.
        seed: Seed of every subsample.
        threads: torch intra-op threads (1: on a loaded 2-core machine more threads wait on
            busy cores; measured 10x slower rollouts beside another job with torch's default).

    """

    stride: int = 4
    trials: int | None = None
    k: int = 10
    projection: str = "pca"
    probe_frames: int = 2000
    seed: int = 0
    threads: int = 1


def analysis_protocol(finished: FinishedExperiment, options: AnalysisOptions) -> EvaluationConfig:
    """Return the experiment's protocol, capped at ``options.trials`` per condition."""
    protocol = evaluation_protocol(finished.config)
    if options.trials is None:
        return protocol
    capped = {c: min(n, options.trials) for c, n in protocol.trials_per_condition.items()}
    return protocol.model_copy(update={"trials_per_condition": capped})


class AnalysisSession:
    """The analysis stages of one experiment directory."""

    def __init__(
        self,
        finished: FinishedExperiment,
        options: AnalysisOptions,
        log: Callable[[str], None],
        progress_bars: bool = True,
    ) -> None:
        self.finished = finished
        self.options = options
        self.log = log
        self.progress_bars = progress_bars
        self.commit = current_commit(Path(__file__).parent)
        self.stages = StageRunner(finished.directory / ANALYSIS_DIR, log, self.commit)

    # -- stages ------------------------------------------------------------------------------
    def reference(self, configuration: str) -> Path:
        """Train (or reuse) the sim-only policy of ``configuration``; its checkpoint."""
        from r2s2r_policy.training import train
        from r2s2r_policy.training_config import THROUGHPUT_FIELDS, TrainConfig

        policy = self.finished.policies[configuration]
        data = read_yaml(policy.train_config)
        data.update(real_dataset=None, sim_ratio=1.0)
        config = parse_config(TrainConfig, data, f"sim-only reference of {configuration}")
        dumped = config.model_dump(mode="json")
        sim_path = dumped["sim_dataset"]
        if not sim_path or not Path(sim_path).exists():
            raise AnalysisError(f"{configuration}: its simulated dataset {sim_path} is gone")
        inputs = {
            "config": {k: v for k, v in dumped.items() if k not in THROUGHPUT_FIELDS},
            "sim": content_hash(sim_path) if Path(sim_path).is_file() else sim_path,
        }

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            dump_yaml(dumped, folder / "train_config.yaml")
            run_config = config.model_copy(update={"progress_bar": self.progress_bars})
            result = train(run_config, folder / "run")
            if result.checkpoint is None:
                raise StageError(f"sim-only reference of {configuration}: no checkpoint")
            return {"checkpoint": str(result.checkpoint)}, {"steps": result.step}

        outcome = self.stages.run(
            f"references/{configuration}", inputs, body, what=f"sim-only {configuration}"
        )
        return Path(outcome.outputs["checkpoint"])

    def rollouts(self, policy: FinishedPolicy) -> Path:
        """Record the protocol's rollouts of ``policy``; their folder."""
        from r2s2r_policy.checkpoint import load_checkpoint
        from r2s2r_policy.evaluation.rollouts import record_rollouts

        protocol = analysis_protocol(self.finished, self.options)
        inputs = {
            "checkpoint": content_hash(policy.checkpoint / "model.safetensors"),
            "protocol": protocol.model_dump(mode="json"),
            "inference": policy.inference.model_dump(mode="json"),
            "twin": content_hash(self.finished.twin),
            "artifact": content_hash(self.finished.artifact) if self.finished.artifact else "",
        }
        total = sum(protocol.trials_per_condition.values())

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            bar = progress_reporter(
                f"rollouts/{policy.name}", total, self.progress_bars, unit="trial"
            )
            done = {"n": 0, "ok": 0}

            def echo(record: Any) -> None:
                done["n"] += 1
                done["ok"] += bool(record.success)
                bar.update(done["n"], f"{done['ok']} succeeded")

            try:
                report = record_rollouts(
                    load_checkpoint(policy.checkpoint).policy,
                    folder / "trials",
                    protocol,
                    self.finished.twin,
                    policy.inference,
                    self.finished.artifact,
                    progress=echo,
                )
            finally:
                bar.close()
            json_path, _ = report.save(folder, "evaluation")
            return {"trials": str(folder / "trials"), "evaluation": str(json_path)}, {
                "successes": sum(r.success for r in report.records),
                "trials": len(report.records),
            }

        outcome = self.stages.run(f"rollouts/{policy.name}", inputs, body, what=f"{total} trials")
        return Path(outcome.outputs["trials"])

    def frames(self, name: str, dataset: Path, domain: str, checkpoint: Path) -> Path:
        """Sample the frames of a training dataset as observations of the policies' spec."""
        from r2s2r_policy.analysis.embeddings import input_signature, sample_frames
        from r2s2r_policy.checkpoint import read_checkpoint_config
        from r2s2r_policy.data.sources import HDF5EpisodeSource

        spec = read_checkpoint_config(checkpoint).spec
        inputs = {
            "dataset": content_hash(dataset) if dataset.is_file() else str(dataset),
            "signature": input_signature(spec),
            "stride": self.options.stride,
        }

        def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
            source = HDF5EpisodeSource(dataset, name=name)
            bar = progress_reporter(
                f"frames/{name}", source.num_episodes(), self.progress_bars, unit="episode"
            )
            try:
                frames = sample_frames(
                    source,
                    spec,
                    domain,
                    self.options.stride,
                    name=name,
                    progress=lambda done, _: bar.update(done),
                )
            finally:
                bar.close()
                source.close()
            path = frames.save(folder / "frames.npz")
            return {"frames": str(path)}, {"frames": len(frames)}

        outcome = self.stages.run(f"frames/{name}", inputs, body)
        return Path(outcome.outputs["frames"])


def training_datasets(policy: FinishedPolicy) -> dict[str, Path]:
    """Return the real and sim datasets ``policy`` trained on, by domain."""
    data = read_yaml(policy.train_config)
    out = {}
    if data.get("real_dataset") and float(data.get("sim_ratio", 0.0)) < 1.0:
        out["real"] = Path(data["real_dataset"])
    if data.get("sim_dataset") and float(data.get("sim_ratio", 0.0)) > 0.0:
        out["sim"] = Path(data["sim_dataset"])
    return out


def signature_of(checkpoint: Path) -> dict[str, object]:
    """Return the inputs a checkpoint's policy reads (``embeddings.input_signature``)."""
    from r2s2r_policy.analysis.embeddings import input_signature
    from r2s2r_policy.checkpoint import read_checkpoint_config

    return input_signature(read_checkpoint_config(checkpoint).spec)


def condition_groups(protocol: EvaluationConfig) -> dict[int, str]:
    """Trial index → ``nominal`` or ``shifted``."""
    return {t.index: NOMINAL if t.condition == NOMINAL else SHIFTED for t in trial_plan(protocol)}
