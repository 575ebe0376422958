"""``r2s2r launch`` and ``r2s2r graphs``: run a graph without ``ros2 launch``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from r2s2r_common.ros_domain import DISCOVERY_ENV, apply_discovery
from r2s2r_world.grounding import check_artifact_arguments

from r2s2r.cli.shared_options import NO_PROGRESS_OPTION
from r2s2r.graph import available_graphs, load_graph, parse_launch_arguments, resolve_graph
from r2s2r.supervisor import DEFAULT_GRACE_PERIOD_S, default_log_dir, run_graph


@click.command(
    "launch",
    context_settings={"ignore_unknown_options": True},
    help=(
        "Start GRAPH (e.g. real_deploy, sim_generate, or a path to a graph YAML file) as "
        "supervised processes. Launch "
        "arguments are given as NAME:=VALUE, as with ros2 launch. Ctrl-C stops every node; the "
        "exit code is non-zero when a required node dies. The graph runs in the shell's "
        "ROS_DOMAIN_ID and discovers on this host only (--discovery subnet, or "
        "R2S2R_ROS_DISCOVERY=SUBNET, opens it); a graph that brings its own cell (the real twin) "
        "refuses to start where a cell already publishes /joint_states. A node the kernel "
        "holds stopped (SIGSTOP, a debugger) is named on the console after 1 s, again every "
        "10 s, and when it runs again."
    ),
)
@click.argument("graph")
@click.argument("launch_arguments", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for per-node log files (default: runs/logs/<graph>-<time>).",
)
@click.option(
    "--grace-period",
    "grace_period_s",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_GRACE_PERIOD_S,
    show_default=True,
    help="Seconds a node gets to stop after SIGINT before SIGTERM, then SIGKILL.",
)
@click.option("--show-args", is_flag=True, help="List the graph's launch arguments and exit.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Show every line of every node (default: each node's console setting; mostly only "
    "warnings and errors; the logs hold everything).",
)
@NO_PROGRESS_OPTION
@click.option(
    "--discovery",
    type=click.Choice(["localhost", "subnet"], case_sensitive=False),
    default=None,
    help="Where the nodes discover peers (default: localhost, or R2S2R_ROS_DISCOVERY); subnet "
    "for drivers or rviz on other machines.",
)
def launch_command(
    graph: str,
    launch_arguments: tuple[str, ...],
    log_dir: Path | None,
    grace_period_s: float,
    show_args: bool,
    verbose: bool,
    no_progress: bool,
    discovery: str | None,
) -> None:
    """Start GRAPH as supervised processes."""
    if discovery is not None:
        os.environ[DISCOVERY_ENV] = discovery.upper()
        apply_discovery()
    spec = load_graph(graph)
    if show_args:
        click.echo(f"{spec.name}: {spec.description}")
        for argument in spec.arguments:
            choices = f" (choices: {', '.join(argument.choices)})" if argument.choices else ""
            click.echo(f"  {argument.name}:={argument.default}  {argument.description}{choices}")
        return
    arguments = parse_launch_arguments(list(launch_arguments))
    check_artifact_arguments(arguments)
    nodes = resolve_graph(spec, arguments)
    code = run_graph(
        nodes,
        log_dir or default_log_dir(graph),
        grace_period_s,
        verbose=verbose,
        progress=not no_progress,
    )
    sys.exit(code)


@click.command("graphs", help="List the graphs that `r2s2r launch` can start.")
def graphs_command() -> None:
    """List the defined graphs with their descriptions."""
    for name in available_graphs():
        click.echo(f"{name}: {load_graph(name).description}")
