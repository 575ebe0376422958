"""``r2s2r view [BAG]``: the cell in the browser, live from the ROS graph or replayed from a bag.

Live (no BAG): runs the ``viewer`` node in this process (:mod:`r2s2r_view.nodes.viewer`) on the
current ROS domain, e.g. beside ``r2s2r launch real_deploy``. Replay: the episode bag's
messages at their recorded stamps (:mod:`r2s2r_view.bag_replay`), then the view stays served
until Ctrl-C. Both print the page to open; the web viewer and its data port bind 127.0.0.1
unless ``--host`` says otherwise. A port in use, a damaged bag: one line, exit 2, nothing
started.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from r2s2r_common.config import parse_config

from r2s2r_view.config import DEFAULT_GRPC_PORT, DEFAULT_HOST, DEFAULT_WEB_PORT, ViewerNodeConfig


def _wait(duration_s: float) -> None:
    """Serve until Ctrl-C, or for ``duration_s`` seconds when positive."""
    deadline = time.monotonic() + duration_s if duration_s > 0 else None
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.2)


def replay(
    bag: Path,
    config: ViewerNodeConfig,
    duration_s: float,
    screenshot_png: Path | None = None,
    until_s: float = 0.0,
) -> None:
    """Replay ``bag`` into a served view (see the module doc); optionally screenshot it."""
    import rerun as rr
    from r2s2r_recorder.bag_reading import check_bag_integrity

    from r2s2r_view.bag_replay import replay_bag
    from r2s2r_view.rerun_log import CellLogger
    from r2s2r_view.server import RerunServer

    check_bag_integrity(bag)  # a damaged bag: one line before anything starts
    with RerunServer(config) as server:
        recording = rr.RecordingStream("r2s2r_view", recording_id=bag.name, send_properties=False)
        recording.connect_grpc(server.grpc_uri)
        logger = CellLogger(recording)
        logger.send_layout()
        click.echo(f"view at {server.url}")
        summary = replay_bag(
            bag,
            logger,
            image_period_s=config.image_period_s,
            progress=True,
            on_missing=lambda line: click.echo(f"r2s2r view: warning: {line}", err=True),
            until_s=until_s,
            joint_state_period_s=config.joint_state_period_s,
        )
        drawn = sum(summary.logged.values())
        undecodable = sum(summary.undecodable.values())
        extra = f", {undecodable} not drawable" if undecodable else ""
        click.echo(f"replayed {drawn} messages of {len(summary.logged)} topics from {bag}{extra}")
        if screenshot_png is not None:
            from r2s2r_view.snapshot import screenshot, write_png_atomic

            write_png_atomic(screenshot(server.url), screenshot_png)
            click.echo(f"wrote {screenshot_png}")
            if duration_s <= 0:
                recording.disconnect()
                return
        click.echo("serving until Ctrl-C" if duration_s <= 0 else f"serving for {duration_s:g} s")
        _wait(duration_s)
        recording.disconnect()


def live(config: ViewerNodeConfig, duration_s: float) -> int:
    """Run the viewer node in this process; return its exit code."""
    from r2s2r_common.ros.runner import run_node
    from rclpy.parameter import Parameter

    from r2s2r_view.nodes.viewer import Viewer

    overrides = [Parameter(name, value=value) for name, value in config.model_dump().items()]
    deadline = time.monotonic() + duration_s
    return run_node(
        lambda: Viewer(parameter_overrides=overrides),
        args=[],
        until=(lambda _node: time.monotonic() > deadline) if duration_s > 0 else None,
    )


@click.command("view")
@click.argument("bag", required=False, type=click.Path(path_type=Path))
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="IP address to bind the web viewer and its data port to (0.0.0.0: every interface).",
)
@click.option(
    "--web-port",
    default=DEFAULT_WEB_PORT,
    show_default=True,
    type=int,
    help="Port of the web viewer (HTTP).",
)
@click.option(
    "--grpc-port",
    default=DEFAULT_GRPC_PORT,
    show_default=True,
    type=int,
    help="Port of the viewer's data stream (gRPC).",
)
@click.option(
    "--image-period-s",
    default=None,
    type=float,
    help="Shortest time between two drawn frames of one camera, s (default: the node's, 0.2).",
)
@click.option(
    "--screenshot",
    "screenshot_png",
    default=None,
    type=click.Path(path_type=Path),
    help="With BAG: save a PNG of the view (headless Chromium) once it has drawn, then exit.",
)
@click.option(
    "--until-s",
    default=0.0,
    show_default=True,
    type=float,
    help="With BAG: replay its first SECONDS only (0: all of it); the view shows that moment.",
)
@click.option(
    "--duration-s",
    default=0.0,
    show_default=True,
    type=float,
    help="Serve this long, then exit (0: until Ctrl-C).",
)
def view_command(
    bag: Path | None,
    host: str,
    web_port: int,
    grpc_port: int,
    image_period_s: float | None,
    screenshot_png: Path | None,
    until_s: float,
    duration_s: float,
) -> None:
    """Show the cell in the browser: live (no BAG) or replaying the episode bag BAG.

    Open the printed address (http://127.0.0.1:9090/?url=...). Live, it shows the graph on
    this ROS domain (start it with `r2s2r launch real_deploy`, or use `viewer:=true` there).
    """
    values: dict[str, Any] = {"host": host, "web_port": web_port, "grpc_port": grpc_port}
    if image_period_s is not None:
        values["image_period_s"] = image_period_s
    config = parse_config(ViewerNodeConfig, values, "r2s2r view options")
    if screenshot_png is not None and bag is None:
        raise click.UsageError("--screenshot needs a BAG to replay")
    from r2s2r_view.server import check_port_free

    check_port_free(config.host, config.web_port, "--web-port")
    check_port_free(config.host, config.grpc_port, "--grpc-port")
    if bag is not None:
        replay(bag, config, duration_s, screenshot_png, until_s)
        return
    code = live(config, duration_s)
    if code:
        raise click.exceptions.Exit(code)
