"""The ``record_demos`` graph under the one supervisor: what ``r2s2r record-demos`` records with.

:func:`run_record_graph` is the :data:`r2s2r_recorder.demos_graph.RecordGraph` the bring-up
gives the recorder's procedure (:func:`r2s2r_recorder.demos.record_demos`): it starts the graph
through :class:`r2s2r.supervisor.GraphSupervisor` in the given ROS domain and waits until the
demonstrator has run its trials (the required node that ends the graph), the wall-clock limit,
or SIGINT/SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from r2s2r_common.ros_domain import discovery_range
from r2s2r_recorder.demos import RecordDemosResult, record_demos
from r2s2r_recorder.demos_config import RecordDemosConfig
from r2s2r_recorder.demos_graph import GRAPH_NAME, GraphRun

from r2s2r.graph import load_graph, resolve_graph
from r2s2r.supervisor import GraphSupervisor, check_artifact_arguments


@contextlib.contextmanager
def _stop_on_signals(request_stop: Any, flag: dict[str, bool]) -> Iterator[None]:
    """Route SIGINT/SIGTERM to ``request_stop`` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(*_: Any) -> None:
        flag["interrupted"] = True
        request_stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_record_graph(
    arguments: dict[str, str],
    log_dir: Path,
    wall_limit_s: float,
    grace_period_s: float,
    console: TextIO | None,
    domain_id: int,
) -> GraphRun:
    """Run the ``record_demos`` graph until the demonstrator is done, the limit, or a signal.

    Args:
        arguments: The graph's launch arguments.
        log_dir: Folder of the per-node logs.
        wall_limit_s: Wall-clock limit; the graph is stopped when it is reached.
        grace_period_s: Time a node gets to stop (see :class:`GraphSupervisor`).
        console: Where the supervisor's lines and the nodes' problems go (stdout when None).
        domain_id: ROS_DOMAIN_ID of the nodes (discovery on localhost only).

    Raises:
        r2s2r.graph.GraphError: Bad graph arguments or a missing executable.
        r2s2r_common.config.ConfigError: A grounding artifact argument names a bad artifact.

    """
    nodes = resolve_graph(load_graph(GRAPH_NAME), arguments)
    check_artifact_arguments(arguments)
    env = {"ROS_DOMAIN_ID": str(domain_id), "ROS_AUTOMATIC_DISCOVERY_RANGE": discovery_range()}
    supervisor = GraphSupervisor(nodes, log_dir, grace_period_s, console=console, env=env)
    flags = {"timed_out": False, "interrupted": False}

    def on_timeout() -> None:
        flags["timed_out"] = True
        supervisor.say(f"wall-clock limit of {wall_limit_s:.0f} s reached; stopping")
        supervisor.request_stop()

    timer = threading.Timer(wall_limit_s, on_timeout)
    timer.daemon = True
    started = time.monotonic()
    with _stop_on_signals(supervisor.request_stop, flags):
        supervisor.start()
        timer.start()
        try:
            code = supervisor.wait()
        finally:
            timer.cancel()
    return GraphRun(
        code, flags["timed_out"], flags["interrupted"], time.monotonic() - started, log_dir
    )


def record_demos_on_twin(
    config: RecordDemosConfig, console: TextIO | None = None, log_root: Path | None = None
) -> RecordDemosResult:
    """Record demonstrations on the twin (:func:`r2s2r_recorder.demos.record_demos`).

    The ``record_demos`` graph is run by :func:`run_record_graph`.
    """
    return record_demos(config, run_record_graph, console, log_root)
