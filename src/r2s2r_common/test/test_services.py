"""A repeatable service request is resent when its answer is dropped; a single one times out."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest
from r2s2r_common.ros.services import ServiceNoAnswerError, call_service, wait_in_other_thread


class DroppingClient:
    """A service client whose first ``dropped`` requests are never answered.

    Answered requests complete from another thread, as an executor spinning elsewhere would.
    """

    srv_name = "/trial/reset"

    def __init__(self, dropped: int) -> None:
        self.dropped = dropped
        self.sent = 0
        self.withdrawn: list[Future[Any]] = []

    def call_async(self, request: Any) -> Future[Any]:
        self.sent += 1
        future: Future[Any] = Future()
        if self.sent > self.dropped:
            threading.Timer(0.01, future.set_result, args=(("answer", request),)).start()
        return future

    def remove_pending_request(self, future: Future[Any]) -> None:
        self.withdrawn.append(future)


def test_a_repeatable_request_is_answered_on_the_third_send() -> None:
    client = DroppingClient(dropped=2)
    answer = call_service(client, "req", "reset", 5.0, wait_in_other_thread, resend_after_s=0.1)
    assert answer == ("answer", "req")
    assert client.sent == 3
    assert len(client.withdrawn) == 2


def test_a_single_request_fails_at_the_timeout_naming_the_count() -> None:
    client = DroppingClient(dropped=1)
    with pytest.raises(
        ServiceNoAnswerError, match=r"start: no answer from /trial/reset in 0.3 s \(1 request\)"
    ):
        call_service(client, "req", "start", 0.3, wait_in_other_thread)
    assert client.sent == 1


def test_resending_stops_at_the_timeout() -> None:
    client = DroppingClient(dropped=1000)
    with pytest.raises(ServiceNoAnswerError, match=r"in 0.5 s \([3-6] requests\)"):
        call_service(client, "req", "reset", 0.5, wait_in_other_thread, resend_after_s=0.1)
    assert client.sent == len(client.withdrawn)
