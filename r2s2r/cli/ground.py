"""``r2s2r ground``: ground the simulator against a cell, starting the cell's graph if asked.

The grounding itself is :func:`r2s2r_calibration.cli.ground_command` (against a running cell
over ROS, or ``--from-bag``); this verb takes the same options plus ``--launch GRAPH`` and
``--launch-arg NAME:=VALUE``, and runs the graph as separate, supervised processes for the
duration of the grounding (:func:`r2s2r.supervisor.running_graph`; the values are handed to
the graph as ``r2s2r launch`` would, this command never reads them). Node logs go to
``<output folder>/ground_logs``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click
from r2s2r_calibration.cli import ground_command as ground_on_cell

from r2s2r.graph import GraphError
from r2s2r.supervisor import running_graph

_LAUNCH_OPTIONS = [
    click.Option(
        ["--launch", "graph"],
        default=None,
        help="Start this bring-up graph (e.g. real_deploy) as separate processes first.",
    ),
    click.Option(
        ["--launch-arg", "launch_arguments"],
        multiple=True,
        help="NAME:=VALUE launch argument of --launch (repeatable), passed on unread.",
    ),
]


def _ground(graph: str | None, launch_arguments: tuple[str, ...], **options: Any) -> None:
    ctx = click.get_current_context()
    if graph is None or options["from_bag"]:
        ctx.invoke(ground_on_cell, **options)
        return
    from r2s2r_calibration.procedure import parse_steps

    try:
        parse_steps(options["steps"])  # a bad --steps costs no graph start
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    log_dir = Path(options["output"]).with_suffix("").parent / "ground_logs"
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(running_graph(graph, list(launch_arguments), log_dir))
        except GraphError as error:
            raise click.UsageError(str(error)) from None
        ctx.invoke(ground_on_cell, **options)


ground_command = click.Command(
    "ground",
    callback=_ground,
    params=[*ground_on_cell.params, *_LAUNCH_OPTIONS],
    help=ground_on_cell.help,
)
