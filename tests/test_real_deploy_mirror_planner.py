"""``real_deploy mirror:=true planner:=true``: the sim bridge and the planner in the launched graph.

The graph's definition (nodes only when asked, on the grounded world of the cell's artifact,
the copy comparing the cell's TF instead of copying it), and the graph itself under the one
supervisor (``r2s2r launch``) on the grounded twin: the mirror's live check below its limits,
and a pick planned through ``/planner/plan_pick`` that the twin's truth judges a success.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from r2s2r.graph import load_graph, resolve_graph

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config"
ARTIFACT = REPO / "tests" / "data" / "grounding_default_twin.yaml"


def test_mirror_and_planner_start_only_when_asked_on_the_grounded_world() -> None:
    spec = load_graph("real_deploy", CONFIG)
    plain = {node.name for node in resolve_graph(spec, {}, CONFIG)}
    assert not {"sim_bridge", "planner"} & plain
    nodes = {
        node.name: node
        for node in resolve_graph(
            spec,
            {"mirror": "true", "planner": "true", "grounding_artifact": str(ARTIFACT)},
            CONFIG,
        )
    }
    bridge, planner = nodes["sim_bridge"], nodes["planner"]
    assert bridge.parameter_overrides == {
        "mode": "mirror",
        "use_sim_time": True,
        "grounding_artifact": str(ARTIFACT),
        "mounts_from_tf": False,
    }
    assert planner.parameter_overrides == {
        "use_sim_time": True,
        "grounding_artifact": str(ARTIFACT),
    }
    assert not bridge.required and not planner.required  # checks beside the cell


@pytest.mark.graph
@pytest.mark.slow
def test_mirror_follows_the_grounded_twin_and_a_planned_pick_succeeds(tmp_path: Path) -> None:
    pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build")
    from r2s2r_common.ros_domain import claim_domain
    from r2s2r_testing.cell_probe import CellProbe, source_share_overlay
    from r2s2r_testing.ros import ros_context_of

    from r2s2r.pipeline.stages import grounded_cell_arguments

    limits = yaml.safe_load((CONFIG / "nodes" / "sim_bridge.yaml").read_text())["sim_bridge"][
        "ros__parameters"
    ]
    grounded = grounded_cell_arguments(ARTIFACT, tmp_path / "export")
    arguments = ["mirror:=true", "planner:=true", *(f"{k}:={v}" for k, v in grounded.items())]
    prefix = source_share_overlay(tmp_path / "prefix", REPO)
    claim = claim_domain()
    env = {
        **os.environ,
        "ROS_DOMAIN_ID": str(claim.domain_id),
        "AMENT_PREFIX_PATH": f"{prefix}{os.pathsep}{os.environ['AMENT_PREFIX_PATH']}",
    }
    log = (tmp_path / "launch.log").open("w")
    launch = subprocess.Popen(
        [sys.executable, "-m", "r2s2r.cli", "launch", "real_deploy", *arguments,
         "--no-progress", "--log-dir", str(tmp_path / "logs")],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    outcomes = []
    try:
        with ros_context_of(claim.domain_id) as context:
            probe = CellProbe(context)
            try:
                probe.wait_for(
                    lambda: any(
                        r.figure("palm_tf_error_m") is not None for r in probe.mirror_readings()
                    ),
                    180.0,
                    "the mirror's palm check",
                )
                for seed in range(3):  # a plan refused as late (a loaded machine) is retried
                    trial = probe.start_trial(seed)
                    started = len(probe.mirror_readings())
                    probe.wait_for_track(60.0)
                    time.sleep(2.0)  # a few tracks: the tracker's estimate settles
                    sent, message = probe.plan_pick()
                    outcome = probe.wait_for_outcome(trial, 90.0)
                    outcomes.append((sent, message, outcome.success, outcome.reason))
                    if sent:
                        break
                readings = probe.mirror_readings()[started:]
            finally:
                probe.close()
    finally:
        os.killpg(launch.pid, signal.SIGINT)
        launch.wait(90)
        log.close()
        claim.release()
    output = (tmp_path / "launch.log").read_text()
    sent, message, success, reason = outcomes[-1]
    assert sent, (outcomes, output[-2000:])
    assert success, (message, reason)
    palm = [r.figure("palm_tf_error_m") for r in readings]
    objects = [e for r in readings if (e := r.figure("object_error_m")) is not None]
    assert palm and max(p for p in palm if p is not None) < limits["palm_error_warn_m"]
    assert objects, "no tracked object was compared with the mirror's belt"
    assert max(objects) < limits["object_error_warn_m"], objects
    assert any(r.level == 0 for r in readings), [r.message for r in readings]
    assert launch.returncode == 0, output[-2000:]
