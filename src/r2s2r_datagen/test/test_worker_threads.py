"""A generation worker process runs its libraries on one thread each (``use_one_core``).

Software GL drawing in the worker's own thread and OpenCV running serially must leave every
episode as the default threading makes it: the same rendered pixels, the same perception.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
from datagen_support import NOMINAL
from r2s2r_datagen.compare import compare_datasets
from r2s2r_datagen.worker import SOFTWARE_RASTER_THREADS, use_one_core
from r2s2r_testing.generation import write_configurations

pytestmark = pytest.mark.graph  # child processes

_EPISODES = """
import sys
from pathlib import Path
from r2s2r_datagen.configurations import load_datagen_config, make_jobs, prepare_configurations
from r2s2r_datagen.worker import WorkerSetup, WorkerState, use_one_core
from r2s2r_testing.generation import FACTORY

one_core, config_path, run_dir = sys.argv[1] == "one_core", sys.argv[2], sys.argv[3]
if one_core:
    use_one_core()
datagen = load_datagen_config(config_path)
overrides = {"planner": FACTORY}
names = ["nominal_planner"]
nominal, prepared = prepare_configurations(datagen, config_path, names, None, overrides)
jobs = make_jobs(nominal, prepared, [0, 1], 0, datagen)
state = WorkerState(WorkerSetup("w", run_dir, datagen.behavior_options, overrides, jobs[0]))
print(*(state.run(job).status for job in jobs))
"""


def test_use_one_core_sets_the_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LP_NUM_THREADS", "unset after the test")
    monkeypatch.delenv("LP_NUM_THREADS")
    threads = cv2.getNumThreads()
    try:
        use_one_core()
        assert os.environ["LP_NUM_THREADS"] == SOFTWARE_RASTER_THREADS
        assert cv2.getNumThreads() == 1
    finally:
        cv2.setNumThreads(threads)


def test_one_core_worker_makes_the_same_episodes(tmp_path: Path) -> None:
    """Two episodes with perception on, rendered and perceived with and without it."""
    configurations = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    env = {k: v for k, v in os.environ.items() if k != "LP_NUM_THREADS"}
    env["MUJOCO_GL"] = "egl"
    shards = {}
    for mode in ("default", "one_core"):
        run_dir = tmp_path / mode
        done = subprocess.run(
            [sys.executable, "-c", _EPISODES, mode, str(configurations), str(run_dir)],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == ["success", "success"], done.stdout
        shards[mode] = sorted((run_dir / "shards" / "nominal_planner").glob("*.hdf5"))
    for default, one_core in zip(shards["default"], shards["one_core"], strict=True):
        comparison = compare_datasets(default, one_core)
        assert comparison.differences == [] and comparison.arrays_compared > 0
        assert comparison.same(tolerance=0.0)
