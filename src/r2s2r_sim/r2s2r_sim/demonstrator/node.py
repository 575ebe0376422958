"""ROS wrapper of the human-like demonstrator: drives the real twin like a teleoperator.

Reads ``/joint_states`` and the objects on ``objects_topic``: by default the twin's operator
view ``/twin/operator/object_poses`` (simulator truth: the demonstrator stands in for a person,
who sees the object with their own eyes, not through the cell's tracker; twin only), or the
object tracker's ``/objects/tracks`` (what the cell publishes: a test of steering by the cell's
perception), each with its header stamp (cell time) so that motion is predicted from when the
objects were seen.
Acts only through ``/arm_controller/joint_trajectory`` and ``/hand_controller/joint_trajectory``,
starts trials with ``/trial/start`` (seed + i, condition) and reads ``/trial/outcome``. One
demonstrator (seed + i) per trial; ``trials`` of them, or (``successes`` > 0) until that many
succeeded, at most ``trials`` (:class:`~r2s2r_sim.demonstrator.session.TakeSession`).

With ``recorder_node`` set, the node works the recorder like a teleoperator's foot pedal: it
waits until the recorder is subscribed to ``recorder_topics``, then for every trial sets the
recorder's ``episode.*`` parameters, calls ``/<recorder_node>/start_episode`` before
``/trial/start``, and after the trial's outcome (plus ``recorder_settle_s``, so that the last
messages reach the bag) stores the outcome and trial notes in ``episode.*`` and calls
``/<recorder_node>/stop_episode``: one bag per trial. A trial that cannot start has its
episode discarded. When all trials are done the node exits with code 0 (so a graph with it
as the required node finishes); a recorder that fails or does not answer within
``recorder_timeout_s`` ends it with code 1.
"""

from __future__ import annotations

import enum
import sys
import time
from typing import Any

import numpy as np
import rclpy
import rclpy.task
from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel, resolve_config_path
from r2s2r_common.errors import ExitCode
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.qos import DEFAULT_QOS, OUTCOME_QOS, RELIABLE_QOS
from r2s2r_common.ros.runner import run_node
from r2s2r_common.ros.time import duration_msg
from r2s2r_common.stamps import set_stamp, stamp_to_s
from r2s2r_common.topics import (
    BELT_SPEED,
    HAND_CAMERA_IMAGE,
    HEAD_CAMERA_IMAGE,
    JOINT_STATES,
    OBJECT_TRACKS,
    OPERATOR_OBJECT_POSES,
    TRIAL_OUTCOME,
    TRIAL_START,
    joint_trajectory,
)
from r2s2r_description.controllers import ARM, HAND, controller_name
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_world.world import load_world
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from r2s2r_sim.demonstrator.config import DemonstratorStyle
from r2s2r_sim.demonstrator.core import (
    HumanLikeDemonstrator,
    JointCommand,
    ObjectObservation,
    Observation,
)
from r2s2r_sim.demonstrator.session import Take, TakeSession

RECORDED_TOPICS: tuple[str, ...] = (
    HEAD_CAMERA_IMAGE,
    HAND_CAMERA_IMAGE,
    JOINT_STATES,
    joint_trajectory(controller_name(ARM)),
    joint_trajectory(controller_name(HAND)),
    BELT_SPEED,
    OBJECT_TRACKS,
    TRIAL_OUTCOME,
)
"""What a demonstration episode needs in its bag (bag → dataset conversion and MimicGen)."""


class DemonstratorNodeConfig(ConfigModel):
    """Parameters of the ``demonstrator`` node."""

    trials: int = Field(
        default=20,
        ge=0,
        le=100000,
        description="Trials to run (0: none); with successes > 0 the cap on attempts.",
    )
    successes: int = Field(
        default=0,
        ge=0,
        le=100000,
        description="Run trials until this many succeeded, at most `trials` (0: run `trials`); "
        "an operator re-recording failed takes (each attempt is the next seed).",
    )
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="Seed of the first trial.")
    condition: str = Field(
        default="nominal",
        description="Trial condition: '', nominal, lighting, belt_speed or unseen_object.",
    )
    act_rate_hz: float = Field(default=50.0, gt=0.0, le=500.0, description="Look-and-act rate.")
    objects_topic: str = Field(
        default=OPERATOR_OBJECT_POSES,
        pattern=r"^/[A-Za-z_][A-Za-z0-9_/]*$",
        description="ObjectTrackArray the demonstrator reacts to: the twin's operator view "
        "/twin/operator/object_poses (simulator truth with no lag of its own: a person's eyes), "
        "or the object tracker's /objects/tracks (what the cell publishes).",
    )
    reach_world_path: str = Field(
        default="world/nominal.yaml",
        description="World file the operator believes in (the NOMINAL world, never the twin's); "
        "relative paths resolve against the config/ folder.",
    )
    style: DemonstratorStyle = Field(default_factory=DemonstratorStyle)
    stamp_commands: bool = Field(
        default=True,
        description="Stamp commands with the cell time of the joint state they answer (a past "
        "stamp starts at once, as a zero stamp does), so recorded actions line up with sensor "
        "stamps at any real-time factor.",
    )
    recorder_node: str = Field(
        default="",
        pattern=r"^$|^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$",
        description="Recorder node to start/stop one episode per trial ('' = no recording).",
    )
    recorder_topics: list[str] = Field(
        default_factory=lambda: list(RECORDED_TOPICS),
        description="Topics the recorder must be subscribed to before the first episode.",
    )
    recorder_settle_s: float = Field(
        default=1.0,
        ge=0.0,
        le=30.0,
        description="Wall time from a trial's outcome to stopping its episode (last messages).",
    )
    recorder_timeout_s: float = Field(
        default=120.0,
        gt=0.0,
        le=3600.0,
        description="Longest wait for the recorder: its topics at start-up, and each call.",
    )

    @model_validator(mode="after")
    def _successes_within_trials(self) -> DemonstratorNodeConfig:
        if self.successes > self.trials:
            raise ValueError(
                f"successes = {self.successes} > trials = {self.trials}: trials is the cap on "
                "attempts and must allow at least that many"
            )
        return self


def to_trajectory_msg(command: JointCommand, stamp_s: float = 0.0) -> JointTrajectory:
    """Convert a :class:`JointCommand` to a JointTrajectory.

    Args:
        command: The command (``time_from_start`` per point).
        stamp_s: ``header.stamp`` in the cell's clock; 0 means "start now". A stamp at or
            before the cell's current time also starts at once on the twin.

    """
    msg = JointTrajectory()
    if stamp_s > 0.0:
        set_stamp(msg.header.stamp, stamp_s)
    msg.joint_names = list(command.joint_names)
    for t, positions in zip(command.times_s, command.positions, strict=True):
        msg.points.append(
            JointTrajectoryPoint(
                positions=[float(p) for p in positions], time_from_start=duration_msg(float(t))
            )
        )
    return msg


def joint_vector(msg: JointState) -> np.ndarray | None:
    """Positions in :data:`ALL_JOINT_NAMES` order, or None if a joint is missing."""
    index = {name: i for i, name in enumerate(msg.name)}
    if any(n not in index for n in ALL_JOINT_NAMES) or len(msg.position) != len(msg.name):
        return None
    return np.array([msg.position[index[n]] for n in ALL_JOINT_NAMES])


def objects_from_msg(msg: Any) -> tuple[ObjectObservation, ...]:
    """ObjectTrackArray → observations (ids as strings)."""
    result = []
    for track in msg.tracks:
        p, q, v = track.pose.position, track.pose.orientation, track.twist.linear
        result.append(
            ObjectObservation(
                object_id=str(track.id),
                type_name=track.object_type,
                position_m=np.array([p.x, p.y, p.z]),
                quat_wxyz=np.array([q.w, q.x, q.y, q.z]),
                velocity_mps=np.array([v.x, v.y, v.z]),
            )
        )
    return tuple(result)


class Stage(enum.Enum):
    """Where the node is in its trial (and episode) sequence."""

    IDLE = "idle"
    WAITING_RECORDER = "waiting_recorder"
    STARTING_EPISODE = "starting_episode"
    STARTING_TRIAL = "starting_trial"
    RUNNING = "running"
    SETTLING = "settling"
    STOPPING_EPISODE = "stopping_episode"
    DISCARDING_EPISODE = "discarding_episode"
    DONE = "done"
    FAILED = "failed"


_RECORDER_STAGES = (
    Stage.WAITING_RECORDER,
    Stage.STARTING_EPISODE,
    Stage.STOPPING_EPISODE,
    Stage.DISCARDING_EPISODE,
)
"""Stages that wait on the recorder (bounded by ``recorder_timeout_s``)."""


def recorder_service(recorder_node: str, name: str) -> str:
    """Absolute name of a recorder service, e.g. ``/recorder/start_episode``."""
    return f"/{recorder_node.strip('/')}/{name}"


def trial_notes(outcome: Any) -> str:
    """Operator notes stored with an episode: the trial's identity and the operator's verdict."""
    return (
        f"human-like demonstrator; trial_id={outcome.trial_id} seed={outcome.seed} "
        f"condition={outcome.condition} object_type={outcome.object_type} "
        f"reason={outcome.reason} duration_s={outcome.duration_s:.3f}"
    )


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = DemonstratorNodeConfig


class DemonstratorNode(Node):
    """Runs ``trials`` demonstrations on the twin through its controller topics.

    Args:
        **kwargs: Passed to :class:`rclpy.node.Node` (``context``, ``parameter_overrides``).

    Raises:
        ConfigError: If the parameters do not validate.

    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("demonstrator", **kwargs)
        from r2s2r_interfaces.msg import ObjectTrackArray, TrialOutcome
        from r2s2r_interfaces.srv import StartTrial

        self.config = declare_config(self, PARAMETER_SCHEMA)
        self.reach_world = load_world(resolve_config_path(self.config.reach_world_path))
        self._start_type = StartTrial
        self.arm_pub = self.create_publisher(
            JointTrajectory, joint_trajectory(controller_name(ARM)), RELIABLE_QOS
        )
        self.hand_pub = self.create_publisher(
            JointTrajectory, joint_trajectory(controller_name(HAND)), RELIABLE_QOS
        )
        self.create_subscription(JointState, JOINT_STATES, self._on_joints, DEFAULT_QOS)
        self.create_subscription(
            ObjectTrackArray, self.config.objects_topic, self._on_objects, DEFAULT_QOS
        )
        self.create_subscription(TrialOutcome, TRIAL_OUTCOME, self._on_outcome, OUTCOME_QOS)
        self.start_client: Any = self.create_client(StartTrial, TRIAL_START)
        self.joints: np.ndarray | None = None
        self.joints_time_s = 0.0
        self.objects: tuple[ObjectObservation, ...] = ()
        self.objects_time_s: float | None = None
        self._trial_requested_s = 0.0
        self.demonstrator: HumanLikeDemonstrator | None = None
        self.trial_index = 0
        self.trial_id: int | None = None
        self.stage = Stage.IDLE
        self.outcomes: list[tuple[int, bool, str, float]] = []
        self.session = TakeSession(self.config.trials, self.config.successes)
        self.commands_sent = 0
        self.episodes_recorded: list[str] = []
        self.exit_code = 0
        self.finished: rclpy.task.Future[int] = rclpy.task.Future()
        self._stage_since = time.monotonic()
        self._recorder_ready = False
        self._settle_timer: Any = None
        self._last_outcome: Any = None
        self._recorder: dict[str, Any] = {}
        if self.config.recorder_node:
            name = self.config.recorder_node
            self._recorder = {
                "set_parameters": self.create_client(
                    SetParameters, recorder_service(name, "set_parameters")
                ),
                **{
                    action: self.create_client(Trigger, recorder_service(name, action))
                    for action in ("start_episode", "stop_episode", "discard_episode")
                },
            }
            self.get_logger().info(
                f"recording one episode per trial with {recorder_service(name, 'start_episode')}"
            )
        self.create_timer(1.0 / self.config.act_rate_hz, self._tick)

    # -- inputs ----------------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        vector = joint_vector(msg)
        if vector is None:
            self.get_logger().warn("joint_states without all 18 joints: ignored", once=True)
            return
        self.joints = vector
        self.joints_time_s = stamp_to_s(msg.header.stamp)

    def _on_objects(self, msg: Any) -> None:
        stamp = stamp_to_s(msg.header.stamp)
        if stamp < self._trial_requested_s:
            return  # seen before this trial was asked for (the previous trial's belt)
        self.objects = objects_from_msg(msg)
        self.objects_time_s = stamp if stamp > 0.0 else None

    def _on_outcome(self, msg: Any) -> None:
        if self.trial_id is None or int(msg.trial_id) != self.trial_id:
            return
        self.outcomes.append((self.trial_id, bool(msg.success), str(msg.reason), msg.duration_s))
        self.session.record(Take(int(msg.seed), bool(msg.success), str(msg.reason)))
        self.get_logger().info(
            f"trial {msg.trial_id} (seed {msg.seed}): {msg.reason} "
            f"after {msg.duration_s:.2f} s ({self.session.summary()})"
        )
        self.trial_id = None
        self.demonstrator = None
        self._last_outcome = msg
        if self._recorder:
            self._set_stage(Stage.SETTLING)
            self._settle_timer = self.create_timer(
                max(self.config.recorder_settle_s, 1e-3), self._on_settled
            )
        else:
            self.trial_index += 1
            self._set_stage(Stage.IDLE)

    # -- sequence --------------------------------------------------------------------------
    def _set_stage(self, stage: Stage) -> None:
        self.stage = stage
        self._stage_since = time.monotonic()

    def _finish(self, code: int, reason: str) -> None:
        if self.finished.done():
            return
        self.exit_code = code
        self._set_stage(Stage.DONE if code == 0 else Stage.FAILED)
        log = self.get_logger().info if code == 0 else self.get_logger().error
        log(reason)
        self.finished.set_result(code)

    def _call(self, client: Any, request: Any, on_done: Any) -> None:
        """Call a service; ``on_done(response)`` runs with the response or None on failure."""

        def done(future: Any) -> None:
            try:
                response = future.result()
            except Exception as error:  # rclpy raises what the transport raised
                self._finish(ExitCode.FAILED, f"{client.srv_name}: call failed: {error}")
                return
            on_done(response)

        client.call_async(request).add_done_callback(done)

    def _check_recorder_ready(self) -> bool:
        """Return True once the recorder's services are up and it has ``recorder_topics``."""
        if self._recorder_ready:
            return True
        if not all(client.service_is_ready() for client in self._recorder.values()):
            return False
        name = self.config.recorder_node.strip("/")
        node_name = name.rsplit("/", 1)[-1]
        namespace = "/" + name.rsplit("/", 1)[0] if "/" in name else "/"
        for topic in self.config.recorder_topics:
            endpoints = self.get_subscriptions_info_by_topic(topic)
            if not any(
                e.node_name == node_name and e.node_namespace == namespace for e in endpoints
            ):
                return False
        self._recorder_ready = True
        self.get_logger().info(
            f"recorder ready: subscribed to all {len(self.config.recorder_topics)} topics"
        )
        return True

    def _set_episode_parameters(self, values: dict[str, str], on_done: Any) -> None:
        request = SetParameters.Request()
        request.parameters = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]

        def done(response: Any) -> None:
            failed = [
                f"{p.name}: {r.reason}"
                for p, r in zip(request.parameters, response.results, strict=False)
                if not r.successful
            ]
            if failed or len(response.results) != len(request.parameters):
                self._finish(ExitCode.FAILED, f"recorder refused parameters: {failed}")
                return
            on_done()

        self._call(self._recorder["set_parameters"], request, done)

    def _begin_episode(self) -> None:
        """Reset the recorder's outcome (no stale verdict), start the episode, then the trial."""
        self._set_stage(Stage.STARTING_EPISODE)
        seed = self.config.seed + self.trial_index
        notes = f"human-like demonstrator; seed={seed} condition={self.config.condition}"

        def start_episode() -> None:
            self._call(self._recorder["start_episode"], Trigger.Request(), on_started)

        def on_started(response: Any) -> None:
            if not response.success:
                self._finish(ExitCode.FAILED, f"start_episode failed: {response.message}")
                return
            self.get_logger().info(f"episode recording: {response.message}")
            self._start_trial()

        self._set_episode_parameters(
            {"episode.outcome": "unknown", "episode.operator_notes": notes}, start_episode
        )

    def _on_settled(self) -> None:
        if self._settle_timer is not None:
            self._settle_timer.cancel()
            self.destroy_timer(self._settle_timer)
            self._settle_timer = None
        outcome = self._last_outcome
        self._set_stage(Stage.STOPPING_EPISODE)

        def stop_episode() -> None:
            self._call(self._recorder["stop_episode"], Trigger.Request(), on_stopped)

        def on_stopped(response: Any) -> None:
            if not response.success:
                self._finish(ExitCode.FAILED, f"stop_episode failed: {response.message}")
                return
            self.episodes_recorded.append(str(response.message))
            self.get_logger().info(f"episode stopped: {response.message}")
            self.trial_index += 1
            self._set_stage(Stage.IDLE)

        self._set_episode_parameters(
            {
                "episode.outcome": "success" if outcome.success else "failure",
                "episode.operator_notes": trial_notes(outcome),
            },
            stop_episode,
        )

    def _start_trial(self) -> None:
        self._set_stage(Stage.STARTING_TRIAL)
        request = self._start_type.Request()
        request.seed = self.config.seed + self.trial_index
        request.condition = self.config.condition
        self._trial_requested_s = self.joints_time_s
        self.start_client.call_async(request).add_done_callback(self._on_started)

    def _on_started(self, future: Any) -> None:
        response = future.result()
        if response is None or not response.success:
            self.get_logger().error(f"{TRIAL_START} failed: {getattr(response, 'message', '')}")
            if self._recorder:  # no trial: the open episode is not a demonstration
                self._set_stage(Stage.DISCARDING_EPISODE)
                self._call(
                    self._recorder["discard_episode"],
                    Trigger.Request(),
                    lambda _response: self._set_stage(Stage.IDLE),
                )
            else:
                self._set_stage(Stage.IDLE)
            return
        self.trial_id = int(response.trial_id)
        self.objects, self.objects_time_s = (), None
        self.demonstrator = HumanLikeDemonstrator(
            self.reach_world, self.config.seed + self.trial_index, self.config.style
        )
        self._set_stage(Stage.RUNNING)

    def _tick(self) -> None:
        if self.stage == Stage.RUNNING:
            self._act()
            return
        waiting = time.monotonic() - self._stage_since
        if self.stage in _RECORDER_STAGES and waiting > self.config.recorder_timeout_s:
            self._finish(
                ExitCode.FAILED,
                f"recorder {self.config.recorder_node!r}: no progress in stage "
                f"{self.stage.value} for {waiting:.0f} s (recorder_timeout_s)",
            )
            return
        if self.stage not in (Stage.IDLE, Stage.WAITING_RECORDER):
            return
        if self.session.done:
            self._finish(0, f"trials done: {self.summary()}")
            return
        if not self.start_client.service_is_ready():
            return
        if self._recorder:
            if not self._check_recorder_ready():
                if self.stage == Stage.IDLE:
                    self._set_stage(Stage.WAITING_RECORDER)
                return
            self._begin_episode()
        else:
            self._start_trial()

    def _act(self) -> None:
        if self.demonstrator is None or self.joints is None:
            return
        observation = Observation(
            self.joints_time_s, self.joints, self.objects, self.objects_time_s
        )
        stamp = self.joints_time_s if self.config.stamp_commands else 0.0
        for command in self.demonstrator.act(observation):
            publisher = self.arm_pub if command.controller == "arm" else self.hand_pub
            publisher.publish(to_trajectory_msg(command, stamp))
            self.commands_sent += 1

    def summary(self) -> str:
        """One line: successes, trials and recorded episodes."""
        text = self.session.summary()
        if self._recorder:
            text += f", {len(self.episodes_recorded)} episodes recorded"
        return text


def main(args: list[str] | None = None) -> None:
    """Run the demonstrator node until its trials are done (exit 0) or it fails (exit 1, 2)."""
    sys.exit(
        run_node(
            DemonstratorNode,
            SingleThreadedExecutor,
            args,
            until=lambda node: node.finished.done(),
            exit_code=lambda node: node.exit_code,
        )
    )
