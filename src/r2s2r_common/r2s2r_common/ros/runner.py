"""``main()`` for every node: build, spin, shut down in ``try/finally``, clean start-up errors.

One error boundary for every node: a :class:`ConfigError` while building (or autostarting) the
node is one ``[ERROR] invalid configuration: ...`` message on stderr and exit code 2. The hooks
cover what a node's ``main`` needs beyond "spin until Ctrl-C": spin until the node's work is
done (``until``), take the exit code from the node (``exit_code``), finish the node's work
before it is destroyed (``finish``), the exit code of an interrupted run
(``interrupted_exit_code``) and, for lifecycle nodes, what a failed autostart means
(``autostart_failed_exit_code``).

Every node also ends with the process that started it (:func:`end_with_owner`): a node of a
graph never outlives its supervisor, whatever killed the supervisor.
"""

from __future__ import annotations

import signal
import sys
import threading
import typing
from collections.abc import Callable
from types import FrameType
from typing import Protocol, TypeVar

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from r2s2r_common.config import ConfigError
from r2s2r_common.errors import ExitCode
from r2s2r_common.process import terminate_self, watch_owner

#: Longest wait (s) between two checks of an ``until`` condition set outside the executor
#: (by a worker thread); a condition set by a callback is seen as soon as the callback returns.
UNTIL_POLL_S = 0.1

NodeT = TypeVar("NodeT", bound=Node)

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that end a node's spin. They are handled here, not by rclpy, so that the context is
still valid while ``finish`` runs (a policy's last hold is published; rclpy's own handlers shut
the context down first, and every publish in ``finish`` then raised)."""


def _stop_on_signals() -> tuple[threading.Event, Callable[[], None]]:
    """Install SIGINT/SIGTERM handlers that set the returned event (a second one interrupts).

    Returns:
        The event, and a function that puts the previous handlers back.

    """
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        return requested, lambda: None  # only the main thread handles signals: ROS ends it

    def handler(signum: int, frame: FrameType | None) -> None:
        if requested.is_set():
            raise KeyboardInterrupt  # a second signal while finishing: stop waiting
        requested.set()

    previous = {signum: signal.signal(signum, handler) for signum in _STOP_SIGNALS}

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    return requested, restore


def end_with_owner() -> None:
    """Shut this node down (SIGTERM to itself, handled as Ctrl-C is) when its owner dies.

    The owner is the process that started it with :func:`r2s2r_common.process.spawn_owned`
    (named in the environment); a node started by hand has none and is not watched.
    """
    watch_owner(terminate_self)


def run_node(
    node_factory: Callable[[], NodeT],
    executor_factory: Callable[[], Executor] = SingleThreadedExecutor,
    args: list[str] | None = None,
    *,
    until: Callable[[NodeT], bool] | None = None,
    exit_code: Callable[[NodeT], int] | None = None,
    finish: Callable[[NodeT], None] | None = None,
    interrupted_exit_code: int = 0,
) -> int:
    """Initialise rclpy, build the node, spin, and clean up; return the exit code.

    A :class:`ConfigError` while building the node (bad parameters, bad YAML) is printed on
    stderr (``[ERROR] invalid configuration: <message>``) and gives exit code 2, without a
    traceback, so that a supervisor or ``ros2 launch`` shows the reason.

    The spin ends when ``until(node)`` holds, or when ROS shuts down: Ctrl-C, SIGTERM, or the
    death of the process that started the node (:func:`end_with_owner`). Then the executor is
    shut down, ``finish(node)`` runs, the node is destroyed and rclpy is shut down, in this
    order and whatever ended the spin (``finish`` also runs after a failed autostart; the node
    is destroyed even if ``finish`` raises).

    Args:
        node_factory: Builds the node (a node class with default arguments will do).
        executor_factory: Builds the executor the node spins on.
        args: Command-line arguments for ``rclpy.init`` (default: ``sys.argv``).
        until: Spin until this holds for the node (checked after every callback and at least
            every :data:`UNTIL_POLL_S`); None spins until ROS shuts down.
        exit_code: The exit code once ``until`` held (default 0); needs ``until``.
        finish: Runs after the spin, before the node is destroyed (close files, stop
            workers, send a last command).
        interrupted_exit_code: The exit code when ROS shut down before ``until`` held (or, with
            no ``until``, whenever the spin ends).

    Returns:
        The process exit code.

    Raises:
        ValueError: ``exit_code`` without ``until``.

    """
    return _run(
        node_factory,
        executor_factory,
        args,
        until,
        exit_code,
        finish,
        interrupted_exit_code,
        start=None,
    )


class AutostartNode(Protocol):
    """A lifecycle node that can configure and activate itself (no lifecycle manager here)."""

    def autostart(self) -> bool:
        """Configure and activate; False (with the reason logged) if a transition failed."""
        ...


def run_lifecycle_node(
    node_factory: Callable[[], NodeT],
    executor_factory: Callable[[], Executor] = SingleThreadedExecutor,
    args: list[str] | None = None,
    *,
    autostart_failed_exit_code: int | None = ExitCode.BAD_INPUT,
    until: Callable[[NodeT], bool] | None = None,
    exit_code: Callable[[NodeT], int] | None = None,
    finish: Callable[[NodeT], None] | None = None,
    interrupted_exit_code: int = 0,
) -> int:
    """Like :func:`run_node`, for lifecycle nodes with an ``autostart`` parameter.

    With ``autostart`` true (the default where no lifecycle manager runs) the node configures
    and activates itself before it spins; if that fails the process exits with
    ``autostart_failed_exit_code`` (default 2; the reason is in the node's log), so a
    supervisor or ``ros2 launch`` sees a dead node instead of one idling unconfigured. With
    ``autostart_failed_exit_code=None`` a failed autostart is logged and the node spins on,
    waiting for lifecycle transitions. With ``autostart`` false the node waits for lifecycle
    transitions. The other arguments are :func:`run_node`'s.

    Returns:
        The process exit code.

    """

    def start(node: NodeT) -> int | None:
        if not node.get_parameter("autostart").value:
            return None
        if typing.cast(AutostartNode, node).autostart():
            return None
        cause = getattr(node, "last_error", "") or "the failing transition's error above"
        if autostart_failed_exit_code is None:
            node.get_logger().error(
                f"autostart failed ({cause}); waiting for lifecycle transitions"
            )
            return None
        node.get_logger().fatal(f"autostart failed ({cause}); exiting")
        return autostart_failed_exit_code

    return _run(
        node_factory,
        executor_factory,
        args,
        until,
        exit_code,
        finish,
        interrupted_exit_code,
        start=start,
    )


def _run(
    node_factory: Callable[[], NodeT],
    executor_factory: Callable[[], Executor],
    args: list[str] | None,
    until: Callable[[NodeT], bool] | None,
    exit_code: Callable[[NodeT], int] | None,
    finish: Callable[[NodeT], None] | None,
    interrupted_exit_code: int,
    start: Callable[[NodeT], int | None] | None,
) -> int:
    """Run a node: the one body of :func:`run_node` and :func:`run_lifecycle_node`.

    ``start`` runs once the node is built, inside the same ConfigError boundary; an exit code
    from it ends the process before the spin.
    """
    if exit_code is not None and until is None:
        raise ValueError("run_node: exit_code is taken once `until` holds; give `until` too")
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop_requested, restore_signals = _stop_on_signals()
    end_with_owner()
    node: NodeT | None = None
    executor: Executor | None = None
    try:
        try:
            node = node_factory()
            start_code = start(node) if start is not None else None
        except ConfigError as error:
            print(f"[ERROR] invalid configuration: {error}", file=sys.stderr, flush=True)
            return ExitCode.BAD_INPUT
        if start_code is not None:
            return start_code
        executor = executor_factory()
        executor.add_node(node)
        if not _spin(executor, node, until, stop_requested):
            return interrupted_exit_code
        return exit_code(node) if exit_code is not None else 0
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            try:
                if finish is not None:
                    finish(node)
            finally:
                node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        restore_signals()


def _spin(
    executor: Executor,
    node: NodeT,
    until: Callable[[NodeT], bool] | None,
    stop_requested: threading.Event,
) -> bool:
    """Spin until ``until(node)`` holds (True), or a stop signal or ROS shutdown comes first."""
    try:
        while rclpy.ok() and not stop_requested.is_set():
            if until is not None and until(node):
                return True
            executor.spin_once(timeout_sec=UNTIL_POLL_S)
        return until is not None and not stop_requested.is_set() and until(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        return False
    except RuntimeError:
        # Ctrl-C shuts the context down while the executor may be taking a message; what
        # that take raises then is the shutdown, not a failure of the node.
        if rclpy.ok():
            raise
        return False
