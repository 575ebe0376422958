"""``record-demos`` counting: a fixed number of takes, or until N successful ones (no ROS)."""

from __future__ import annotations

from pathlib import Path

import pytest
from r2s2r_common.config import ConfigError, parse_config
from r2s2r_recorder.demos import recording_identity
from r2s2r_recorder.demos_config import RecordDemosConfig
from r2s2r_recorder.demos_takes import TakeRecord, take_summary, takes_to_convert


def _config(**values: object) -> RecordDemosConfig:
    return parse_config(RecordDemosConfig, {"out_dir": "out", **values})


def _takes(*outcomes: tuple[str, str]) -> list[TakeRecord]:
    return [
        TakeRecord(f"episode_{i:06d}", i, outcome, reason, "cube")
        for i, (outcome, reason) in enumerate(outcomes)
    ]


TAKES = _takes(
    ("success", "success"),
    ("failure", "timeout"),
    ("success", "success"),
    ("failure", "missed_grasp"),
    ("success", "success"),
)


def test_a_fixed_count_converts_every_take() -> None:
    config = _config(episodes=5)
    assert not config.until_successes and config.attempts_cap == 5
    assert takes_to_convert(config, TAKES) == TAKES
    summary = take_summary(config, TAKES)
    assert summary == {
        "attempts": 5,
        "successes": 3,
        "failure_reasons": {"timeout": 1, "missed_grasp": 1},
    }


def test_until_successes_converts_only_the_wanted_successful_takes() -> None:
    config = _config(successes=2)
    assert config.until_successes and config.attempts_cap == 4  # default: twice the successes
    chosen = takes_to_convert(config, TAKES)
    assert [t.bag for t in chosen] == ["episode_000000", "episode_000002"]
    summary = take_summary(config, TAKES[:4])
    assert summary["successes"] == 2 and not summary["short"]
    assert summary["wanted_successes"] == 2 and summary["max_attempts"] == 4
    short = take_summary(_config(successes=3, max_attempts=4), TAKES[:4])
    assert short["short"] and short["failure_reasons"] == {"timeout": 1, "missed_grasp": 1}


def test_a_take_without_an_outcome_counts_as_a_failure() -> None:
    takes = _takes(("unknown", ""), ("success", "success"))
    config = _config(successes=1)
    assert [t.bag for t in takes_to_convert(config, takes)] == ["episode_000001"]
    assert take_summary(config, takes)["failure_reasons"] == {"unknown": 1}


def test_the_identity_tells_the_two_ways_of_counting_apart(tmp_path: Path) -> None:
    twin = tmp_path / "twin.yaml"
    twin.write_text("a: 1\n")
    fixed = recording_identity(_config(episodes=20), twin)
    until = recording_identity(_config(successes=20, max_attempts=30), twin)
    assert fixed["episodes"] == 20 and "successes" not in fixed
    assert until["successes"] == 20 and until["max_attempts"] == 30 and "episodes" not in until


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "exactly one of them"),
        ({"episodes": 3, "successes": 2}, "exactly one of them"),
        ({"episodes": 3, "max_attempts": 5}, "only with successes"),
        ({"successes": 5, "max_attempts": 4}, "at least as many attempts"),
    ],
)
def test_bad_counts_are_refused(values: dict[str, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**values)
