"""One process at a time in an output folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from r2s2r_common.errors import BadInputError
from r2s2r_common.folder_lock import LOCK_NAME, FolderInUseError, hold_folder_lock

pytestmark = pytest.mark.graph  # a second process holds the lock

HOLD = """
import sys, time
from r2s2r_common.folder_lock import hold_folder_lock
hold_folder_lock(sys.argv[1], "the other run")
print("held", flush=True)
time.sleep(30)
"""


def test_a_second_process_is_refused_naming_the_first(tmp_path: Path) -> None:
    folder = tmp_path / "experiment"
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "held"
        with pytest.raises(FolderInUseError, match=rf"in use by the other run \(pid {other.pid}\)"):
            hold_folder_lock(folder, "this run")
        assert issubclass(FolderInUseError, BadInputError)  # exit code 2: the user can fix it
    finally:
        other.kill()
        other.wait()
    hold_folder_lock(folder, "this run")  # freed by the kernel when the holder died
    hold_folder_lock(folder, "this run")  # again in the same process: a no-op
    assert "this run" in (folder / LOCK_NAME).read_text()
