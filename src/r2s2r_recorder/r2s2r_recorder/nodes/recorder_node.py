"""``recorder`` node: records configured topics into one rosbag2 (MCAP) bag per episode.

Subscriptions take serialized bytes (``raw=True``) and only enqueue them; the
:class:`~r2s2r_recorder.recording.RecordingEngine` writer thread does all file I/O.

Services (std_srvs/Trigger), like a teleoperator's foot pedal:
``~/start_episode``, ``~/stop_episode``, ``~/discard_episode`` (re-record),
``~/next_episode`` (stop the current one if any, start the next).
Episode metadata comes from the ``episode.*`` parameters at start and stop
(``episode.outcome`` 'unknown' means: take the last ``/trial/outcome`` message).

Topics are subscribed when they appear on the graph, with the type seen there. The message
class is imported by name for rclpy's type support; a type that cannot be imported yet (e.g.
project messages before the workspace build) is retried at every discovery pass and reported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import rclpy
import rclpy.task
from r2s2r_common.config import ConfigError, flatten, parse_config, unflatten
from r2s2r_common.ros.qos import (
    RECORDED_BEST_EFFORT_QOS,
    RECORDED_LATCHED_QOS,
    RECORDED_RELIABLE_QOS,
    SENSOR_DATA_QOS,
)
from r2s2r_common.ros.runner import run_node
from rcl_interfaces.msg import ParameterDescriptor, ParameterType
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from std_srvs.srv import Trigger

from ..bag_format import EpisodeInfo
from ..bag_writer import BagWriteError
from ..config import EpisodeDefaults, RecorderConfig
from ..recording import RecorderStateError, RecordingEngine, next_episode_id

NODE_NAME = "recorder"


def rclpy_qos(profile: str) -> QoSProfile:
    """Rclpy QoS for a profile name of :data:`~r2s2r_recorder.bag_format.QOS_PROFILE_NAMES`."""
    if profile == "sensor_data":
        return SENSOR_DATA_QOS
    if profile == "reliable_transient_local":
        return RECORDED_LATCHED_QOS
    if profile == "best_effort":
        return RECORDED_BEST_EFFORT_QOS
    return RECORDED_RELIABLE_QOS


def import_message_class(msgtype: str) -> Any:
    """Import the Python class of ``pkg/msg/Name``.

    Raises:
        ImportError: If the package or class is not importable.

    """
    package, kind, name = msgtype.split("/")
    module = importlib.import_module(f"{package}.{kind}")
    return getattr(module, name)


def _descriptor(name: str, value: Any, description: str) -> ParameterDescriptor:
    if isinstance(value, list):
        return ParameterDescriptor(
            name=name, type=ParameterType.PARAMETER_STRING_ARRAY, description=description
        )
    return ParameterDescriptor(name=name, description=description)


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = RecorderConfig


class RecorderNode(Node):
    """Thin ROS edge over :class:`RecordingEngine`.

    Args:
        **kwargs: Passed to :class:`rclpy.node.Node` (``context``, ``parameter_overrides``).

    Raises:
        ConfigError: If the parameters do not validate against :class:`RecorderConfig`.

    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        self.config = self._declare_config()
        self.engine = RecordingEngine(self.config)
        self._recorded_subs: dict[str, Any] = {}
        self._unavailable: dict[str, str] = {}
        # Service callbacks are coroutines that await the writer thread, so a single-threaded
        # executor keeps serving subscriptions while a bag closes (rclpy's multi-threaded
        # executor costs several times more CPU per message and dropped messages here).
        # Services get their own group: while one awaits, the default group (subscriptions,
        # discovery timer) must stay runnable. The writer thread wakes the executor through a
        # guard condition when it answers.
        self._service_group = MutuallyExclusiveCallbackGroup()
        self._wake = self.create_guard_condition(
            lambda: None, callback_group=ReentrantCallbackGroup()
        )
        for name, handler in (
            ("start_episode", self._on_start),
            ("stop_episode", self._on_stop),
            ("discard_episode", self._on_discard),
            ("next_episode", self._on_next),
        ):
            self.create_service(Trigger, f"~/{name}", handler, callback_group=self._service_group)
        self._discovery_timer = self.create_timer(self.config.discovery_period_s, self._discover)
        self._discover()
        self.get_logger().info(
            f"recording {len(self.config.topics)} topics into {self.config.output_dir}"
        )

    def _declare_config(self) -> RecorderConfig:
        defaults = flatten(RecorderConfig().model_dump(mode="json"))
        descriptions = {n: f.description or "" for n, f in RecorderConfig.model_fields.items()}
        descriptions.update(
            {f"episode.{n}": f.description or "" for n, f in EpisodeDefaults.model_fields.items()}
        )
        values: dict[str, Any] = {}
        for name, default in defaults.items():
            param: Parameter[Any]
            descriptor = _descriptor(name, default, descriptions.get(name, ""))
            if isinstance(default, list) and not default:
                # An empty list cannot tell rclpy its type; declare it as a string array.
                param = self.declare_parameter(name, Parameter.Type.STRING_ARRAY, descriptor)
                values[name] = list(param.value) if param.value is not None else []
            else:
                param = self.declare_parameter(name, default, descriptor)
                values[name] = list(param.value) if isinstance(default, list) else param.value
        try:
            return parse_config(RecorderConfig, unflatten(values), f"{self.get_name()} parameters")
        except ConfigError as error:
            self.get_logger().fatal(str(error))
            raise

    def _episode_info(self) -> EpisodeInfo:
        names = ("task", "object_type", "belt_speed_mps", "operator_notes", "source")
        values = {n: self.get_parameter(f"episode.{n}").value for n in names}
        values["world_config_id"] = self.get_parameter("episode.world_config_id").value
        return EpisodeInfo(episode_id=next_episode_id(self.config.output_dir), **values)

    def _discover(self) -> None:
        graph = dict(self.get_topic_names_and_types())
        for topic in self.config.topics:
            if topic in self._recorded_subs or topic not in graph:
                continue
            msgtype = graph[topic][0]
            try:
                msg_class = import_message_class(msgtype)
            except (ImportError, AttributeError, ValueError) as error:
                if self._unavailable.get(topic) != msgtype:
                    self.get_logger().warning(
                        f"{topic}: type {msgtype} not importable ({error}); not recorded yet, "
                        f"retrying every {self.config.discovery_period_s} s"
                    )
                self._unavailable[topic] = msgtype
                continue
            self.engine.register_topic(topic, msgtype)
            profile = self.config.qos_profile(topic)
            self._recorded_subs[topic] = self.create_subscription(
                msg_class,
                topic,
                lambda data, t=topic: self._on_message(t, data),
                rclpy_qos(profile),
                raw=True,
            )
            self._unavailable.pop(topic, None)
            self.get_logger().info(f"subscribed {topic} [{msgtype}] qos={profile}")

    def _on_message(self, topic: str, data: bytes) -> None:
        self.engine.enqueue(topic, data, self.get_clock().now().nanoseconds)

    async def _wait(self, future: Future[Any]) -> Any:
        """Await a writer-thread future without blocking the executor (subscriptions go on)."""
        ros_future: rclpy.task.Future[None] = rclpy.task.Future()

        def done(_future: Future[Any]) -> None:
            ros_future.set_result(None)
            self._wake.trigger()

        future.add_done_callback(done)
        await ros_future
        return future.result()

    async def _start(self) -> str:
        bag_dir = await self._wait(self.engine.start_episode_async(self._episode_info()))
        self.get_logger().info(f"episode started: {bag_dir}")
        return str(bag_dir)

    async def _stop(self) -> str:
        outcome = str(self.get_parameter("episode.outcome").value)
        notes = str(self.get_parameter("episode.operator_notes").value)
        report = await self._wait(self.engine.stop_episode_async(outcome, notes))
        text = str(report.format())
        if self.engine.queue_drops:
            text += f"\n  queue drops: {dict(self.engine.queue_drops)}"
        self.get_logger().info(text)
        return text

    async def _discard(self) -> str:
        return f"discarded {await self._wait(self.engine.discard_episode_async())}"

    async def _next(self) -> str:
        stopped = (await self._stop()) + "\n" if self.engine.recording else ""
        return stopped + await self._start()

    async def _respond(
        self, response: Trigger.Response, action: Callable[[], Awaitable[str]]
    ) -> Trigger.Response:
        try:
            response.message = await action()
            response.success = True
        except (RecorderStateError, BagWriteError, TimeoutError) as error:
            response.success = False
            response.message = str(error)
            self.get_logger().error(response.message)
        return response

    async def _on_start(
        self, _req: Trigger.Request, response: Trigger.Response
    ) -> Trigger.Response:
        return await self._respond(response, self._start)

    async def _on_stop(self, _req: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return await self._respond(response, self._stop)

    async def _on_discard(
        self, _req: Trigger.Request, response: Trigger.Response
    ) -> Trigger.Response:
        return await self._respond(response, self._discard)

    async def _on_next(self, _req: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return await self._respond(response, self._next)

    def finish(self) -> None:
        """Close the current episode properly and stop the writer thread (used on SIGINT)."""
        outcome = str(self.get_parameter("episode.outcome").value)
        report = self.engine.shutdown(outcome)
        if report is not None:
            self.get_logger().info("episode closed on shutdown\n" + report.format())


def main(args: list[str] | None = None) -> None:
    """Run the recorder until SIGINT; the current episode is finished properly."""
    sys.exit(run_node(RecorderNode, SingleThreadedExecutor, args, finish=RecorderNode.finish))


if __name__ == "__main__":
    main()
