"""The ``r2s2r`` command line: graph launching and the offline steps of the pipeline.

Verbs live in the packages that own them and are imported only when used, so ``r2s2r --help``
stays fast and a verb's heavy dependencies (torch, open3d, ...) load only for that verb.
Errors a user can fix (bad names, bad arguments, missing files) print one line and exit 2.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click
from r2s2r_common.config import ConfigError

# verb -> "module:attribute" of a click command or group.
LAZY_COMMANDS: dict[str, str] = {
    "launch": "r2s2r.cli.launch:launch_command",
    "graphs": "r2s2r.cli.launch:graphs_command",
    "bag2dataset": "r2s2r_recorder.cli:bag2dataset",
    "dataset": "r2s2r_recorder.cli:dataset_group",
    "bag": "r2s2r_recorder.cli:bag_group",
    "record-demos": "r2s2r_recorder.demos:record_demos_command",
    "ground": "r2s2r_calibration.cli:ground_command",
    "generate": "r2s2r_datagen.cli:generate_command",
    "train": "r2s2r_policy.cli:train_command",
    "evaluate": "r2s2r_policy.evaluation.cli:evaluate_command",
    "experiment": "r2s2r_policy.experiment.cli:experiment_command",
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """All verbs, eager and lazy, sorted."""
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a lazy verb when it is asked for."""
        if cmd_name in LAZY_COMMANDS:
            module_name, attribute = LAZY_COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{LAZY_COMMANDS[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="r2s2r")
def cli() -> None:
    """r2s2r: real2sim2real co-training for a conveyor pick-and-sort cell."""


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the CLI, turning user errors into one line and exit code 2."""
    try:
        return cli.main(args=argv, prog_name="r2s2r", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(2 if error.exit_code in (1, 2) else error.exit_code)
    except ConfigError as error:
        click.echo(f"r2s2r: error: {error}", err=True)
        sys.exit(2)
