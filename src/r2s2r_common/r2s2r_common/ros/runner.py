"""``main()`` for every node: build, spin, shut down in ``try/finally``, clean start-up errors."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from r2s2r_common.config import ConfigError

#: Exit code of a node whose parameters or configuration files are invalid.
EXIT_BAD_CONFIGURATION = 2


def run_node(
    node_factory: Callable[[], Node],
    executor_factory: Callable[[], Executor] = SingleThreadedExecutor,
    args: list[str] | None = None,
) -> int:
    """Initialise rclpy, build the node, spin until shutdown and clean up.

    A :class:`ConfigError` while building the node (bad parameters, bad YAML) is printed as
    one line on stderr and gives exit code 2, without a traceback, so that a supervisor or
    ``ros2 launch`` shows the reason. Ctrl-C ends the spin cleanly with exit code 0.

    Returns:
        The process exit code.

    """
    rclpy.init(args=args)
    node: Node | None = None
    try:
        try:
            node = node_factory()
        except ConfigError as error:
            print(f"[ERROR] invalid configuration: {error}", file=sys.stderr, flush=True)
            return EXIT_BAD_CONFIGURATION
        executor = executor_factory()
        executor.add_node(node)
        with contextlib.suppress(KeyboardInterrupt, ExternalShutdownException):
            executor.spin()
        return 0
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
