"""``r2s2r analyze``: the mixture finding, measured (latent space, attribution, style, monitor).

Sub-commands are imported on first use, like the top-level verbs (:mod:`r2s2r.cli`); each
lives with the code it drives:

- ``experiment EXPDIR``: the latent-space report of a finished experiment;
- ``index CHECKPOINT``: ship a real/sim latent index in a checkpoint (the live monitor's);
- ``diagnostic EXPDIR``: the diagnostic policy's style against the demonstrator and the planner.
"""

from __future__ import annotations

import importlib

import click

# sub-command -> "module:attribute" of a click command.
ANALYZE_COMMANDS: dict[str, str] = {}


class _LazyAnalyzeGroup(click.Group):
    """The ``analyze`` group: sub-commands imported when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """All sub-commands, sorted."""
        return sorted({*super().list_commands(ctx), *ANALYZE_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a sub-command when it is asked for."""
        if cmd_name in ANALYZE_COMMANDS:
            module_name, attribute = ANALYZE_COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{ANALYZE_COMMANDS[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)


@click.group("analyze", cls=_LazyAnalyzeGroup)
def analyze_group() -> None:
    """Measure how real-like a policy's inputs and behavior are (the mixture finding)."""
