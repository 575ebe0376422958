"""An initialised rclpy context for tests: one home for ``rclpy.init``/``shutdown``."""

from __future__ import annotations

from collections.abc import Iterator
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
