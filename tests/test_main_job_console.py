"""The main job's console for a cached run: its stages, the table, no child log noise, one screen.

The sim_generate node of config/graphs/sim_generate.yaml (same executable, parameter file and
console setting) on one small configuration, started twice with `r2s2r launch`: the second run
finds everything done and must fit on one screen.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.graph

ROOT = Path(__file__).resolve().parent.parent
SCREEN_LINES = 40


def _graph(tmp_path: Path) -> Path:
    spec = yaml.safe_load((ROOT / "config" / "graphs" / "sim_generate.yaml").read_text())
    (node,) = spec["nodes"]
    params = tmp_path / "small.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "sim_generate": {
                    "ros__parameters": {
                        "configurations": ["nominal_planner"],
                        "episodes_per_configuration": 1,
                        "workers": 1,
                        "output_dir": str(tmp_path / "run"),
                        "prepare_demos": False,
                        "prepare_grounding": False,
                    }
                }
            }
        )
    )
    node["parameters"] = [str(ROOT / "config" / "nodes" / "sim_generate.yaml"), str(params)]
    node.pop("parameter_overrides")
    graph = tmp_path / "small_sim_generate.yaml"
    graph.write_text(
        yaml.safe_dump(
            {"name": "small_sim_generate", "description": spec["description"], "nodes": [node]}
        )
    )
    return graph


def _launch(graph: Path, log_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", "launch", str(graph), "--log-dir", str(log_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_a_cached_main_job_run_fits_on_one_screen(tmp_path: Path) -> None:
    graph = _graph(tmp_path)
    first = _launch(graph, tmp_path / "logs1")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "[generate] running: 1 episodes on 1 workers" in first.stdout, first.stdout
    assert re.search(r"^\[generate\] done in ", first.stdout, re.M), first.stdout

    cached = _launch(graph, tmp_path / "logs2")
    assert cached.returncode == 0, cached.stdout[-3000:] + cached.stderr[-3000:]
    console = cached.stdout + cached.stderr
    lines = [line for line in console.splitlines() if line.strip()]
    assert len(lines) <= SCREEN_LINES, console
    assert "[generate] up to date (1 episodes finished)" in lines, console
    assert any("nominal_planner" in line and "1/1" in line for line in lines), console
    assert not re.search(r"\[\d{9,}\.\d+\]", console), console  # no raw ROS timestamps
    assert "[sim_generate]" not in console  # the job's own output, not prefixed
    repeated = {line for line in lines if lines.count(line) > 1 and "─" not in line}
    assert not repeated, console
    # Everything the node said is in its log, once.
    log = (tmp_path / "logs2" / "sim_generate.log").read_text()
    assert log.count("[generate] up to date (1 episodes finished)") == 1, log
