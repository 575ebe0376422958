"""``r2s2r experiment``: the 2×2 co-training experiment, end to end, resumable.

Examples::

    r2s2r experiment                                   # reduced scale (~2 h on 2 CPU cores)
    r2s2r experiment --preset paper --out runs/experiment_paper
    r2s2r experiment --real-demos 100 --sim-episodes 1500 --steps 20000 --image-px 128
    r2s2r experiment --preset smoke --out /tmp/smoke  # minutes: checks the pipeline
    r2s2r experiment --ros                             # evaluate through the ROS graph

Re-running the same command skips every stage whose outputs exist and whose inputs are
unchanged; changing a size re-runs only the stages that depend on it.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import click
from r2s2r_common.config import ConfigError, load_config, parse_config
from r2s2r_policy.experiment.config import (
    ALL_CONFIGURATIONS,
    PRESETS,
    ExperimentConfig,
    load_preset,
)

# CLI option -> ExperimentConfig field, for overrides and for the reproduce command.
_SCALAR_OPTIONS: dict[str, str] = {
    "real_demos": "--real-demos",
    "sim_episodes_per_configuration": "--sim-episodes",
    "train_steps": "--steps",
    "image_px": "--image-px",
    "batch_size": "--batch-size",
    "sim_ratio": "--sim-ratio",
    "seed": "--seed",
    "generation_workers": "--workers",
    "twin_config": "--twin-config",
    "real_time_factor": "--real-time-factor",
    "real_dataset": "--real-dataset",
    "grounding_artifact": "--artifact",
}


def _pairs(items: tuple[str, ...], option: str, integer: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value or (integer and not value.isdigit()):
            expected = "NAME=COUNT" if integer else "NAME=PATH"
            raise click.BadParameter(f"{item!r}: expected {expected}", param_hint=option)
        out[key] = int(value) if integer else value
    return out


def build_config(
    preset: str, config_path: str | None, overrides: dict[str, Any]
) -> ExperimentConfig:
    """Build the experiment config: a preset (or a YAML file) with command-line overrides.

    Raises:
        r2s2r_common.config.ConfigError: Invalid file or values.

    """
    base = load_config(ExperimentConfig, config_path) if config_path else load_preset(preset)
    data = base.model_dump(mode="json")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return parse_config(ExperimentConfig, data, "experiment config + options")


def reproduce_command(config: ExperimentConfig, out_dir: str | Path) -> str:
    """Return a command that reruns exactly this experiment.

    Preset plus explicit options when those express the whole config; otherwise the saved
    ``experiment.yaml`` of the experiment directory is named with ``--config``.
    """
    parts = ["r2s2r", "experiment", "--out", str(Path(out_dir).resolve())]
    if config.preset in PRESETS:
        parts += ["--preset", config.preset]
        data = config.model_dump(mode="json")
        overrides: dict[str, Any] = {}
        for field_name, option in _SCALAR_OPTIONS.items():
            if data[field_name] != "":  # an empty path is the preset's "not given"
                parts += [option, str(data[field_name])]
                overrides[field_name] = data[field_name]
        for condition, count in config.trials_per_condition.items():
            parts += ["--trials", f"{condition}={count}"]
        overrides["trials_per_condition"] = dict(config.trials_per_condition)
        for name in config.configurations:
            parts += ["--configuration", name]
        overrides["configurations"] = list(config.configurations)
        for name, path in config.sim_datasets.items():
            parts += ["--sim-dataset", f"{name}={path}"]
        overrides["sim_datasets"] = dict(config.sim_datasets)
        if config.evaluator == "ros":
            parts.append("--ros")
        overrides["evaluator"] = config.evaluator
        try:
            if build_config(config.preset, None, overrides) == config:
                return shlex.join(parts)
        except ConfigError:
            pass
    saved = Path(out_dir).resolve() / "experiment.yaml"
    return shlex.join(
        ["r2s2r", "experiment", "--out", str(Path(out_dir).resolve()), "--config", str(saved)]
    )


def config_from_options(
    preset: str,
    smoke: bool,
    config_path: str | None,
    real_demos: int | None,
    sim_episodes: int | None,
    steps: int | None,
    image_px: int | None,
    batch_size: int | None,
    sim_ratio: float | None,
    seed: int | None,
    workers: int | None,
    trials: tuple[str, ...],
    configurations: tuple[str, ...],
    ros: bool,
    real_time_factor: float | None,
    twin_config: str | None,
    real_dataset: str | None,
    artifact: str | None,
    sim_datasets: tuple[str, ...],
) -> ExperimentConfig:
    """Build the config from the command's options (paths made absolute).

    Raises:
        click.BadParameter: Malformed ``--trials`` / ``--sim-dataset`` items.
        r2s2r_common.config.ConfigError: Invalid values.

    """
    overrides: dict[str, Any] = {
        "real_demos": real_demos,
        "sim_episodes_per_configuration": sim_episodes,
        "train_steps": steps,
        "image_px": image_px,
        "batch_size": batch_size,
        "sim_ratio": sim_ratio,
        "seed": seed,
        "generation_workers": workers,
        "real_time_factor": real_time_factor,
        "twin_config": twin_config,
        "real_dataset": str(Path(real_dataset).resolve()) if real_dataset else None,
        "grounding_artifact": str(Path(artifact).resolve()) if artifact else None,
        "trials_per_condition": _pairs(trials, "--trials", True) or None,
        "configurations": list(configurations) or None,
        "evaluator": "ros" if ros else None,
    }
    given = _pairs(sim_datasets, "--sim-dataset", False)
    if given:
        overrides["sim_datasets"] = {k: str(Path(v).resolve()) for k, v in given.items()}
    return build_config("smoke" if smoke else preset, config_path, overrides)


@click.command("experiment")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="runs/experiment",
    show_default=True,
    help="Experiment directory (stages cache their outputs here; rerun to resume).",
)
@click.option(
    "--preset",
    type=click.Choice(PRESETS),
    default="reduced",
    show_default=True,
    help="Sizes: reduced (~2 h on 2 CPU cores), paper (100 real + 1500 sim), smoke (minutes).",
)
@click.option("--smoke", is_flag=True, help="Same as --preset smoke.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="ExperimentConfig YAML instead of a preset (e.g. a saved experiment.yaml).",
)
@click.option("--real-demos", type=int, default=None, help="Real demonstrations to record.")
@click.option("--sim-episodes", type=int, default=None, help="Simulated episodes per config.")
@click.option("--steps", type=int, default=None, help="Training steps per policy.")
@click.option("--image-px", type=int, default=None, help="Policy image size (square, px).")
@click.option("--batch-size", type=int, default=None, help="Training batch size.")
@click.option("--sim-ratio", type=float, default=None, help="Co-training share of sim samples.")
@click.option("--seed", type=int, default=None, help="Training seed (same for every policy).")
@click.option("--workers", type=int, default=None, help="Generation worker processes.")
@click.option("--trials", multiple=True, help="Evaluation trials CONDITION=COUNT (repeatable).")
@click.option(
    "--configuration",
    "configurations",
    multiple=True,
    type=click.Choice(ALL_CONFIGURATIONS),
    help="Co-trained policies to run (repeatable; default all four).",
)
@click.option("--ros", is_flag=True, help="Evaluate through the ROS graph (as on hardware).")
@click.option("--real-time-factor", type=float, default=None, help="--ros: twin speed.")
@click.option("--twin-config", default=None, help="The real twin's world (relative: config/).")
@click.option("--real-dataset", default=None, help="Use this real dataset (skip recording).")
@click.option("--artifact", default=None, help="Use this grounding artifact (skip grounding).")
@click.option(
    "--sim-dataset", "sim_datasets", multiple=True, help="CONFIG=PATH: use instead of generating."
)
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@click.option(
    "--publish",
    type=click.Path(file_okay=False),
    default=None,
    help="Also copy the summary JSON and the bar plot to DIR as experiment_<preset>.json/.png "
    "(e.g. results/).",
)
@click.option(
    "--publish-name",
    default=None,
    help="File stem of --publish (default experiment_<preset>), e.g. experiment_family_outer1 "
    "for a run on another twin.",
)
def experiment_command(
    out_dir: str,
    preset: str,
    smoke: bool,
    config_path: str | None,
    real_demos: int | None,
    sim_episodes: int | None,
    steps: int | None,
    image_px: int | None,
    batch_size: int | None,
    sim_ratio: float | None,
    seed: int | None,
    workers: int | None,
    trials: tuple[str, ...],
    configurations: tuple[str, ...],
    ros: bool,
    real_time_factor: float | None,
    twin_config: str | None,
    real_dataset: str | None,
    artifact: str | None,
    sim_datasets: tuple[str, ...],
    no_progress: bool,
    publish: str | None,
    publish_name: str | None,
) -> None:
    """Train real-only and four co-trained policies, evaluate them, write the paper's table."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    config = config_from_options(
        preset=preset,
        smoke=smoke,
        config_path=config_path,
        real_demos=real_demos,
        sim_episodes=sim_episodes,
        steps=steps,
        image_px=image_px,
        batch_size=batch_size,
        sim_ratio=sim_ratio,
        seed=seed,
        workers=workers,
        trials=trials,
        configurations=configurations,
        ros=ros,
        real_time_factor=real_time_factor,
        twin_config=twin_config,
        real_dataset=real_dataset,
        artifact=artifact,
        sim_datasets=sim_datasets,
    )
    from r2s2r.pipeline.experiment import run_experiment
    from r2s2r.pipeline.validation import validate_experiment

    validate_experiment(config)  # before any stage: a typo costs seconds, not hours
    command = reproduce_command(config, out_dir)
    click.echo(f"experiment {config.preset}: {Path(out_dir).resolve()}")
    results = run_experiment(config, out_dir, command=command, progress_bars=not no_progress)
    if publish:
        import shutil

        target = Path(publish)
        target.mkdir(parents=True, exist_ok=True)
        stem = publish_name or f"experiment_{config.preset}"
        shutil.copyfile(Path(out_dir) / "summary.json", target / f"{stem}.json")
        shutil.copyfile(Path(out_dir) / "results.png", target / f"{stem}.png")
        click.echo(f"published {target / stem}.json and .png")
    if not any(p.ran for p in results.policies):
        raise SystemExit(1)
