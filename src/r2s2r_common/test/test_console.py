"""Console helpers: ROS log lines read without their timestamps, problems found, progress lines."""

from __future__ import annotations

import io

import pytest
from r2s2r_common.console import (
    PROGRESS_ENV,
    Progress,
    duration_text,
    format_progress,
    parse_line,
    parse_progress,
    progress_reporter,
)


def test_a_ros_log_line_loses_its_timestamp_and_keeps_its_severity() -> None:
    line = parse_line("[WARN] [1796148686.580408384] [real_twin]: belt slipping\n")
    assert (line.level, line.logger, line.message) == ("WARN", "real_twin", "belt slipping")
    assert line.problem
    assert line.console_text() == "WARN: belt slipping"
    info = parse_line("[INFO] [1796148686.5] [sim_generate]: [demos] up to date")
    assert not info.problem
    assert info.console_text() == "[demos] up to date"
    # The format `r2s2r ground` sets (no timestamp) reads the same.
    assert parse_line("[ERROR] [calibration]: step bins failed").console_text() == (
        "ERROR: step bins failed"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("ValueError: bad world", True),
        ("/x/y.py:3: UserWarning: deprecated", True),
        ("[real_twin] WARN: belt slipping", True),  # forwarded by a nested supervisor
        ("[grounding] [r2s2r launch] ERROR: required node 'x' died", True),
        ("intrinsics: head_camera: rms 0.038 px", False),
        ("record-demos: 6 successful of 6 takes; failure reasons {}", False),
        ("bag2dataset: 6 converted, 0 errors", False),
    ],
)
def test_plain_lines_are_problems_only_when_they_are_errors_or_warnings(
    text: str, problem: bool
) -> None:
    line = parse_line(text)
    assert line.level == ""
    assert line.problem is problem
    assert line.console_text() == text


def test_progress_lines_round_trip_and_other_lines_are_not_progress() -> None:
    update = Progress("generate", 3, 8, "yield 100%", unit="ep")
    assert parse_progress(format_progress(update) + "\n") == update
    ended = Progress("demos", 0, None, "", end=True)
    assert parse_progress(format_progress(ended)) == ended
    assert parse_progress("[generate] done in 12 s") is None
    assert parse_progress(format_progress(update)[:-3]) is None  # cut short: not progress


def test_a_child_writes_progress_lines_only_when_its_parent_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    quiet = io.StringIO()
    bar = progress_reporter("generate", 2, True, quiet)
    bar.update(1)
    bar.close()
    assert quiet.getvalue() == ""  # not a terminal, nobody to draw it

    monkeypatch.setenv(PROGRESS_ENV, "1")
    lines = io.StringIO()
    bar = progress_reporter("generate", 2, True, lines)
    bar.update(1, "half")
    bar.update(2, "all")
    bar.close()
    updates = [parse_progress(text) for text in lines.getvalue().splitlines()]
    assert updates[0] == Progress("generate", 1, 2, "half")
    assert updates[-1] == Progress("generate", 2, 2, "all", end=True)

    disabled = io.StringIO()
    bar = progress_reporter("generate", 2, False, disabled)  # --no-progress
    bar.update(1)
    bar.close()
    assert disabled.getvalue() == ""


def test_durations_read_as_a_person_would_say_them() -> None:
    assert duration_text(4.25) == "4.2 s"
    assert duration_text(42.4) == "42 s"
    assert duration_text(185) == "3 min 05 s"
    assert duration_text(3720) == "1 h 02 min"
