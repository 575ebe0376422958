"""The experiment's training stage: one policy, real only, co-trained, or sim only.

Stage ``policies/<name>``: the base TrainConfig YAML with the experiment's sizes and
``train_overrides`` (:func:`train_config_for`), keyed on every field but the throughput ones
(:data:`r2s2r_policy.training_config.THROUGHPUT_FIELDS`); a partial run resumes from its
checkpoints.

A relative ``image_store_dir`` in ``train_overrides`` (the paper preset's ``image_stores``) is a
folder of the experiment directory: every policy reads its datasets' images from the on-disk
stores there (:mod:`r2s2r_policy.data.image_store`), one per dataset and image size, so the
real demonstrations' store is built once for every policy that trains on them and a simulated
dataset's once for the co-trained policy and the capacity check. It is a throughput field: a
policy trained with the in-memory cache is not trained again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from r2s2r_common.config import dump_yaml, load_config, parse_config

from r2s2r.experiment.config import ExperimentConfig
from r2s2r.experiment.products import Checkpoint, DatasetProduct
from r2s2r.experiment.session import ExperimentSession, resolve_config
from r2s2r.pipeline.cache import StageError


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``extra`` merged in, nested mappings key by key."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def train_config_for(
    config: ExperimentConfig,
    real: DatasetProduct | None,
    sim: DatasetProduct | None,
    sim_ratio: float | None = None,
) -> dict[str, Any]:
    """Build one policy's TrainConfig (as a dict): the base YAML + the experiment's sizes.

    ``sim_ratio`` defaults to the experiment's co-training ratio with a simulated dataset and
    0 without; the capacity check trains on simulated data alone (1.0, ``real`` None).

    Raises:
        r2s2r_common.config.ConfigError: The merged config is invalid.

    """
    from r2s2r_policy.training_config import TrainConfig

    if sim_ratio is None:
        sim_ratio = config.sim_ratio if sim is not None else 0.0
    base = load_config(TrainConfig, resolve_config(config.train_config)).model_dump(mode="json")
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
    merged = deep_merge(base, config.train_overrides)
    return parse_config(TrainConfig, merged, "experiment training config").model_dump(mode="json")


def train_policy(
    session: ExperimentSession,
    name: str,
    real: DatasetProduct | None,
    sim: DatasetProduct | None,
    sim_ratio: float | None = None,
) -> Checkpoint:
    """Train one policy (resuming its checkpoints); returns its checkpoint.

    Raises:
        StageError: Training failed (e.g. a dataset lacks a feature the policy needs).

    """
    from r2s2r_policy.data.sources import MissingFeatureError
    from r2s2r_policy.training import train
    from r2s2r_policy.training_config import THROUGHPUT_FIELDS, TrainConfig

    train_data = train_config_for(session.config, real, sim, sim_ratio)
    inputs = {
        "config": {k: v for k, v in train_data.items() if k not in THROUGHPUT_FIELDS},
        "real": real.fingerprint if real is not None else "",
        "sim": sim.fingerprint if sim is not None else "",
    }

    def body(folder: Path) -> tuple[dict[str, str], dict[str, Any]]:
        data = dict(train_data, progress_bar=session.progress_bars)
        stores = data.get("image_store_dir")
        if stores and not Path(stores).is_absolute():
            data["image_store_dir"] = str(session.directory / stores)
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
            "final_loss": result.final_loss,
            "samples_per_s": result.samples_per_s,
            "data_fraction": result.data_fraction,
            "validation": result.validation,
        }
        return {"checkpoint": str(result.checkpoint)}, info

    stage = f"policies/{name}"
    outcome = session.stages.run(stage, inputs, body)
    session.state.note(stage, outcome)
    session.state.training[name] = outcome.record.info
    return Checkpoint(outcome.outputs["checkpoint"], outcome.fingerprint)
