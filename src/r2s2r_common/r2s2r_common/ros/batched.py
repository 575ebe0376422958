"""A fast topic taken in batches on a timer: one executor wake-up per period, not per message.

rclpy's executor rebuilds its wait set and dispatches through several Python layers for every
message, about a millisecond per wake-up with a lifecycle node's entities. A 500 Hz
``/joint_states`` subscription therefore costs most of a core in rclpy alone (py-spy on the
grounding graph: 70 % of the grounding process's CPU was the executor, not the procedure).
A :class:`BatchedSubscription` reads the topic on a hidden reader node that no executor
spins, so messages wait in the middleware's queue (its ``qos`` depth), and a timer on the
owning node takes everything queued in one go and hands the batch to the callback, in
arrival order. The price is a delay of at most one ``period_s``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile

_reader_ids = itertools.count()


class BatchedSubscription:
    """Subscribe to ``topic`` and call ``callback(batch)`` every ``period_s`` with what came.

    Args:
        node: The node whose executor runs the timer (the callback runs on its thread).
        msg_type: Message class.
        topic: Topic name.
        callback: Called with the list of messages (bytes when ``raw``) that arrived since
            the last call, oldest first; not called when nothing arrived.
        qos: Reader QoS; its depth must hold one period of messages (older ones are lost).
        period_s: How often the queue is drained (s).
        raw: Hand over serialized messages (decode only what is needed).
        callback_group: The timer's callback group.

    Raises:
        ValueError: ``period_s`` is not positive.

    """

    def __init__(
        self,
        node: Node,
        msg_type: Any,
        topic: str,
        callback: Callable[[list[Any]], None],
        qos: QoSProfile,
        period_s: float,
        raw: bool = False,
        callback_group: CallbackGroup | None = None,
    ) -> None:
        if not period_s > 0.0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self._msg_type = msg_type
        self._raw = raw
        self._callback = callback
        # A leading underscore hides the reader from `ros2 node list`; it shares the owner's
        # context (and so its DDS participant): no extra discovery. The owner resolves the
        # topic (its namespace and remappings); the reader takes no command-line arguments,
        # or a `__node:=` remapping would give it the owner's name.
        self._destroyed = False
        self._reader = Node(
            f"_{node.get_name()}_reader_{next(_reader_ids)}",
            context=node.context,
            use_global_arguments=False,
            start_parameter_services=False,
            enable_rosout=False,
        )
        self._subscription = self._reader.create_subscription(
            msg_type, node.resolve_topic_name(topic), _never_called, qos, raw=raw
        )
        self._timer = node.create_timer(period_s, self._on_timer, callback_group=callback_group)
        self._node = node
        self.taken = 0

    @property
    def topic_name(self) -> str:
        """The resolved topic name."""
        return str(self._subscription.topic_name)

    def set_period(self, period_s: float) -> None:
        """Drain every ``period_s`` from now on (s, positive)."""
        if not period_s > 0.0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self._timer.timer_period_ns = int(period_s * 1e9)

    def drain(self) -> int:
        """Take every queued message and pass them to the callback; return how many."""
        batch: list[Any] = []
        with self._subscription.handle:
            while True:
                taken = self._subscription.handle.take_message(self._msg_type, self._raw)
                if taken is None:
                    break
                batch.append(taken[0])
        if batch:
            self.taken += len(batch)
            self._callback(batch)
        return len(batch)

    def _on_timer(self) -> None:
        self.drain()

    def destroy(self) -> None:
        """Stop the timer and remove the reader node (a second call does nothing)."""
        if self._destroyed:
            return
        self._destroyed = True
        self._node.destroy_timer(self._timer)
        self._reader.destroy_node()


def _never_called(_message: Any) -> None:
    """Do nothing: no executor spins the reader node (its messages are taken in batches)."""
