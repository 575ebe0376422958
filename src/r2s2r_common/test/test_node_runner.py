"""The node runner: one ConfigError boundary, spin until done, exit codes, finish, autostart.

Each test runs :func:`run_node` / :func:`run_lifecycle_node` in process on the default rclpy
context, as a node's ``main`` does (the runner initialises and shuts it down).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
import rclpy
from r2s2r_common.config import ConfigError
from r2s2r_common.errors import ExitCode
from r2s2r_common.ros.runner import run_lifecycle_node, run_node
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.node import Node
from std_msgs.msg import String

TICK_PERIOD_S = 0.01


class TickingNode(Node):
    """Counts the ticks of a 100 Hz timer; ``on_tick`` runs in the timer callback."""

    def __init__(self, on_tick: Callable[[TickingNode], None] | None = None) -> None:
        super().__init__("runner_test_node")
        self.ticks = 0
        self.events: list[str] = []
        self._on_tick = on_tick
        self.create_timer(TICK_PERIOD_S, self._tick)

    def _tick(self) -> None:
        self.ticks += 1
        if self._on_tick is not None:
            self._on_tick(self)


class StartingNode(LifecycleNode):
    """A lifecycle node with an ``autostart`` parameter whose autostart answers as told."""

    def __init__(self, autostart: bool, succeeds: bool | Exception) -> None:
        super().__init__("runner_test_lifecycle_node")
        self.declare_parameter("autostart", autostart)
        self.succeeds = succeeds
        self.autostarts = 0
        self.ticks = 0
        self.events: list[str] = []
        self.create_timer(TICK_PERIOD_S, self._tick)

    def _tick(self) -> None:
        self.ticks += 1

    def autostart(self) -> bool:
        self.autostarts += 1
        if isinstance(self.succeeds, Exception):
            raise self.succeeds
        return self.succeeds


class Built:
    """A node factory that keeps the node it built, to inspect it after the run."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self.node: Any = None

    def __call__(self) -> Any:
        self.node = self._make()
        return self.node


def record_finish(node: Any) -> None:
    """A ``finish`` hook that records the node's timers (none once destroyed) and ticks."""
    node.events.append(f"finish: {len(list(node.timers))} timer, {node.ticks} ticks")


def finished_at_tick(node: Any) -> int:
    """The tick at which ``record_finish`` ran (once).

    ``rclpy.shutdown()`` called in a test also destroys the context's nodes (a signal does not),
    so after a shutdown the timers are not evidence of the order; the ticks are.
    """
    (event,) = node.events
    return int(event.split(", ")[1].split()[0])


def assert_destroyed_and_shut_down(node: Any) -> None:
    assert list(node.timers) == []  # destroy_node destroys the node's timers
    assert not rclpy.ok()


def shut_down_at(tick: int) -> Callable[[TickingNode], None]:
    """An ``on_tick`` that shuts the context down at a tick, as SIGTERM does under rclpy."""

    def on_tick(node: TickingNode) -> None:
        if node.ticks == tick:
            rclpy.shutdown()

    return on_tick


def never(node: Any) -> int:
    raise AssertionError("exit_code must not be asked when the spin did not end by `until`")


def run_until_interrupted(built: Built) -> int:
    """Run with a condition that never holds (only ROS shutting down ends the spin): 130 then."""
    return run_node(
        built,
        args=[],
        until=lambda node: False,
        exit_code=never,
        finish=record_finish,
        interrupted_exit_code=130,
    )


@pytest.fixture(autouse=True)
def _default_context_shut_down() -> Any:
    yield
    rclpy.try_shutdown()  # a failing test must not leave the default context to the next one


def test_spins_until_the_condition_then_takes_the_exit_code_from_the_node() -> None:
    built = Built(TickingNode)
    code = run_node(
        built,
        args=[],
        until=lambda node: node.ticks >= 3,
        exit_code=lambda node: 40 + node.ticks,
        finish=record_finish,
    )
    # The condition is checked after every callback: the spin stops at the third tick.
    assert code == 43
    assert built.node.events == ["finish: 1 timer, 3 ticks"]
    assert_destroyed_and_shut_down(built.node)


def test_the_condition_set_by_another_thread_ends_the_spin() -> None:
    done = threading.Event()
    threading.Timer(0.2, done.set).start()
    built = Built(TickingNode)
    code = run_node(built, args=[], until=lambda node: done.is_set(), exit_code=lambda node: 5)
    assert code == 5
    assert built.node.ticks >= 5  # it spun (and ticked) while it waited


def test_ros_shutdown_before_the_condition_gives_the_interrupted_exit_code() -> None:
    # SIGTERM (as rclpy handles it) or the owner's death: the context shuts down under the spin.
    built = Built(lambda: TickingNode(shut_down_at(2)))
    code = run_until_interrupted(built)
    assert code == 130
    assert finished_at_tick(built.node) == 2
    assert_destroyed_and_shut_down(built.node)


def test_ctrl_c_gives_the_interrupted_exit_code_and_still_finishes() -> None:
    def interrupt(node: TickingNode) -> None:
        if node.ticks == 1:
            raise KeyboardInterrupt

    built = Built(lambda: TickingNode(interrupt))
    code = run_until_interrupted(built)
    assert code == 130
    assert built.node.events == ["finish: 1 timer, 1 ticks"]
    assert_destroyed_and_shut_down(built.node)


def test_without_a_condition_it_spins_until_ros_shuts_down() -> None:
    built = Built(lambda: TickingNode(shut_down_at(3)))
    assert run_node(built, args=[], finish=record_finish) == 0
    assert finished_at_tick(built.node) == 3
    built = Built(lambda: TickingNode(shut_down_at(2)))
    assert run_node(built, args=[], finish=record_finish, interrupted_exit_code=130) == 130
    assert finished_at_tick(built.node) == 2


def test_a_config_error_is_one_message_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    finished: list[Any] = []

    def broken() -> Node:
        raise ConfigError("workers: 0 is below the minimum 1")

    code = run_node(broken, args=[], finish=finished.append)
    assert code == ExitCode.BAD_INPUT == 2
    err = capsys.readouterr().err
    assert err == "[ERROR] invalid configuration: workers: 0 is below the minimum 1\n"
    assert finished == []  # no node, nothing to finish
    assert not rclpy.ok()


def test_finish_that_raises_still_destroys_the_node_and_shuts_down() -> None:
    def failing_finish(node: TickingNode) -> None:
        raise OSError("disk full")

    built = Built(lambda: TickingNode(shut_down_at(1)))
    with pytest.raises(OSError, match="disk full"):
        run_node(built, args=[], finish=failing_finish)
    assert_destroyed_and_shut_down(built.node)


def test_an_exit_code_needs_a_condition() -> None:
    with pytest.raises(ValueError, match="until"):
        run_node(TickingNode, args=[], exit_code=lambda node: 1)
    assert not rclpy.ok()  # refused before rclpy was initialised


@pytest.mark.parametrize("failed_exit_code", [None, 1])
def test_a_failed_autostart_exits_before_spinning(failed_exit_code: int | None) -> None:
    built = Built(lambda: StartingNode(autostart=True, succeeds=False))
    if failed_exit_code is None:  # the default: a dead node, as for bad parameters
        code = run_lifecycle_node(built, args=[], finish=record_finish)
        assert code == ExitCode.BAD_INPUT
    else:
        code = run_lifecycle_node(
            built, args=[], finish=record_finish, autostart_failed_exit_code=failed_exit_code
        )
        assert code == failed_exit_code
    assert built.node.autostarts == 1
    assert built.node.events == ["finish: 1 timer, 0 ticks"]  # never spun, still finished
    assert_destroyed_and_shut_down(built.node)


def test_a_failed_autostart_can_be_logged_and_the_node_spins_on() -> None:
    built = Built(lambda: StartingNode(autostart=True, succeeds=False))
    code = run_lifecycle_node(
        built,
        args=[],
        autostart_failed_exit_code=None,
        until=lambda node: node.ticks >= 2,
        exit_code=lambda node: 7,
    )
    assert code == 7
    assert built.node.autostarts == 1 and built.node.ticks == 2


@pytest.mark.parametrize("autostart", [True, False])
def test_autostart_runs_only_when_the_parameter_says_so(autostart: bool) -> None:
    built = Built(lambda: StartingNode(autostart=autostart, succeeds=True))
    code = run_lifecycle_node(built, args=[], until=lambda node: node.ticks >= 1)
    assert code == 0
    assert built.node.autostarts == (1 if autostart else 0)


def test_a_config_error_in_autostart_is_the_same_one_message_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    built = Built(lambda: StartingNode(autostart=True, succeeds=ConfigError("fps: must be > 0")))
    code = run_lifecycle_node(built, args=[], autostart_failed_exit_code=1)
    assert code == 2
    assert capsys.readouterr().err == "[ERROR] invalid configuration: fps: must be > 0\n"
    assert_destroyed_and_shut_down(built.node)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_leaves_the_context_valid_for_finish(signum: int) -> None:
    """SIGTERM/Ctrl-C end the spin; ``finish`` still publishes (a policy's last hold)."""

    def signal_self(node: TickingNode) -> None:
        if node.ticks == 2:
            os.kill(os.getpid(), signum)

    published: list[bool] = []

    def finish(node: TickingNode) -> None:
        publisher = node.create_publisher(String, "/runner_test/last_words", 1)
        publisher.publish(String(data="hold"))  # raised RCLError when rclpy handled the signal
        published.append(rclpy.ok())

    before = signal.getsignal(signum)
    built = Built(lambda: TickingNode(signal_self))
    assert run_node(built, args=[], finish=finish, interrupted_exit_code=143) == 143
    assert published == [True]
    assert_destroyed_and_shut_down(built.node)
    assert signal.getsignal(signum) is before  # the process's own handler is back
