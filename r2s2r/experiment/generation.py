"""The experiment's generation stage: one simulated configuration's episodes.

Stage ``generation/<configuration>``: the shipped configurations (``config/datagen/``) with
this experiment's inputs set (:func:`r2s2r_datagen.configurations.with_inputs`: the grounding
artifact, MimicGen's source demonstrations), run by :func:`r2s2r_datagen.runner.run_generation`.
A partial run resumes while its inputs (all but the episode count) are unchanged; where the
episodes run (``generation_workers``, ``generation_ray_address``) is not among them. A disk that
fills during the run stops the experiment with one line (:class:`DiskSpaceError`), the stage
unrecorded; the same command resumes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from r2s2r_common.config import ConfigError, dump_yaml
from r2s2r_common.disk import DiskSpaceError

from r2s2r.experiment.products import ArtifactProduct, DatasetProduct, Unavailable, given_file
from r2s2r.experiment.session import ExperimentSession
from r2s2r.pipeline.cache import StageError, content_hash, file_fingerprint


def split_world_behavior(configuration: str) -> tuple[str, str]:
    """``grounded_mimicgen`` -> ``("grounded", "mimicgen")``."""
    world, _, behavior = configuration.partition("_")
    return world, behavior


def simulated(
    session: ExperimentSession,
    configuration: str,
    real: DatasetProduct | Unavailable,
    artifact: ArtifactProduct | Unavailable | None,
) -> DatasetProduct | Unavailable:
    """Return one configuration's simulated dataset: given, or generated."""
    config = session.config
    given = config.sim_datasets.get(configuration)
    if given:
        path = given_file(given, "sim dataset")
        if isinstance(path, Unavailable):
            return path
        return DatasetProduct(str(path), file_fingerprint(path))
    world, behavior = split_world_behavior(configuration)
    if behavior == "mimicgen" and isinstance(real, Unavailable):
        return Unavailable(f"MimicGen needs the real demonstrations: {real.reason}")
    if world == "grounded" and not isinstance(artifact, ArtifactProduct):
        reason = artifact.reason if artifact is not None else "not requested"
        return Unavailable(f"grounded world needs the grounding artifact: {reason}")
    from r2s2r_datagen.config import bundled_configurations_path
    from r2s2r_datagen.configurations import load_datagen_config, nominal_world_path, with_inputs

    bundled = bundled_configurations_path()
    try:
        shipped = load_datagen_config(bundled)
    except ConfigError as error:
        return Unavailable(f"generation of {configuration}: {error}")
    nominal_world = nominal_world_path(shipped, bundled)
    mimicgen_file = bundled.parent / "mimicgen.yaml"
    resume_inputs: dict[str, Any] = {
        "configuration": configuration,
        "seed": config.generation_seed,
        "configurations_file": content_hash(bundled),
        "nominal_world": content_hash(nominal_world),
        "mimicgen_config": content_hash(mimicgen_file)
        if behavior == "mimicgen" and mimicgen_file.is_file()
        else "",
        "real": real.fingerprint
        if behavior == "mimicgen" and isinstance(real, DatasetProduct)
        else "",
        "artifact": artifact.fingerprint
        if world == "grounded" and isinstance(artifact, ArtifactProduct)
        else "",
    }
    inputs = {**resume_inputs, "episodes": config.sim_episodes_per_configuration}

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        from r2s2r_datagen.config import GenerateConfig
        from r2s2r_datagen.runner import run_generation

        configurations = with_inputs(
            shipped,
            bundled,
            grounding_artifact=artifact.path if isinstance(artifact, ArtifactProduct) else None,
            mimicgen_source=real.path if isinstance(real, DatasetProduct) else None,
        )
        configurations_path = folder / "configurations.yaml"
        dump_yaml(configurations.model_dump(mode="json"), configurations_path)
        try:
            summary = run_generation(
                GenerateConfig(
                    configurations_path=str(configurations_path),
                    configurations=[configuration],
                    episodes_per_configuration=config.sim_episodes_per_configuration,
                    base_seed=config.generation_seed,
                    workers=config.generation_workers,
                    ray_address=config.generation_ray_address,
                    output_dir=str(folder / "run"),
                    progress=session.progress_bars,
                ),
                # Its stage lines would repeat this stage's; what makes a configuration
                # unavailable comes back in the summary (and is raised below).
                log=lambda _text: None,
            )
        except (ConfigError, RuntimeError) as error:  # bad artifact, workers that die
            raise StageError(f"generation of {configuration}: {error}") from None
        full = [n for n in summary.notes if n.startswith("disk full") or "no space left" in n]
        if full:  # the stage must not be recorded with the episodes the disk cost it
            raise DiskSpaceError(f"generation of {configuration}: {full[0]}")
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
            session.log(f"[generation/{configuration}] WARNING: {item.source_check['message']}")
        if item.diagnosis:
            session.log(f"[generation/{configuration}] {item.diagnosis}")
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
        outcome = session.stages.run(name, inputs, body, resume_inputs=resume_inputs)
    except StageError as error:
        return Unavailable(str(error))
    session.state.note(name, outcome)
    session.state.generation[configuration] = outcome.record.info
    return DatasetProduct(outcome.outputs["dataset"], outcome.fingerprint)
