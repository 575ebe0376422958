"""The evaluation harness's service calls: a repeatable request is resent when unanswered.

Fast DDS drops a service's response when the server has not yet matched the client's response
reader (seen once in five CI rehearsals: the policy node's first get_state was never answered).
The harness resends repeatable requests (get_state, reset); other requests are sent once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from r2s2r_policy.evaluation.ros import EvaluationHarness, HarnessError
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
