"""Spin nodes on a background executor thread for the duration of a block (tests, tools)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


@contextlib.contextmanager
def spinning(context: Context, *nodes: Node) -> Iterator[SingleThreadedExecutor]:
    """Spin ``nodes`` on one executor thread; on exit stop it and destroy them (last first).

    One thread, as the nodes run: rclpy's MultiThreadedExecutor spends more on dispatch than
    short callbacks cost and drops samples of fast streams.
    """
    executor = SingleThreadedExecutor(context=context)
    for node in nodes:
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        yield executor
    finally:
        executor.shutdown()
        spinner.join(timeout=5.0)
        for node in reversed(nodes):
            node.destroy_node()
