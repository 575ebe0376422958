"""One clock per graph: where the real twin is the cell, nodes that stamp their output use its.

The twin stamps everything with simulated time and publishes it on ``/clock``. ``belt_speed``
stamps ``/belt/speed`` from its own clock and predicts its filter to it; on the wall clock
beside the twin, the evaluate graph's belt speed once followed a belt-speed change over minutes
instead of 0.1 s (the in-process evaluator and the ROS graph then disagreed from a trial's
first second). Every graph that starts the twin runs ``belt_speed`` with ``use_sim_time``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from r2s2r.graph import load_graph, resolve_graph

GRAPHS = sorted(path.stem for path in (Path(__file__).parents[1] / "config/graphs").glob("*.yaml"))


@pytest.mark.parametrize("graph", GRAPHS)
def test_belt_speed_runs_on_the_twins_clock_wherever_the_twin_runs(graph: str) -> None:
    nodes = {node.name: node for node in resolve_graph(load_graph(graph), {})}
    if "real_twin" not in nodes or "belt_speed" not in nodes:
        pytest.skip(f"{graph}: no twin and belt_speed together")
    assert nodes["belt_speed"].parameter_overrides.get("use_sim_time") is True, graph


def test_on_hardware_belt_speed_keeps_the_wall_clock() -> None:
    nodes = {n.name: n for n in resolve_graph(load_graph("real_deploy"), {"use_twin": "false"})}
    assert "real_twin" not in nodes
    assert nodes["belt_speed"].parameter_overrides.get("use_sim_time") is False
