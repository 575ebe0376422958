"""Fault injection of bag → dataset conversion, run as a user would (issue 36).

Each test starts ``r2s2r`` as a subprocess on bags from :mod:`r2s2r_testing.bags` and spoils
something on purpose: SIGKILL once the first episode is written (a fresh conversion and an
``--append``), a damaged bag among good ones, ``--append`` of episodes the file holds, the same
bag given twice, a NaN in a dataset. What a user must see: one line on stderr naming the thing,
a non-zero exit where work failed, nothing lost, nothing duplicated, nothing that reads as
complete when it is not.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from r2s2r_recorder.bag_to_dataset import bag_content_hash
from r2s2r_testing.bags import EpisodeSpec, write_episode_bag

from r2s2r_dataset import DATA_GROUP, EpisodeDataset, partial_path, read_manifest

TRACEBACK = "Traceback (most recent call last)"

pytestmark = pytest.mark.graph  # every test runs the CLI as a process, as a user does


def r2s2r(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``r2s2r ARGS`` in ``cwd`` and return what it did."""
    return subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def stderr_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert TRACEBACK not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.strip()]


def kill_after_first_episode(cwd: Path, *args: str) -> None:
    """Start ``r2s2r ARGS``, SIGKILL it once it reports its first converted episode."""
    process = subprocess.Popen(
        [sys.executable, "-m", "r2s2r.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("converted "):
                process.send_signal(signal.SIGKILL)
                break
        assert process.wait(timeout=60) == -signal.SIGKILL, "finished before the kill"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def manifest_hashes(path: Path) -> list[str]:
    with h5py.File(path, "r") as handle:
        entries = read_manifest(handle[DATA_GROUP])
    assert entries is not None
    return [entry.content_hash for entry in entries]


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six good episode bags under ``bags/``, and ``more/`` with three others."""
    root = tmp_path_factory.mktemp("conversion")
    for i in range(6):
        write_episode_bag(root / "bags" / f"episode_{i:06d}", EpisodeSpec())
    for i in range(3):
        spec = EpisodeSpec(duration_ns=(16 + i) * 10**8)
        write_episode_bag(root / "more" / f"episode_{i:06d}", spec)
    return root


@pytest.fixture
def work(bags: Path, tmp_path: Path) -> Path:
    shutil.copytree(bags / "bags", tmp_path / "bags")
    shutil.copytree(bags / "more", tmp_path / "more")
    return tmp_path


def test_killed_conversion_is_flagged_and_rerun_completes_once(work: Path) -> None:
    kill_after_first_episode(work, "bag2dataset", "bags", "-o", "ds.hdf5")
    # Nothing reads as complete: no ds.hdf5, its partial file is named.
    assert not (work / "ds.hdf5").exists()
    assert partial_path(work / "ds.hdf5").exists()
    info = r2s2r(work, "dataset", "info", "ds.hdf5")
    assert info.returncode != 0
    (line,) = stderr_lines(info)
    assert "not written" in line and ".ds.hdf5.partial is an unfinished write" in line
    # The same command again resumes and completes: each bag once.
    rerun = r2s2r(work, "bag2dataset", "bags", "-o", "ds.hdf5")
    assert rerun.returncode == 0, rerun.stderr
    assert "already converted" in rerun.stdout or "discarded" in rerun.stdout
    assert not partial_path(work / "ds.hdf5").exists()
    expected = sorted(bag_content_hash(b) for b in sorted((work / "bags").iterdir()))
    assert sorted(manifest_hashes(work / "ds.hdf5")) == expected
    with EpisodeDataset(work / "ds.hdf5") as dataset:
        assert len(dataset) == 6
        ids = sorted(dataset.metadata(i).provenance["episode_id"] for i in range(6))
    assert ids == [f"episode_{i:06d}" for i in range(6)]
    info = r2s2r(work, "dataset", "info", "ds.hdf5")
    assert info.returncode == 0 and "INCOMPLETE" not in info.stdout
    assert "episodes  6" in info.stdout


def test_a_conversion_killed_as_it_opens_its_file_does_not_block_the_rerun(work: Path) -> None:
    """Killed the moment its partial file appears (a few bytes of HDF5 header): the rerun
    recognises the leftover as nobody's and completes."""
    process = subprocess.Popen(
        [sys.executable, "-m", "r2s2r.cli", "bag2dataset", "bags", "-o", "ds.hdf5"],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    partial = partial_path(work / "ds.hdf5")
    try:
        deadline = time.monotonic() + 60.0
        while not partial.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert partial.exists() and not (work / "ds.hdf5").exists()
    rerun = r2s2r(work, "bag2dataset", "bags", "-o", "ds.hdf5")
    assert rerun.returncode == 0, rerun.stderr
    assert not partial.exists() and (work / "ds.hdf5").is_file()


def test_killed_append_leaves_the_dataset_untouched_and_rerun_completes(work: Path) -> None:
    first = r2s2r(work, "bag2dataset", "bags", "-o", "ds.hdf5")
    assert first.returncode == 0, first.stderr
    before = file_digest(work / "ds.hdf5")
    kill_after_first_episode(work, "bag2dataset", "more", "-o", "ds.hdf5", "--append")
    assert file_digest(work / "ds.hdf5") == before
    info = r2s2r(work, "dataset", "info", "ds.hdf5")
    assert info.returncode == 1
    assert "INCOMPLETE: " in info.stdout and "an append to ds.hdf5 was interrupted" in info.stdout
    (line,) = stderr_lines(info)
    assert "ds.hdf5 is incomplete" in line and "unfinished write" in line
    rerun = r2s2r(work, "bag2dataset", "more", "-o", "ds.hdf5", "--append")
    assert rerun.returncode == 0, rerun.stderr
    hashes = manifest_hashes(work / "ds.hdf5")
    assert len(hashes) == len(set(hashes)) == 9
    info = r2s2r(work, "dataset", "info", "ds.hdf5")
    assert info.returncode == 0 and "INCOMPLETE" not in info.stdout


def test_damaged_bag_is_named_and_the_others_convert(work: Path) -> None:
    # Every tracked-object message's frame_id gets an impossible string length: the reader's
    # CDR decoder raises (rosbags' SerdeError, not a ValueError).
    mcap = work / "bags/episode_000002/episode_000002.mcap"
    data = mcap.read_bytes()
    pattern = b"\x0a\x00\x00\x00base_link"
    assert data.count(pattern) > 0
    mcap.write_bytes(data.replace(pattern, b"\xff\xff\xff\x7fbase_link"))
    result = r2s2r(work, "bag2dataset", "bags", "-o", "ds.hdf5")
    assert result.returncode == 1
    (line,) = stderr_lines(result)
    assert "5 of 6 bags converted" in line and "1 unreadable: bags/episode_000002" in line
    assert "error   bags/episode_000002: " in result.stdout
    with EpisodeDataset(work / "ds.hdf5") as dataset:
        ids = [dataset.metadata(i).provenance["episode_id"] for i in range(len(dataset))]
    assert ids == [f"episode_{i:06d}" for i in (0, 1, 3, 4, 5)]
    assert not partial_path(work / "ds.hdf5").exists()


def test_append_of_episodes_present_is_refused(work: Path) -> None:
    assert r2s2r(work, "bag2dataset", "bags", "-o", "ds.hdf5").returncode == 0
    before = file_digest(work / "ds.hdf5")
    # A copy of a converted bag under another name is the same episode.
    shutil.copytree(work / "bags/episode_000001", work / "more/copy_of_1")
    result = r2s2r(work, "bag2dataset", "more", "bags/episode_000004", "-o", "ds.hdf5", "--append")
    assert result.returncode == 2
    (line,) = stderr_lines(result)
    assert "holds 2 of these episodes already" in line
    assert "bags/episode_000004 (episode episode_000004, demo_4)" in line
    assert "more/copy_of_1 (episode episode_000001, demo_1)" in line
    assert file_digest(work / "ds.hdf5") == before
    assert not partial_path(work / "ds.hdf5").exists()


def test_same_bag_twice_is_converted_once(work: Path) -> None:
    result = r2s2r(work, "bag2dataset", "bags", "bags/episode_000003", "-o", "ds.hdf5")
    assert result.returncode == 0, result.stderr
    assert (
        "duplicate bags/episode_000003: same content as bags/episode_000003, converted once"
        in result.stdout
    )
    hashes = manifest_hashes(work / "ds.hdf5")
    assert len(hashes) == len(set(hashes)) == 6


def test_nan_in_a_dataset_is_refused_naming_file_episode_and_field(work: Path) -> None:
    assert r2s2r(work, "bag2dataset", "bags", "-o", "ds.hdf5").returncode == 0
    with h5py.File(work / "ds.hdf5", "r+") as handle:
        actions = handle["data/demo_2/actions"]
        values = actions[...]
        values[3, 1] = np.inf
        actions[...] = values
    from r2s2r_common.errors import describe
    from r2s2r_policy.data.sources import HDF5EpisodeSource

    from r2s2r_dataset import DatasetError

    source = HDF5EpisodeSource(work / "ds.hdf5")
    source.low_dim(1)
    with pytest.raises(DatasetError) as raised:
        source.low_dim(2)
    source.close()
    code, line = describe(raised.value)
    assert code == 2
    assert f"{work / 'ds.hdf5'} episode demo_2: actions: 1 NaN/Inf values" in line
    assert "the first at frame 3" in line
