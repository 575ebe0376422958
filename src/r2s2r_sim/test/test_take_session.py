"""Recording sessions: a fixed number of takes, or takes until N succeed within a cap."""

import pytest
from r2s2r_sim.demonstrator.session import Take, TakeSession


def _take(seed: int, success: bool, reason: str = "") -> Take:
    return Take(seed, success, reason or ("success" if success else "missed_grasp"))


def test_a_fixed_count_records_every_take_whatever_the_outcome() -> None:
    session = TakeSession(max_takes=3)
    for seed, success in enumerate((True, False, True)):
        assert not session.done
        session.record(_take(seed, success))
    assert session.done and not session.short
    assert (session.attempts, session.successes) == (3, 2)
    assert session.failure_reasons() == {"missed_grasp": 1}


def test_until_successes_re_records_failed_takes_and_stops_at_the_goal() -> None:
    session = TakeSession(max_takes=10, successes_wanted=2)
    outcomes = [(False, "timeout"), (True, ""), (False, "dropped"), (False, "timeout"), (True, "")]
    for seed, (success, reason) in enumerate(outcomes):
        assert not session.done, seed
        session.record(_take(seed, success, reason))
    assert session.done and not session.short
    assert (session.attempts, session.successes) == (5, 2)
    assert session.failure_reasons() == {"timeout": 2, "dropped": 1}
    assert "2/5 successes" in session.summary() and "wanted 2" in session.summary()
    with pytest.raises(RuntimeError, match="after the session was done"):
        session.record(_take(5, True))


def test_until_successes_stops_at_the_cap_and_says_it_is_short() -> None:
    session = TakeSession(max_takes=3, successes_wanted=2)
    for seed, success in enumerate((False, True, False)):
        session.record(_take(seed, success))
    assert session.done and session.short
    assert "SHORT" in session.summary()


def test_zero_takes_is_done_at_once_and_bad_counts_are_refused() -> None:
    assert TakeSession(max_takes=0).done
    with pytest.raises(ValueError, match="successes_wanted = 4 > max_takes = 3"):
        TakeSession(max_takes=3, successes_wanted=4)
    with pytest.raises(ValueError, match="expected ≥ 0"):
        TakeSession(max_takes=-1)
