"""Fault injection: a full disk during `r2s2r generate` (issue 36, case 4).

The disk is a real one that fills up: a small tmpfs mounted for the test when the test runs as
root and may mount (`mount -t tmpfs -o size=...`); elsewhere those tests are skipped and the
in-process ones below (ENOSPC injected into the shard writer by monkeypatching) still run.

What a user must see: one line naming the folder and the space, no traceback, no empty or
partial shard, the lost episodes recorded as ``write_failed`` (not ``worker_crashed``), a
non-zero exit while episodes are missing, and a resume on a disk with room that runs them.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from r2s2r_common.disk import DiskSpaceError, is_disk_full
from r2s2r_common.errors import ExitCode
from r2s2r_datagen.config import GenerateConfig
from r2s2r_datagen.configurations import load_datagen_config, make_jobs, prepare_configurations
from r2s2r_datagen.ledger import Ledger
from r2s2r_datagen.runner import check_disk_space, estimate_episode_bytes
from r2s2r_datagen.worker import WRITE_FAILED, WorkerSetup, WorkerState
from r2s2r_testing.generation import OVERRIDES, write_configurations

REPO = Path(__file__).resolve().parents[1]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
EPISODES = 10


def _mount_tmpfs(folder: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs (skips the test where mounting is not allowed)."""
    folder = tmp_path / "disk"
    if not _mount_tmpfs(folder, "1m"):
        pytest.skip("needs root and mount -t tmpfs (the in-process injection tests still run)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _generate(configurations: Path, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [
        sys.executable, "-m", "r2s2r.cli", "generate",
        "--configurations-file", str(configurations), "-c", "nominal_planner",
        "-n", str(EPISODES), "-j", "2", "-o", str(run_dir), "--no-progress",
        "--generator", OVERRIDES[0], *extra,
    ]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)


def _leftovers(run_dir: Path) -> list[str]:
    """Empty files, and files left under a temporary name (``.x.partial``, ``x.tmp``)."""
    bad = []
    for path in run_dir.rglob("*"):
        if not path.is_file() or path.name == "ledger.jsonl":
            continue
        if path.stat().st_size == 0 or path.name.startswith(".") or path.suffix == ".tmp":
            bad.append(str(path.relative_to(run_dir)))
    return bad


@pytest.mark.graph
def test_disk_fills_during_generate_then_resume(tmp_path: Path, small_disk: Path) -> None:
    configurations = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    run_dir = small_disk / "run"
    filler = small_disk / "filler"
    # Leave room for the run's own files and a few episodes (about 30 kB each at 16 px).
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler.write_bytes(b"\0" * max(0, free - 200_000))

    full = _generate(configurations, run_dir, "--no-disk-check")
    assert full.returncode != 0, full.stderr
    assert "Traceback" not in full.stderr, full.stderr[-3000:]
    errors = [line for line in full.stderr.splitlines() if "ERROR" in line or "error:" in line]
    assert len(errors) == 1, full.stderr[-3000:]
    assert "no space left on device" in errors[0] or "disk full" in errors[0], errors
    assert str(run_dir) in errors[0], errors
    latest = Ledger(run_dir / "ledger.jsonl").latest()
    assert not _leftovers(run_dir), (_leftovers(run_dir), latest, full.stderr)
    reasons = {record["reason"] for record in latest.values()}
    assert "worker_crashed" not in reasons, reasons
    assert len(latest) < EPISODES  # the disk stopped the run
    assert reasons <= {"success", WRITE_FAILED}, reasons

    filler.unlink()  # the disk has room again
    subprocess.run(["mount", "-o", "remount,size=256m", str(small_disk)], check=True)
    resumed = _generate(configurations, run_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "up to date" not in resumed.stderr
    latest = Ledger(run_dir / "ledger.jsonl").latest()
    assert sorted(k[1] for k, r in latest.items() if r["status"] == "success") == list(
        range(EPISODES)
    )
    assert not _leftovers(run_dir)


@pytest.mark.graph
def test_generate_refuses_without_room(tmp_path: Path, small_disk: Path) -> None:
    configurations = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    run_dir = small_disk / "run"
    refused = _generate(configurations, run_dir)
    assert refused.returncode == 1, refused.stderr
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "not enough disk space" in lines[0], refused.stderr
    assert str(run_dir) in lines[0] and "needed" in lines[0] and "free" in lines[0]
    assert not (run_dir / "shards").exists()


# In-process injection (runs everywhere): ENOSPC raised by the shard writer.


def _one_job(tmp_path: Path) -> tuple[WorkerState, object]:
    configurations = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    config = GenerateConfig(
        configurations_path=str(configurations), generator_overrides=OVERRIDES[:1]
    )
    datagen = load_datagen_config(configurations)
    nominal, prepared = prepare_configurations(
        datagen, configurations, ["nominal_planner"], generator_overrides=config.overrides()
    )
    (job,) = make_jobs(nominal, prepared, range(1), 0, datagen)
    state = WorkerState(WorkerSetup("w", str(tmp_path / "run"), {}, config.overrides()))
    return state, job


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        # h5py's wrapping: no errno, the HDF5 error stack's text
        OSError(
            "Can't synchronously write data (file write failed: time = Fri Dec  4, filename = "
            "'x.hdf5', file descriptor = 5, errno = 28, error message = 'No space left on "
            "device', buf = 0x1, total write size = 4096, bytes this sub-write = 4096)"
        ),
    ],
)
def test_write_failure_is_write_failed_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError
) -> None:
    from r2s2r_dataset import EpisodeWriter

    def full(self: EpisodeWriter, episode: object) -> int:
        self._file.flush()
        raise error

    monkeypatch.setattr(EpisodeWriter, "append", full)
    state, job = _one_job(tmp_path)
    report = state.run(job)  # type: ignore[arg-type]
    assert (report.status, report.reason) == ("failed", WRITE_FAILED)
    assert "no space left on device" in report.detail and "\n" not in report.detail
    shards = tmp_path / "run" / "shards" / "nominal_planner"
    assert not list(shards.iterdir())  # neither the shard nor its temporary name


def test_disk_full_recognised() -> None:
    assert is_disk_full(OSError(errno.ENOSPC, "x"))
    assert is_disk_full(RuntimeError("... errno = 28, error message = 'No space left on device'"))
    wrapped = OSError("Can't write data")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert is_disk_full(wrapped)
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))


def test_space_check_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recording = load_datagen_config(
        write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    ).recording
    per_episode = estimate_episode_bytes(recording)
    assert 30_000 < per_episode < 2_000_000  # 16 px: about 30 kB measured, estimated above
    monkeypatch.setattr("r2s2r_datagen.runner.free_bytes", lambda _path: 1_000_000)
    with pytest.raises(DiskSpaceError, match=r"1\.0 MB free, about .* needed"):
        check_disk_space(tmp_path, 10, recording, merge=True)
    monkeypatch.setattr("r2s2r_datagen.runner.free_bytes", lambda _path: 10**12)
    assert check_disk_space(tmp_path, 10, recording, merge=True) == ""


def test_incomplete_run_exit_code() -> None:
    from r2s2r_datagen.summary import ConfigurationSummary

    item = ConfigurationSummary("c", "nominal", "planner", "w", requested=4)
    item.add_records(
        [
            {"status": "success", "reason": "success", "total_attempts": 1},
            {"status": "failed", "reason": WRITE_FAILED, "total_attempts": 1},
            {"status": "failed", "reason": "missed_grasp", "total_attempts": 1},
        ]
    )
    assert item.unfinished == 2  # one lost to the write, one never run
    assert ExitCode.INCOMPLETE != 0
