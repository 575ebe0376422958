"""The experiment's command-line options: one table for the options, overrides and reproduce.

Each :class:`ConfigOption` is one :class:`~r2s2r.experiment.config.ExperimentConfig` field set
from the command line; ``r2s2r experiment`` (:mod:`r2s2r.cli.experiment`) declares them with
:func:`config_options`, turns their values into the config with :func:`config_from_options`,
and writes the run's command with :func:`reproduce_command`. A new option is one row here.
"""

from __future__ import annotations

import shlex
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import click
from r2s2r_common.config import ConfigError, load_config, parse_config

from r2s2r.experiment.config import ALL_CONFIGURATIONS, PRESETS, ExperimentConfig, load_preset

OptionKind = Literal["value", "path", "counts", "paths", "choices", "flag"]
"""How an option maps to its field.

``value``: one value as it is; ``path``: one path, made absolute; ``counts``: repeated
``NAME=COUNT`` -> mapping; ``paths``: repeated ``NAME=PATH`` -> mapping of absolute paths;
``choices``: repeated choice -> list; ``flag``: present -> the field takes ``flag_value``.
"""


@dataclass(frozen=True)
class ConfigOption:
    """One command-line option of ``r2s2r experiment`` and the config field it sets.

    Attributes:
        flag: The option (``--real-demos``).
        field: The :class:`ExperimentConfig` field.
        kind: How its value maps to the field (:data:`OptionKind`).
        help: Help text.
        value_type: Click type of one value (``value`` kind).
        flag_value: The field's value when the flag is given (``flag`` kind).

    """

    flag: str
    field: str
    kind: OptionKind
    help: str
    value_type: Any = str
    flag_value: Any = None

    @property
    def parameter(self) -> str:
        """The name click passes the option's value under."""
        return self.flag.removeprefix("--").replace("-", "_")

    def click_option(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Return the click decorator declaring this option."""
        if self.kind == "flag":
            return click.option(self.flag, self.parameter, is_flag=True, help=self.help)
        if self.kind == "choices":
            return click.option(
                self.flag,
                self.parameter,
                multiple=True,
                type=click.Choice(ALL_CONFIGURATIONS),
                help=self.help,
            )
        if self.kind in ("counts", "paths"):
            return click.option(self.flag, self.parameter, multiple=True, help=self.help)
        return click.option(
            self.flag, self.parameter, type=self.value_type, default=None, help=self.help
        )

    def field_value(self, value: Any) -> Any:
        """Return the field's value for the option's command-line value (None: not given).

        Raises:
            click.BadParameter: A malformed ``NAME=COUNT`` / ``NAME=PATH`` item.

        """
        if self.kind == "flag":
            return self.flag_value if value else None
        if self.kind == "path":
            return str(Path(value).resolve()) if value else None
        if self.kind == "counts":
            return self._pairs(value, integer=True) or None
        if self.kind == "paths":
            given = self._pairs(value, integer=False)
            return {k: str(Path(v).resolve()) for k, v in given.items()} or None
        if self.kind == "choices":
            return list(value) or None
        return value

    def arguments(self, config: ExperimentConfig) -> list[str]:
        """Return the command-line arguments that give ``config``'s value of the field."""
        value = getattr(config, self.field)
        if self.kind == "flag":
            return [self.flag] if value == self.flag_value else []
        if self.kind in ("counts", "paths"):
            return [part for k, v in value.items() for part in (self.flag, f"{k}={v}")]
        if self.kind == "choices":
            return [part for item in value for part in (self.flag, str(item))]
        if value == "":  # an empty path is the preset's "not given"
            return []
        return [self.flag, str(value)]

    def _pairs(self, items: tuple[str, ...], integer: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key or not value or (integer and not value.isdigit()):
                expected = "NAME=COUNT" if integer else "NAME=PATH"
                raise click.BadParameter(f"{item!r}: expected {expected}", param_hint=self.flag)
            out[key] = int(value) if integer else value
        return out


CONFIG_OPTIONS: tuple[ConfigOption, ...] = (
    ConfigOption("--real-demos", "real_demos", "value", "Real demonstrations to record.", int),
    ConfigOption(
        "--sim-episodes",
        "sim_episodes_per_configuration",
        "value",
        "Simulated episodes per config.",
        int,
    ),
    ConfigOption("--steps", "train_steps", "value", "Training steps per policy.", int),
    ConfigOption("--image-px", "image_px", "value", "Policy image size (square, px).", int),
    ConfigOption("--batch-size", "batch_size", "value", "Training batch size.", int),
    ConfigOption("--sim-ratio", "sim_ratio", "value", "Co-training share of sim samples.", float),
    ConfigOption("--seed", "seed", "value", "Training seed (same for every policy).", int),
    ConfigOption("--workers", "generation_workers", "value", "Generation worker processes.", int),
    ConfigOption(
        "--ray-address",
        "generation_ray_address",
        "value",
        "Generate on this Ray cluster (HOST:PORT of its head); --workers actors of 1 CPU.",
    ),
    ConfigOption(
        "--twin-config", "twin_config", "value", "The real twin's world (relative: config/)."
    ),
    ConfigOption("--real-time-factor", "real_time_factor", "value", "--ros: twin speed.", float),
    ConfigOption(
        "--real-dataset", "real_dataset", "path", "Use this real dataset (skip recording)."
    ),
    ConfigOption(
        "--artifact", "grounding_artifact", "path", "Use this grounding artifact (skip grounding)."
    ),
    ConfigOption(
        "--trials",
        "trials_per_condition",
        "counts",
        "Evaluation trials CONDITION=COUNT (repeatable).",
    ),
    ConfigOption(
        "--configuration",
        "configurations",
        "choices",
        "Co-trained policies to run (repeatable; default all four).",
    ),
    ConfigOption(
        "--sim-dataset", "sim_datasets", "paths", "CONFIG=PATH: use instead of generating."
    ),
    ConfigOption(
        "--ros",
        "evaluator",
        "flag",
        "Evaluate through the ROS graph (as on hardware).",
        flag_value="ros",
    ),
)
"""Every option that sets a config field, in the order a reproduce command lists them."""

Decorated = TypeVar("Decorated", bound=Callable[..., Any])


def config_options(function: Decorated) -> Decorated:
    """Declare every :data:`CONFIG_OPTIONS` option on a click command."""
    decorated: Callable[..., Any] = function
    for option in reversed(CONFIG_OPTIONS):
        decorated = option.click_option()(decorated)
    return typing.cast(Decorated, decorated)


def build_config(
    preset: str, config_path: str | None, overrides: dict[str, Any]
) -> ExperimentConfig:
    """Build the experiment config: a preset (or a YAML file) with overrides of its fields.

    Raises:
        r2s2r_common.config.ConfigError: Invalid file or values.

    """
    base = load_config(ExperimentConfig, config_path) if config_path else load_preset(preset)
    data = base.model_dump(mode="json")
    data.update({k: v for k, v in overrides.items() if v is not None})
    return parse_config(ExperimentConfig, data, "experiment config + options")


def config_from_options(
    preset: str, config_path: str | None, values: dict[str, Any]
) -> ExperimentConfig:
    """Build the config from the command's option values (click's names; paths made absolute).

    Raises:
        click.BadParameter: Malformed ``--trials`` / ``--sim-dataset`` items.
        r2s2r_common.config.ConfigError: Invalid values.

    """
    overrides = {
        option.field: option.field_value(values.get(option.parameter)) for option in CONFIG_OPTIONS
    }
    return build_config(preset, config_path, overrides)


def reproduce_command(config: ExperimentConfig, out_dir: str | Path) -> str:
    """Return a command that reruns exactly this experiment.

    Preset plus every option when those express the whole config; otherwise the saved
    ``experiment.yaml`` of the experiment directory is named with ``--config``.
    """
    out = str(Path(out_dir).resolve())
    if config.preset in PRESETS:
        parts = ["r2s2r", "experiment", "--out", out, "--preset", config.preset]
        overrides: dict[str, Any] = {}
        for option in CONFIG_OPTIONS:
            arguments = option.arguments(config)
            parts += arguments
            if arguments or option.kind not in ("value", "path"):
                overrides[option.field] = getattr(config, option.field)
        try:
            if build_config(config.preset, None, overrides) == config:
                return shlex.join(parts)
        except ConfigError:
            pass
    saved = Path(out_dir).resolve() / "experiment.yaml"
    return shlex.join(["r2s2r", "experiment", "--out", out, "--config", str(saved)])
