"""Which ledger records a resume runs again: failures without a verdict, not the trial's own."""

import pytest
from r2s2r_datagen.ledger import JOB_TIMEOUT, is_interrupted
from r2s2r_datagen.summary import ConfigurationSummary

pytestmark = pytest.mark.unit


def record(status: str, reason: str, attempts: int) -> dict:
    return {"status": status, "reason": reason, "attempts": attempts, "total_attempts": attempts}


@pytest.mark.parametrize(
    ("entry", "interrupted"),
    [
        (record("failed", JOB_TIMEOUT, 0), True),
        (record("failed", "worker_crashed", 0), True),
        (record("failed", "write_failed", 1), True),
        # The trial ran out of time with the object still moving: the generator's verdict.
        (record("failed", "timeout", 3), False),
        (record("failed", "dropped", 1), False),
        # A ledger written before job_timeout: the job's deadline had no generation attempt.
        (record("failed", "timeout", 0), True),
        (record("skipped", "unreachable_object", 3), False),
        (record("success", "success", 1), False),
    ],
)
def test_only_failures_without_a_verdict_are_interrupted(entry: dict, interrupted: bool) -> None:
    assert is_interrupted(entry) is interrupted


def test_a_trial_timeout_counts_as_failed_not_interrupted() -> None:
    summary = ConfigurationSummary("grounded_mimicgen", "grounded", "mimicgen", "grounded-x")
    summary.add_records(
        [
            record("failed", "timeout", 3),
            record("failed", JOB_TIMEOUT, 0),
            record("success", "success", 1),
        ]
    )
    assert (summary.failed, summary.interrupted, summary.successes) == (2, 1, 1)
    assert summary.failure_reasons == {JOB_TIMEOUT: 1, "timeout": 1}
