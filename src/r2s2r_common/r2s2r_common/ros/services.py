"""Calling a ROS service and waiting for its answer, resending a repeatable request.

Fast DDS drops a service's response when the server has not yet matched the client's response
reader (the server logs "failed to send response (timeout): client will not receive
response"; its maintainers leave the retry to the caller, ros2/rmw_fastrtps#704). It can
happen to the first call after a node starts even though ``wait_for_service`` saw the request
side, so a single call can wait for ever. A *repeatable* request (a query, a reset: the same
effect whether it runs once or twice) is therefore sent again after ``resend_after_s``
without an answer; a request that must run once (a lifecycle transition, starting a trial) is
sent once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

WaitForFuture = Callable[[Any, float], bool]
"""``wait(future, timeout_s)``: True once the future is done, False after ``timeout_s``."""


class ServiceNoAnswerError(TimeoutError):
    """A service did not answer within the time allowed (the message names it and the count)."""


def wait_in_other_thread(future: Any, timeout_s: float) -> bool:
    """Wait for a future that an executor spinning in another thread completes."""
    done = threading.Event()
    future.add_done_callback(lambda _future: done.set())
    return done.wait(timeout_s)


def call_service(
    client: Any,
    request: Any,
    what: str,
    timeout_s: float,
    wait: WaitForFuture,
    resend_after_s: float | None = None,
) -> Any:
    """Send ``request`` through ``client`` and return the response.

    Args:
        client: An ``rclpy`` service client (whose service is known to exist).
        request: The request message.
        what: What the call is, for the error message.
        timeout_s: Longest wait for an answer, all sends together (s).
        wait: How to wait for the future: :func:`wait_in_other_thread` when an executor spins
            the node elsewhere, or a function that spins it.
        resend_after_s: For a repeatable request: send it again (withdrawing the pending one)
            when no answer came within this; None sends it once.

    Raises:
        ServiceNoAnswerError: No answer within ``timeout_s``, naming the service and how many
            requests were sent.

    """
    deadline = time.monotonic() + timeout_s
    sent = 0
    while True:
        future = client.call_async(request)
        sent += 1
        left_s = max(deadline - time.monotonic(), 0.0)
        wait_s = left_s if resend_after_s is None else min(resend_after_s, left_s)
        if wait(future, wait_s):
            return future.result()
        client.remove_pending_request(future)
        if resend_after_s is None or time.monotonic() >= deadline:
            raise ServiceNoAnswerError(
                f"{what}: no answer from {client.srv_name} in {timeout_s} s "
                f"({sent} request{'s' if sent > 1 else ''})"
            )
