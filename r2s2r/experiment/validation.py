"""Check a whole experiment configuration before its first stage runs.

The stages read their parts of the :class:`~r2s2r.experiment.config.ExperimentConfig`
late: the training overrides when the first policy trains (after the demonstrations, grounding
and generation), the trial conditions when the first evaluation starts.
:func:`validate_experiment` reads every part up front, so a typo costs seconds, not hours:

- the training config as each policy would get it (base YAML + sizes + ``train_overrides``,
  nested keys included), for the real-only and the co-trained policies;
- the evaluation conditions against the twin's shifts (``nominal`` or a shift of
  ``twin_config``);
- every given input: ``real_dataset``, ``sim_datasets``, ``grounding_artifact`` (the shared
  artifact check).
"""

from __future__ import annotations

from pathlib import Path

from r2s2r_common.config import ConfigError, resolve_config_path
from r2s2r_policy.evaluation.trials import NOMINAL

from r2s2r.experiment.config import ExperimentConfig
from r2s2r.experiment.products import DatasetProduct


def _check_training(config: ExperimentConfig) -> list[str]:
    from r2s2r.experiment.training import train_config_for

    problems = []
    real = DatasetProduct(path="<real dataset>", fingerprint="")
    for sim in (None, DatasetProduct(path="<simulated dataset>", fingerprint="")):
        try:
            train_config_for(config, real, sim)
        except ConfigError as error:
            text = str(error).replace("experiment training config: ", "")
            problems.append(
                f"train_config {config.train_config} + train_overrides: {text} "
                "(train_overrides keys are TrainConfig fields, nested as in the YAML)"
            )
            break
    return problems


def _check_conditions(config: ExperimentConfig) -> list[str]:
    from r2s2r_world.world import load_world

    try:
        twin = load_world(resolve_config_path(config.twin_config))
    except ConfigError as error:
        return [f"twin_config: {error}"]
    known = [NOMINAL, *sorted(twin.shifts)]
    unknown = [name for name in config.trials_per_condition if name not in known]
    if not unknown:
        return []
    return [
        f"trials_per_condition: unknown condition(s) {unknown}; the twin ({config.twin_config}) "
        f"has {known}"
    ]


def _check_inputs(config: ExperimentConfig) -> list[str]:
    problems = []
    if config.real_dataset and not Path(config.real_dataset).exists():
        problems.append(f"real_dataset {config.real_dataset}: not found (a .hdf5 file or folder)")
    for name, path in config.sim_datasets.items():
        if not Path(path).exists():
            problems.append(f"sim_datasets.{name} {path}: not found (a .hdf5 file or folder)")
    if config.grounding_artifact:
        from r2s2r_datagen.configurations import load_grounding_overrides

        try:
            load_grounding_overrides(config.grounding_artifact)
        except ConfigError as error:
            problems.append(f"grounding_artifact: {error}")
    return problems


def validate_experiment(config: ExperimentConfig) -> None:
    """Check everything the experiment's stages will read (see the module docstring).

    Raises:
        ConfigError: Every problem found, one per line, each naming the key and what to do.

    """
    problems = [
        *_check_training(config),
        *_check_conditions(config),
        *_check_inputs(config),
    ]
    if problems:
        raise ConfigError("\n".join(f"experiment config: {line}" for line in problems))
