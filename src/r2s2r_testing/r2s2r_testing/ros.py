"""rclpy for tests: an initialised context (one home for ``rclpy.init``/``shutdown``), a spin."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def ros_context_of(domain_id: int | None = None) -> Iterator[Any]:
    """Yield a fresh, initialised rclpy context; shut it down afterwards.

    Args:
        domain_id: DDS domain of the context; ``None`` is the process's (``ROS_DOMAIN_ID``, which
            the root ``conftest.py`` claims per test process).

    Yields:
        The ``rclpy.Context`` (typed ``Any``: rclpy is imported only here, when needed).

    """
    import rclpy

    context = rclpy.Context()
    if domain_id is None:
        rclpy.init(context=context)
    else:
        rclpy.init(context=context, domain_id=domain_id)
    try:
        yield context
    finally:
        rclpy.try_shutdown(context=context)


def spin_executor_until(executor: Any, predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Spin ``executor`` 10 ms at a time until ``predicate()`` holds; False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.01)
        if predicate():
            return True
    return False
