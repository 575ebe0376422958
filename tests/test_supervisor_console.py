"""What `r2s2r launch` shows of its nodes: each line once in the node's log, problems once on the
console without ROS timestamps, the job's own output as is, progress drawn and never logged."""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import pytest
from r2s2r_common.console import PROGRESS_ENV, Progress, format_progress

from r2s2r.graph import ResolvedNode
from r2s2r.supervisor import GraphSupervisor

pytestmark = pytest.mark.graph

INFO = "[INFO] [1796148686.580408384] [talker]: [demos] up to date"
WARN = "[WARN] [1796148686.680408384] [talker]: belt slipping"
PLAIN = "a table row"
ERROR = "ValueError: bad world"


def _talker_script(progress: bool) -> str:
    updates = ""
    if progress:
        lines = [
            format_progress(Progress("generate", 1, 2, "half")),
            format_progress(Progress("generate", 2, 2, "all", end=True)),
        ]
        updates = "".join(f"print({line!r}, flush=True)\n" for line in lines)
    return (
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"print({INFO!r}, flush=True)\n"
        f"print({WARN!r}, file=sys.stderr, flush=True)\n"
        f"{updates}"
        f"print({PLAIN!r}, flush=True)\n"
        f"print({ERROR!r}, file=sys.stderr, flush=True)\n"
        f"print('progress env', os.environ.get({PROGRESS_ENV!r}), flush=True)\n"
    )


@pytest.fixture
def talker_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ament prefix with one package, ``fake_pkg``, whose ``talker`` prints known lines."""
    prefix = tmp_path / "prefix"
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / "fake_pkg"
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    (prefix / "lib" / "fake_pkg").mkdir(parents=True)
    monkeypatch.setenv(
        "AMENT_PREFIX_PATH", f"{prefix}{os.pathsep}{os.environ['AMENT_PREFIX_PATH']}"
    )
    return prefix


def _install(prefix: Path, progress: bool) -> None:
    script = prefix / "lib" / "fake_pkg" / "talker"
    script.write_text(_talker_script(progress))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(
    tmp_path: Path, console: io.StringIO, mode: str = "problems", **options: bool
) -> tuple[str, str]:
    node = ResolvedNode("talker", "fake_pkg", "talker", (), console=mode)  # type: ignore[arg-type]
    supervisor = GraphSupervisor([node], tmp_path / "logs", 2.0, console=console, **options)
    supervisor.start()
    assert supervisor.wait() == 0
    return console.getvalue(), (tmp_path / "logs" / "talker.log").read_text()


def _count(text: str, line: str) -> int:
    return sum(1 for row in text.splitlines() if row.strip() == line)


def test_problems_reach_the_console_once_and_every_line_is_logged_once(
    tmp_path: Path, talker_prefix: Path
) -> None:
    _install(talker_prefix, progress=False)
    console, log = _run(tmp_path, io.StringIO())
    for line in (INFO, WARN, PLAIN, ERROR):
        assert _count(log, line) == 1, log
    assert _count(console, "[talker] WARN: belt slipping") == 1, console
    assert _count(console, f"[talker] {ERROR}") == 1, console
    assert "1796148686" not in console  # no ROS timestamps on the console
    assert "up to date" not in console and PLAIN not in console  # info stays in the log
    assert f"logs in {tmp_path / 'logs'}" in console
    # Not a terminal: nobody draws bars, so the node is not asked for progress lines.
    assert _count(log, "progress env None") == 1


def test_a_plain_node_is_the_console_and_verbose_shows_every_line_once(
    tmp_path: Path, talker_prefix: Path
) -> None:
    _install(talker_prefix, progress=False)
    console, _ = _run(tmp_path, io.StringIO(), mode="plain")
    assert _count(console, "[demos] up to date") == 1, console
    assert _count(console, PLAIN) == 1
    assert _count(console, "WARN: belt slipping") == 1
    assert "1796148686" not in console

    console, _ = _run(tmp_path / "verbose", io.StringIO(), verbose=True)
    assert _count(console, "[talker] [demos] up to date") == 1, console
    assert _count(console, f"[talker] {PLAIN}") == 1
    assert _count(console, "[talker] WARN: belt slipping") == 1


def test_progress_lines_are_drawn_on_a_terminal_and_never_logged(
    tmp_path: Path, talker_prefix: Path
) -> None:
    _install(talker_prefix, progress=True)
    console, log = _run(tmp_path, _Terminal(), mode="plain")
    assert "@r2s2r-progress" not in log and "@r2s2r-progress" not in console
    assert "[generate]" in console  # the bar, drawn here
    assert _count(log, "progress env 1") == 1  # asked for, since this console is a terminal
    assert _count(log, PLAIN) == 1

    console, log = _run(tmp_path / "no_progress", _Terminal(), mode="plain", progress=False)
    assert "[generate]" not in console
    assert _count(log, "progress env None") == 1
