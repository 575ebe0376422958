"""``main()`` for every node: build, spin, shut down in ``try/finally``, clean start-up errors.

Every node also ends with the process that started it (:func:`end_with_owner`): a node of a
graph never outlives its supervisor, whatever killed the supervisor.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable
from typing import Protocol

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from r2s2r_common.config import ConfigError
from r2s2r_common.process import terminate_self, watch_owner

#: Exit code of a node whose parameters or configuration files are invalid.
EXIT_BAD_CONFIGURATION = 2


def end_with_owner() -> None:
    """Shut this node down (SIGTERM to itself, as rclpy handles it) when its owner dies.

    The owner is the process that started it with :func:`r2s2r_common.process.spawn_owned`
    (named in the environment); a node started by hand has none and is not watched.
    """
    watch_owner(terminate_self)


def run_node(
    node_factory: Callable[[], Node],
    executor_factory: Callable[[], Executor] = SingleThreadedExecutor,
    args: list[str] | None = None,
) -> int:
    """Initialise rclpy, build the node, spin until shutdown and clean up.

    A :class:`ConfigError` while building the node (bad parameters, bad YAML) is printed as
    one line on stderr and gives exit code 2, without a traceback, so that a supervisor or
    ``ros2 launch`` shows the reason. Ctrl-C or SIGTERM ends the spin cleanly with exit code 0,
    and so does the death of the process that started the node (:func:`end_with_owner`).

    Returns:
        The process exit code.

    """
    rclpy.init(args=args)
    end_with_owner()
    node: Node | None = None
    try:
        try:
            node = node_factory()
        except ConfigError as error:
            print(f"[ERROR] invalid configuration: {error}", file=sys.stderr, flush=True)
            return EXIT_BAD_CONFIGURATION
        executor = executor_factory()
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        except RuntimeError:
            # Ctrl-C shuts the context down while the executor may be taking a message; what
            # that take raises then is the shutdown, not a failure of the node.
            if rclpy.ok():
                raise
        return 0
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


class AutostartNode(Protocol):
    """A lifecycle node that can configure and activate itself (no lifecycle manager here)."""

    def autostart(self) -> bool:
        """Configure and activate; False (with the reason logged) if a transition failed."""
        ...


def run_lifecycle_node(
    node_factory: Callable[[], Node],
    executor_factory: Callable[[], Executor] = SingleThreadedExecutor,
    args: list[str] | None = None,
) -> int:
    """Like :func:`run_node`, for lifecycle nodes with an ``autostart`` parameter.

    With ``autostart`` true (the default where no lifecycle manager runs) the node configures
    and activates itself; if that fails the process exits with code 2 (the reason is in the
    node's log), so a supervisor or ``ros2 launch`` sees a dead node instead of one idling
    unconfigured. With ``autostart`` false the node waits for lifecycle transitions.

    Returns:
        The process exit code.

    """

    def build() -> Node:
        node = node_factory()
        if node.get_parameter("autostart").value:
            starter = typing.cast(AutostartNode, node)
            if not starter.autostart():
                node.get_logger().fatal("autostart failed (see the error above); exiting")
                raise _AutostartFailedError
        return node

    try:
        return run_node(build, executor_factory, args)
    except _AutostartFailedError:
        return EXIT_BAD_CONFIGURATION


class _AutostartFailedError(Exception):
    """Raised out of the node factory when autostart fails."""
