"""``r2s2r analyze``: the mixture finding, measured (latent space, attribution, style, monitor).

Sub-commands are imported on first use, like the top-level verbs (:mod:`r2s2r.cli`); each
lives with the code it drives:

- ``experiment EXPDIR``: the latent-space report of a finished experiment;
- ``index CHECKPOINT``: ship a real/sim latent index in a checkpoint (the live monitor's);
- ``diagnostic EXPDIR``: the diagnostic policy's style against the demonstrator and the planner.
"""

from __future__ import annotations

from typing import ClassVar

import click

from r2s2r.cli import LazyGroup

# sub-command -> "module:attribute" of a click command.
ANALYZE_COMMANDS: dict[str, str] = {
    "experiment": "r2s2r.cli.analyze_experiment:analyze_experiment_command",
    "diagnostic": "r2s2r.cli.analyze_diagnostic:analyze_diagnostic_command",
    "index": "r2s2r_policy.cli:analyze_index_command",
}


class _AnalyzeGroup(LazyGroup):
    """The ``analyze`` group: sub-commands imported when asked for."""

    lazy_commands: ClassVar[dict[str, str]] = ANALYZE_COMMANDS


@click.group("analyze", cls=_AnalyzeGroup)
def analyze_group() -> None:
    """Measure how real-like a policy's inputs and behavior are (the mixture finding)."""
