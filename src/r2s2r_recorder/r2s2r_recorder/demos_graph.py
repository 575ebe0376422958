"""The ``record_demos`` graph: its launch arguments, its ROS domain, and how a run of it ended.

The graph is run by the :data:`RecordGraph` the bring-up gives
:func:`r2s2r_recorder.demos.record_demos`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from r2s2r_common.ros_domain import claim_domain

from .demos_config import RecordDemosConfig, RecordDemosError

GRAPH_NAME = "record_demos"


@dataclass
class GraphRun:
    """How the recording graph ended.

    Attributes:
        exit_code: The supervisor's: 0 when the demonstrator finished, 1 when a node died.
        timed_out: Stopped at the wall-clock limit.
        interrupted: Stopped by SIGINT/SIGTERM.
        wall_s: Wall time of the graph.
        log_dir: Per-node logs.

    """

    exit_code: int
    timed_out: bool
    interrupted: bool
    wall_s: float
    log_dir: Path

    @property
    def ok(self) -> bool:
        """The demonstrator finished its trials."""
        return self.exit_code == 0 and not self.timed_out and not self.interrupted


def private_domain_id() -> int:
    """Return a ROS domain id for a self-contained graph, claimed for this process.

    The id is held with a lock file while this process lives
    (:func:`r2s2r_common.ros_domain.claim_domain`), so two recordings (or a recording and a
    grounding) on one host never share a domain.
    """
    return claim_domain().domain_id


def record_graph_arguments(config: RecordDemosConfig, twin_path: Path) -> dict[str, str]:
    """Return the launch arguments of the ``record_demos`` graph for a recording.

    The recording's own, then the ``launch_args`` given on top (passed on unread).

    Raises:
        RecordDemosError: A launch argument that is not ``NAME:=VALUE``.

    """
    arguments = {
        "trials": str(config.attempts_cap),
        "successes": str(config.successes),
        "seed": str(config.seed),
        "condition": config.condition,
        "out_dir": str(config.bags_path),
        "twin_config": str(twin_path),
        "real_time_factor": str(config.real_time_factor),
    }
    for token in config.launch_args:
        name, separator, value = token.partition(":=")
        if not separator or not name:
            raise RecordDemosError(f"bad launch argument '{token}': expected NAME:=VALUE")
        arguments[name] = value
    return arguments


RecordGraph = Callable[[dict[str, str], Path, float, float, TextIO | None, int], GraphRun]
"""Runs the ``record_demos`` graph until the demonstrator is done, the wall-clock limit or a
signal: ``(launch arguments, log dir, wall limit s, grace period s, console, ROS domain id) ->
GraphRun``.
The bring-up passes its supervisor (``r2s2r.pipeline.demos.run_record_graph``)."""
