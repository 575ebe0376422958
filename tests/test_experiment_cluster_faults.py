"""``r2s2r experiment`` past one machine, bad input (issue 38): a Ray address that does not
answer, and a disk that fills during generation.

- ``--ray-address`` where nothing listens: one line naming the address within 30 s, exit 1, and
  no stage run or recorded (the address is checked before the first stage).
- The disk fills while the generation stage runs: a real one, a small tmpfs mounted for the
  test (root and ``mount -t tmpfs`` needed, else skipped; the shard writer's ENOSPC handling is
  also tested in process in tests/test_generate_disk_full.py). The experiment directory lives
  on it; once the first episode's shard is written, a file takes all but ~100 kB of the rest.
  The experiment must stop with one line naming the problem and the folder, exit 1, leave the
  generation stage pending (no ``stage.json``: no corrupt stage marked done) and no shard
  under a temporary name; once the file is gone, the same command resumes the stage (the
  episodes already written are kept) and finishes.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from r2s2r_testing.interrupt import StoppableCommand
from r2s2r_testing.ray_cluster import free_port

pytestmark = pytest.mark.graph

REPO = Path(__file__).resolve().parents[1]
CONFIGURATION = "nominal_planner"
EPISODES = 6
GENERATION = f"generation/{CONFIGURATION}"


def write_config(folder: Path) -> Path:
    """A tiny experiment (the smoke preset, one planner configuration) and its inputs."""
    from r2s2r_testing.episodes import write_robot_dataset

    twin = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    twin["task"]["trial_timeout_s"] = 0.5
    twin["randomization"]["arrival_time_s"] = [0.0, 0.0]
    (folder / "short_twin.yaml").write_text(yaml.safe_dump(twin))
    config = yaml.safe_load((REPO / "config" / "experiment" / "smoke.yaml").read_text())
    config.update(
        real_dataset=str(write_robot_dataset(folder / "real.hdf5", "real", 0, episodes=3)),
        configurations=[CONFIGURATION],
        capacity_configuration="",
        sim_episodes_per_configuration=EPISODES,
        generation_workers=2,
        train_steps=10,
        batch_size=4,
        trials_per_condition={"nominal": 1, "lighting": 0, "belt_speed": 0, "unseen_object": 0},
        twin_config=str(folder / "short_twin.yaml"),
    )
    config["train_overrides"].update(checkpoint_every_steps=10, num_threads=1)
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def experiment(config: Path, out: Path, *extra: str) -> StoppableCommand:
    args = ["experiment", "--config", str(config), "--out", str(out), "--no-progress", *extra]
    return StoppableCommand(args, config.parent, {"OMP_NUM_THREADS": "1"})


def error_lines(command: StoppableCommand) -> list[str]:
    return [line for line in command.stderr.splitlines() if "error" in line.lower()]


def test_ray_address_that_does_not_answer(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    command = experiment(config, tmp_path / "exp", "--ray-address", address)
    code = command.finish(timeout_s=120.0)
    assert time.monotonic() - started < 30.0, command.tail()
    assert code == 1, command.tail()
    assert "Traceback" not in command.stderr, command.tail()
    lines = error_lines(command)
    assert len(lines) == 1 and address in lines[0] and "does not answer" in lines[0], lines
    assert not list((tmp_path / "exp").rglob("stage.json"))
    assert not list((tmp_path / "exp").rglob("stage.pending"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 MB tmpfs (skips the test where mounting is not allowed)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = os.geteuid() == 0 and (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(folder)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("needs root and mount -t tmpfs (tests/test_generate_disk_full.py injects)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(path: Path, leave_bytes: int) -> None:
    """Write ``path`` until its disk is full, then give back ``leave_bytes``."""
    chunk = b"\0" * (1 << 20)
    with path.open("wb", buffering=0) as stream:
        try:
            while True:
                stream.write(chunk)
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise
        stream.truncate(max(0, stream.tell() - leave_bytes))


def _shards(out: Path) -> list[Path]:
    return sorted((out / GENERATION / "run" / "shards").glob("*/*"))


@pytest.mark.slow
def test_disk_fills_during_generation_then_the_same_command_resumes(
    tmp_path: Path, small_disk: Path
) -> None:
    config = write_config(tmp_path)
    out = small_disk / "exp"
    filler = small_disk / "filler"
    command = experiment(config, out)
    command.wait_for(
        lambda: any(not p.name.startswith(".") for p in _shards(out)), 300.0, "a first shard"
    )
    fill(filler, leave_bytes=100_000)
    code = command.finish(timeout_s=600.0)
    assert code == 1, command.tail()
    assert "Traceback" not in command.stderr, command.tail()
    lines = error_lines(command)
    assert len(lines) == 1, command.tail()
    assert "no space left on device" in lines[0] or "disk full" in lines[0], lines
    assert str(small_disk) in lines[0], lines
    assert not (out / GENERATION / "stage.json").exists()  # not marked done
    assert (out / GENERATION / "stage.pending").exists()
    assert not [p for p in _shards(out) if p.name.startswith(".")]  # no partial shard
    kept = {p.name for p in _shards(out)}
    assert kept

    filler.unlink()
    resumed = experiment(config, out)
    assert resumed.finish(timeout_s=900.0) == 0, resumed.tail()
    assert f"[{GENERATION}] running (resuming)" in resumed.stdout, resumed.tail()
    assert kept <= {p.name for p in _shards(out)}  # the finished episodes were kept
    record = json.loads((out / GENERATION / "stage.json").read_text())
    assert record["info"]["successes"] + record["info"]["failed"] == EPISODES, record["info"]
