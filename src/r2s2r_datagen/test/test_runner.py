import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from datagen_support import NOMINAL
from r2s2r_datagen.config import GenerateConfig
from r2s2r_datagen.configurations import load_datagen_config, make_jobs, prepare_configurations
from r2s2r_datagen.generator import EpisodeJob
from r2s2r_datagen.ledger import Ledger
from r2s2r_datagen.merge import merge_configuration
from r2s2r_datagen.runner import run_generation
from r2s2r_datagen.worker import WorkerSetup, WorkerState
from r2s2r_testing.generation import OVERRIDES, write_configurations

from r2s2r_dataset import EpisodeDataset


def nominal_planner_jobs(
    tmp_path: Path, count: int
) -> tuple[Path, list[EpisodeJob], dict[str, str]]:
    """The first ``count`` jobs of ``nominal_planner``, a run directory and the overrides."""
    configurations_file = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    datagen = load_datagen_config(configurations_file)
    overrides = GenerateConfig(generator_overrides=OVERRIDES).overrides()
    nominal, prepared = prepare_configurations(
        datagen, configurations_file, ["nominal_planner"], generator_overrides=overrides
    )
    jobs = make_jobs(nominal, prepared, range(count), 0, datagen)
    return tmp_path / "run", jobs, overrides


def _episodes_by_index(path: Path) -> dict[int, object]:
    dataset = EpisodeDataset(path)
    out = {}
    for i in range(len(dataset)):
        episode = dataset.episode(i)
        index = episode.metadata.provenance["job"]["episode_index"]
        assert index not in out, f"duplicate episode {index} in {path}"
        out[index] = episode
    return out


def _assert_same_episode(a, b) -> None:  # type: ignore[no-untyped-def]
    for key in a.images:
        np.testing.assert_array_equal(a.images[key], b.images[key])
    np.testing.assert_array_equal(a.joint_pos_rad, b.joint_pos_rad)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.object_pose, b.object_pose)
    np.testing.assert_array_equal(a.timestamps_s, b.timestamps_s)


@pytest.mark.graph
def test_resume_after_kill(tmp_path: Path, configurations_file: Path) -> None:
    write_configurations(configurations_file, NOMINAL, {"planner": {"slow_s": 0.3}})
    run_dir = tmp_path / "run"
    args = [
        sys.executable, "-m", "r2s2r.cli", "generate",
        "--configurations-file", str(configurations_file),
        "-c", "nominal_planner", "-c", "grounded_planner",
        "-n", "2", "-j", "2", "-o", str(run_dir), "--no-progress",
        "--generator", OVERRIDES[0],
    ]  # fmt: skip
    process = subprocess.Popen(
        args, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    ledger = Ledger(run_dir / "ledger.jsonl")
    deadline = time.monotonic() + 40.0
    while len(ledger.records()) < 2:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no episode finished in time"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the run and its workers, mid-way
    process.wait()
    finished_before = {(r["configuration"], r["episode_index"]) for r in ledger.records()}
    assert 2 <= len(finished_before) < 4

    config = GenerateConfig(
        configurations_path=str(configurations_file),
        configurations=["nominal_planner", "grounded_planner"],
        episodes_per_configuration=2,
        workers=2,
        output_dir=str(run_dir),
        generator_overrides=OVERRIDES[:1],
        progress=False,
    )
    summary = run_generation(config)
    assert summary.session == 1
    records = ledger.records()
    keys = [(r["configuration"], r["episode_index"]) for r in records]
    assert len(keys) == len(set(keys)) == 4  # nothing ran twice, nothing is missing
    assert finished_before <= set(keys)
    for item in summary.configurations:
        assert (item.successes, item.failed, item.missing) == (2, 0, 0)
    merged = {name: _episodes_by_index(run_dir / "datasets" / f"{name}.hdf5") for name in
              ("nominal_planner", "grounded_planner")}  # fmt: skip
    assert all(sorted(m) == [0, 1] for m in merged.values())

    # Same seed, same content: regenerate nominal_planner in-process and compare.
    datagen = load_datagen_config(configurations_file)
    nominal, prepared = prepare_configurations(
        datagen, configurations_file, ["nominal_planner"], generator_overrides=config.overrides()
    )
    state = WorkerState(
        WorkerSetup("reference", str(tmp_path / "reference"), {}, config.overrides())
    )
    for job in make_jobs(nominal, prepared, range(2), 0, datagen):
        assert state.run(job).status == "success"
    reference = _episodes_by_index(tmp_path / "reference/shards/nominal_planner")
    for index in range(2):
        _assert_same_episode(merged["nominal_planner"][index], reference[index])


@pytest.mark.graph
def test_crash_timeout_retry_and_bad_input(tmp_path: Path) -> None:
    options = {"hang_episodes": [1], "crash_episodes": [2], "unreachable_episodes": [4]}
    configurations_file = write_configurations(
        tmp_path / "configurations.yaml", NOMINAL, {"planner": {**options, "fail_every": 4}}
    )
    config = GenerateConfig(
        configurations_path=str(configurations_file),
        configurations=["nominal_planner"],
        episodes_per_configuration=5,
        base_seed=10,  # seed 13 (episode 3) is the one the scripted generator drops
        workers=2,
        job_timeout_s=5.0,
        output_dir=str(tmp_path / "run"),
        generator_overrides=OVERRIDES[:1],
        progress=False,
    )
    summary = run_generation(config)
    latest = Ledger(tmp_path / "run" / "ledger.jsonl").latest()
    status = {k[1]: (r["status"], r["reason"], r["total_attempts"]) for k, r in latest.items()}
    assert status[0] == ("success", "success", 1)
    assert status[1] == ("failed", "job_timeout", 2)  # retried once, then failed
    assert status[2] == ("failed", "worker_crashed", 2)
    assert status[3][0] == "failed" and status[3][1] in ("missed_grasp", "dropped")
    assert status[4] == ("skipped", "unreachable_object", 0)
    (item,) = summary.configurations
    assert (item.successes, item.failed, item.skipped, item.attempts) == (1, 3, 1, 6)
    assert item.failure_reasons["job_timeout"] == 1 and item.failure_reasons["worker_crashed"] == 1
    assert item.interrupted == 2
    assert item.dataset_episodes == 1
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["configurations"][0]["yield"] == pytest.approx(1 / 6)


def test_corrupt_shard_is_excluded_from_the_merge(tmp_path: Path) -> None:
    run_dir, jobs, overrides = nominal_planner_jobs(tmp_path, 3)
    states = [WorkerState(WorkerSetup(f"w{i}", str(run_dir), {}, overrides)) for i in range(2)]
    reports = [states[0].run(jobs[0]), states[1].run(jobs[1]), states[0].run(jobs[2])]
    assert [r.shard for r in reports] == [  # one shard per episode, named by worker
        "shards/nominal_planner/shard_w0_e000000.hdf5",
        "shards/nominal_planner/shard_w1_e000001.hdf5",
        "shards/nominal_planner/shard_w0_e000002.hdf5",
    ]
    bad = run_dir / reports[1].shard
    data = bytearray(bad.read_bytes())
    data[: len(data) // 2] = bytes(len(data) // 2)  # superblock and metadata gone
    bad.write_bytes(bytes(data))
    successes = {("nominal_planner", i) for i in range(3)} | {("other", 0)}
    merged = merge_configuration(run_dir, "nominal_planner", successes)
    assert [p.name for p, _ in merged.excluded_shards] == ["shard_w1_e000001.hdf5"]
    assert merged.episodes == 2 and merged.missing == [("nominal_planner", 1)]
    assert sorted(_episodes_by_index(merged.output)) == [0, 2]
    with h5py.File(merged.output, "r") as handle:
        assert sorted(handle["data"]) == ["demo_0", "demo_1"]
        assert handle["data"].attrs["total"] == sum(r.frames for r in (reports[0], reports[2]))


def test_the_merge_is_in_episode_order_whoever_wrote_the_episodes(tmp_path: Path) -> None:
    # Shard names sort by worker: here episode 1's before episode 0's, as after a resume
    # (session s001 writes the episodes the stopped s000 left) or another scheduling.
    run_dir, jobs, overrides = nominal_planner_jobs(tmp_path, 2)
    for worker, job in (("s001w000", jobs[0]), ("s000w000", jobs[1])):
        WorkerState(WorkerSetup(worker, str(run_dir), {}, overrides)).run(job)
    merged = merge_configuration(
        run_dir, "nominal_planner", {("nominal_planner", 0), ("nominal_planner", 1)}
    )
    dataset = EpisodeDataset(merged.output)
    order = [dataset.metadata(i).provenance["job"]["episode_index"] for i in range(len(dataset))]
    assert order == [0, 1]


def test_a_ledger_line_cut_short_by_a_kill_costs_no_later_record(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append({"configuration": "c", "episode_index": 0, "status": "success"})
    with (tmp_path / "ledger.jsonl").open("a") as stream:
        stream.write('{"configuration": "c", "episode_index": 1, "sta')  # the kill
    ledger.append({"configuration": "c", "episode_index": 2, "status": "success"})
    assert sorted(ledger.latest()) == [("c", 0), ("c", 2)]


@pytest.mark.graph
def test_ray_local_path(tmp_path: Path, configurations_file: Path) -> None:
    pytest.importorskip("ray")
    config = GenerateConfig(
        configurations_path=str(configurations_file),
        configurations=["nominal_planner"],
        episodes_per_configuration=2,
        workers=2,
        ray_address="local",
        output_dir=str(tmp_path / "a-deliberately-long-run-directory-name-for-ray-sockets"),
        generator_overrides=OVERRIDES[:1],
        progress=False,
    )
    summary = run_generation(config)
    (item,) = summary.configurations
    assert summary.executor == "ray"
    assert (item.successes, item.dataset_episodes) == (2, 2)
    run_dir = Path(summary.run_dir)
    assert any((run_dir / "ray").glob("session_*"))  # Ray's temp dir lives in the run dir
    workers = {r["worker"] for r in Ledger(run_dir / "ledger.jsonl").records()}
    assert workers <= {"s000w000", "s000w001"}
