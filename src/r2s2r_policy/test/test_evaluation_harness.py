"""The evaluation harness: resent requests, and trials that did not run.

A trial whose outcome never comes, a policy node that dies mid-trial, a graph that stops
answering: the trial is recorded as not run (in no rate), never as a failure of the policy.

Service calls: Fast DDS drops a service's response when the server has not yet matched the
client's response reader (seen once in five CI rehearsals: the policy node's first get_state
was never answered). The harness resends repeatable requests (get_state, reset); other
requests are sent once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from r2s2r_policy.evaluation.ros import EvaluationHarness, HarnessError, run_protocol
from r2s2r_policy.evaluation.trials import NOT_RUN, EvaluationConfig
from r2s2r_testing.ros import ros_context_of
from rclpy.task import Future


@pytest.fixture
def harness() -> Iterator[EvaluationHarness]:
    with ros_context_of() as context:
        made = EvaluationHarness(context, policy_node="", service_timeout_s=1.0)
        try:
            yield made
        finally:
            made.close()


class DroppingClient:
    """A service client whose first ``dropped`` requests are never answered."""

    srv_name = "/policy_inference/get_state"

    def __init__(self, dropped: int) -> None:
        self.dropped = dropped
        self.sent = 0
        self.withdrawn = 0

    def wait_for_service(self, timeout_sec: float) -> bool:
        return True

    def service_is_ready(self) -> bool:
        return True

    def call_async(self, request: Any) -> Future[str]:
        self.sent += 1
        future: Future[str] = Future()
        if self.sent > self.dropped:
            future.set_result(f"answer to request {self.sent}")
        return future

    def remove_pending_request(self, future: Future[str]) -> None:
        self.withdrawn += 1


def test_a_repeatable_request_is_resent_until_answered(harness: EvaluationHarness) -> None:
    client = DroppingClient(dropped=2)
    assert harness._call(client, object(), "get_state", resend_after_s=0.1) == (
        "answer to request 3"
    )
    assert (client.sent, client.withdrawn) == (3, 2)


def test_a_request_sent_once_fails_after_the_timeout(harness: EvaluationHarness) -> None:
    client = DroppingClient(dropped=1)
    with pytest.raises(
        HarnessError, match=r"no answer from /policy_inference/get_state in 1.0 s \(1 request\)"
    ):
        harness._call(client, object(), "change_state")
    assert client.sent == 1


def test_resending_stops_at_the_timeout(harness: EvaluationHarness) -> None:
    client = DroppingClient(dropped=1000)
    with pytest.raises(HarnessError, match=r"in 1.0 s \((\d+) requests\)"):
        harness._call(client, object(), "get_state", resend_after_s=0.3)
    assert 3 <= client.sent <= 5


class ScriptedHarness:
    """A harness double: per trial, an outcome, None (never came) or an error to raise."""

    def __init__(self, script: list[Any], dies_at: int | None = None) -> None:
        self.script = script
        self.dies_at = dies_at
        self.trials = 0
        self.safety_stop = ""

    def run_trial(
        self,
        seed: int,
        condition: str,
        wall_timeout_s: float,
        dead_node: Any = None,
        settle_s: float = 0.0,
    ) -> tuple[int, Any, int]:
        self.trials += 1
        step = self.script[self.trials - 1]
        if isinstance(step, Exception):
            raise step
        return self.trials, step, 7

    def dead_node(self) -> str | None:
        if self.dies_at is not None and self.trials >= self.dies_at:
            return "policy_inference exited with code -9 (log: logs/policy_inference.log)"
        return None


def outcome(success: bool, reason: str) -> Any:
    from builtin_interfaces.msg import Time

    from r2s2r_interfaces.msg import TrialOutcome

    message = TrialOutcome(success=success, reason=reason, object_type="cube", duration_s=4.0)
    message.header.stamp = Time(sec=14, nanosec=500_000_000)
    return message


PROTOCOL = EvaluationConfig(trials_per_condition={"nominal": 4}, trial_wall_timeout_s=30.0)


def test_a_trial_whose_outcome_never_comes_is_not_run_and_the_next_runs() -> None:
    harness = ScriptedHarness([outcome(True, "success"), None, outcome(False, "dropped")] * 2)
    report = run_protocol(harness, PROTOCOL, "p")  # type: ignore[arg-type]
    assert [r.reason for r in report.records] == ["success", NOT_RUN, "dropped", "success"]
    assert report.records[1].not_run == "no outcome within 30 s (wall)"
    assert report.records[0].started_at_s == pytest.approx(10.5)
    assert report.records[0].commands_sent == 7
    nominal = report.summary()["nominal"]
    assert (nominal.trials, nominal.successes, nominal.not_run) == (3, 2, 1)
    assert "stopped" not in report.metadata
    assert "1 not run" in report.table()


def test_a_policy_node_that_dies_mid_trial_stops_the_protocol_as_not_run() -> None:
    # The twin still judges the trial (the arm stood still): that outcome is not the policy's.
    harness = ScriptedHarness([outcome(True, "success"), outcome(False, "timeout")], dies_at=2)
    report = run_protocol(harness, PROTOCOL, "p", watch=harness)  # type: ignore[arg-type]
    assert [r.reason for r in report.records] == ["success", NOT_RUN, NOT_RUN, NOT_RUN]
    assert report.records[1].not_run.startswith("policy_inference exited with code -9")
    assert report.records[2].not_run == "not started: the evaluation stopped at trial 2"
    assert report.metadata["stopped"].startswith("stopped at trial 2 of 4: policy_inference")
    assert report.summary()["all"].trials == 1


def test_a_graph_that_stops_answering_stops_the_protocol_naming_it() -> None:
    error = HarnessError("no answer from /trial/reset in 20.0 s (3 requests)")
    harness = ScriptedHarness([outcome(False, "dropped"), error])
    report = run_protocol(harness, PROTOCOL, "p")  # type: ignore[arg-type]
    assert [r.not_run for r in report.records][:2] == ["", str(error)]
    assert report.metadata["stopped"] == f"stopped at trial 2 of 4: {error}"
    assert len(report.not_run) == 3
