"""The one crash-safe writer: whole or not at all, the temporary file removed on failure."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from r2s2r_common.files import (
    move_into_place,
    write_atomic,
    write_json_atomic,
    write_yaml_atomic,
)

from r2s2r_common import files


def test_write_atomic_writes_text_and_bytes_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    assert write_atomic(target, "one\n") == target
    assert target.read_text() == "one\n"
    write_atomic(str(target), b"\x00two")
    assert target.read_bytes() == b"\x00two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_write_atomic_gives_the_mode_a_plain_open_gives(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = write_atomic(tmp_path / "atomic.txt", "x")
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old")

    def full_disk(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "a.txt", "x")


def test_json_and_yaml_writers(tmp_path: Path) -> None:
    data = {"b": 1, "a": [1, 2]}
    path = write_json_atomic(tmp_path / "a.json", data)
    assert path.read_text() == json.dumps(data, indent=2) + "\n"
    yaml_path = write_yaml_atomic(tmp_path / "a.yaml", data, header="# made by a test\n")
    assert yaml_path.read_text() == "# made by a test\nb: 1\na:\n- 1\n- 2\n"


def test_move_into_place_renames_a_file_and_a_folder(tmp_path: Path) -> None:
    partial = tmp_path / ".data.hdf5.partial"
    partial.write_bytes(b"streamed")
    (tmp_path / "data.hdf5").write_bytes(b"old")
    assert move_into_place(partial, tmp_path / "data.hdf5") == tmp_path / "data.hdf5"
    assert (tmp_path / "data.hdf5").read_bytes() == b"streamed" and not partial.exists()
    staging = tmp_path / ".checkpoint.tmp"
    (staging / "inner").mkdir(parents=True)
    (staging / "inner" / "model.bin").write_bytes(b"w")
    move_into_place(staging, tmp_path / "checkpoint")
    assert (tmp_path / "checkpoint" / "inner" / "model.bin").read_bytes() == b"w"
    assert not staging.exists()
