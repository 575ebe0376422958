"""The experiment's two cell stages: ground the cell, then record the demonstrations on it.

Both are the pipeline's command stages (:mod:`r2s2r.pipeline.stages`), with the command lines
the main job uses too (:func:`~r2s2r.pipeline.stages.ground_argv`,
:func:`~r2s2r.pipeline.stages.record_demos_argv`). Each stage keys on its command line built with
``{field}`` names for its per-run values, so a change to how the command is written re-runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from r2s2r_common.config import ConfigError

from r2s2r.experiment.products import ArtifactProduct, DatasetProduct, Unavailable, given_file
from r2s2r.experiment.session import ExperimentSession
from r2s2r.pipeline.cache import StageError, content_hash, file_fingerprint
from r2s2r.pipeline.stages import (
    DEMOS,
    GROUNDING,
    demos_stage,
    ground_argv,
    grounded_cell_arguments,
    grounding_stage,
    record_demos_argv,
    run_command_stage,
    runnable,
)


def _ground_command(artifact: str, twin_config: str) -> list[str]:
    return ground_argv(artifact, [f"twin_config:={twin_config}"])


def _demos_command(
    out_dir: str, episodes: str, seed: str, twin_config: str, artifact: str
) -> list[str]:
    return record_demos_argv(out_dir, episodes, seed, twin_config=twin_config, artifact=artifact)


def grounding(session: ExperimentSession) -> ArtifactProduct | Unavailable:
    """Return the grounding artifact: given, or written by ``r2s2r ground`` against the twin."""
    config = session.config
    if config.grounding_artifact:
        given = given_file(config.grounding_artifact, "grounding_artifact", file_only=True)
        if isinstance(given, Unavailable):
            return given
        return ArtifactProduct(str(given), content_hash(given))
    folder = session.stages.folder(GROUNDING)
    artifact = folder / "artifact.yaml"
    stage = grounding_stage(
        runnable(_ground_command(str(artifact), str(session.twin_path))),
        artifact,
        folder / "ground.log",
        config.command_timeout_s,
        {
            "twin": content_hash(session.twin_path),
            "command": _ground_command("{artifact}", "{twin_config}"),
        },
    )
    try:
        outcome = run_command_stage(session.stages, stage, session.commands)
    except StageError as error:
        return Unavailable(f"grounding artifact not produced: {error}")
    session.state.note(GROUNDING, outcome)
    written = outcome.outputs["artifact"]
    return ArtifactProduct(written, content_hash(written))


def ground_cell(session: ExperimentSession) -> ArtifactProduct | Unavailable:
    """Ground the cell (:func:`grounding`); the session gets the grounded cell's arguments."""
    artifact = grounding(session)
    if isinstance(artifact, ArtifactProduct):
        export = session.directory / "grounded_cell"  # camera_info files of the artifact
        try:
            session.cell_arguments = grounded_cell_arguments(Path(artifact.path), export)
        except (ConfigError, ValueError) as error:
            artifact = Unavailable(f"grounding artifact {artifact.path} unusable: {error}")
    session.artifact = artifact
    return artifact


REAL_SUBSET = "real_subset"
"""Stage of the first ``real_demos`` demonstrations of a given, larger real dataset."""


def first_demonstrations(
    session: ExperimentSession,
    given: DatasetProduct,
    wanted: int | None = None,
    stage: str = REAL_SUBSET,
) -> DatasetProduct | Unavailable:
    """Return the first ``real_demos`` (or ``wanted``) successful demonstrations of a dataset.

    A dataset that holds no more successful episodes than ``real_demos`` is used as it is
    (fewer: all of them, with a note). A larger one is cut in stage ``stage``: its
    episodes in order up to and including the ``real_demos``-th success, as ``r2s2r
    record-demos --successes real_demos`` with the same seeds would have recorded them
    (training leaves the failed takes out).
    """
    from r2s2r_dataset import DatasetError, EpisodeWriter
    from r2s2r_dataset import EpisodeDataset as EpisodeReader

    wanted = session.config.real_demos if wanted is None else wanted
    try:
        with EpisodeReader(given.path) as reader:
            outcomes = [reader.metadata(i).outcome for i in range(len(reader))]
    except DatasetError as error:
        return Unavailable(f"real_dataset {given.path}: {error}")
    successes = [i for i, outcome in enumerate(outcomes) if outcome == "success"]
    if len(successes) <= wanted:
        if len(successes) < wanted:
            session.log(
                f"note: real_dataset {given.path} holds {len(successes)} successful "
                f"demonstrations, fewer than real_demos {wanted}: all are used"
            )
        return given
    last = successes[wanted - 1]

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        target = folder / "dataset.hdf5"
        target.unlink(missing_ok=True)
        with EpisodeReader(given.path) as reader, EpisodeWriter(target) as writer:
            for index in range(last + 1):
                writer.append(reader.episode(index))
        return {"dataset": str(target)}, {"episodes": last + 1, "successes": wanted}

    inputs = {"dataset": given.fingerprint, "successes": wanted}
    outcome = session.stages.run(
        stage, inputs, body, what=f"the first {wanted} demonstrations of {given.path}"
    )
    session.state.note(stage, outcome)
    return DatasetProduct(outcome.outputs["dataset"], outcome.fingerprint)


def real_demos(session: ExperimentSession) -> DatasetProduct | Unavailable:
    """Return the real dataset: given (:func:`first_demonstrations` of it), or recorded.

    Recorded: ``r2s2r record-demos`` on the grounded cell.
    """
    config = session.config
    if config.real_dataset:
        given = given_file(config.real_dataset, "real_dataset")
        if isinstance(given, Unavailable):
            return given
        return first_demonstrations(session, DatasetProduct(str(given), file_fingerprint(given)))
    artifact = session.artifact
    if not isinstance(artifact, ArtifactProduct):
        why = artifact.reason if artifact is not None else "not run"
        return Unavailable(
            f"demonstrations are recorded on the grounded cell, and it is not grounded: {why}"
        )
    folder = session.stages.folder(DEMOS)
    command = _demos_command(
        str(folder),
        str(config.real_demos),
        str(config.demo_seed),
        str(session.twin_path),
        artifact.path,
    )
    inputs = {
        "episodes": config.real_demos,
        "seed": config.demo_seed,
        "twin": content_hash(session.twin_path),
        "command": _demos_command(
            "{out_dir}", "{episodes}", "{seed}", "{twin_config}", "{artifact}"
        ),
        "artifact": artifact.fingerprint,
    }
    stage = demos_stage(
        runnable(command),
        folder / "dataset.hdf5",
        folder / "demos.log",
        config.command_timeout_s,
        inputs,
    )
    try:
        outcome = run_command_stage(session.stages, stage, session.commands)
    except StageError as error:
        return Unavailable(f"real demonstrations not recorded: {error}")
    session.state.note(DEMOS, outcome)
    return DatasetProduct(outcome.outputs["dataset"], outcome.fingerprint)
