"""``policy_inference``: a lifecycle node that drives the arm and hand with a policy checkpoint.

configure: parameters -> :class:`PolicyInferenceParams`; the checkpoint is loaded with
``load_checkpoint(path, expected=RobotSpec)`` where the robot spec comes from the parameters
(camera keys and the image size this node feeds, joint and action names, belt speed, the
tracked object). A spec mismatch logs every mismatch and returns FAILURE: the node stays
unconfigured and never commands. Subscriptions: ``/<camera>/image_raw`` per camera key
(sensor-data QoS; ``head_camera_rgb`` -> ``/head_camera/image_raw``), ``/joint_states``,
``/belt/speed``, ``/objects/tracks`` (made into the tracked-object vector by the same
:class:`~r2s2r_dataset.ObjectTrackLatch` as the datasets).

activate: observations are cleared (the policy waits for fresh inputs) and the
:class:`~r2s2r_policy.inference.engine.InferenceEngine` worker thread starts; every action chunk is
published as ONE JointTrajectory with several points (``time_from_start`` set, header stamp
zero = start now) per controller on ``/arm_controller/joint_trajectory`` and
``/hand_controller/joint_trajectory``. Safety (joint position and velocity limits, stale inputs
-> one hold then nothing, NaN/Inf chunks dropped, and the safety layer: palm box, saturation,
no-action and freeze watchdog) is the engine's; the node adds the one-commander check (another
publisher on a controller's topic stops the policy). A safety stop sends one hold, says ERROR on
``/diagnostics`` with its cause, and lasts until ``~/rearm`` (std_srvs/Trigger).

deactivate: the worker stops at once and one hold at the measured position is sent. cleanup:
the policy, subscriptions and publishers are freed. ``/diagnostics`` (1 Hz): inference latency
p50/p99, observation ages, commands and holds sent, safety interventions by kind, dropped
messages.

Live real/sim monitor (``real_likeness_monitor``, on by default): when the checkpoint holds a
latent index (``latent_index.npz``, written by ``r2s2r analyze index``), every inference's
latent is judged against the policy's real and simulated training latents
(:mod:`r2s2r_policy.analysis.index`), after its command was sent; the node publishes each
judgement from its executor (never from the inference thread) on ``/diagnostics`` as
``policy_inference: real-likeness``: ``real_likeness`` (share of real latents among the k
nearest; 0.5: indistinguishable), its running mean over ``real_likeness_window`` inferences
and ``nearest_real_distance``; WARN while the running mean is below
``real_likeness_warn_below`` (the policy is running on sim-derived behavior). An index built
for other weights is refused (configure FAILURE, one line); without an index the monitor is
off. One info line at configure says which.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TwistStamped
from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_common.image_conversion import ImageConversionError, from_image_msg
from r2s2r_common.ros.diagnostics import diagnostics_array
from r2s2r_common.ros.lifecycle import SchemaLifecycleNode
from r2s2r_common.ros.qos import DEFAULT_QOS, RELIABLE_QOS, SENSOR_DATA_QOS
from r2s2r_common.ros.runner import run_lifecycle_node
from r2s2r_common.ros.time import duration_msg, stamp_to_s
from r2s2r_common.topics import (
    BELT_SPEED,
    DIAGNOSTICS,
    JOINT_STATES,
    OBJECT_TRACKS,
    camera_image,
    joint_trajectory,
)
from r2s2r_description.controllers import controller_name
from r2s2r_description.robot import ALL_JOINT_NAMES
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from r2s2r_dataset import (
    TRACKER_SOURCE,
    object_track_fields,
    track_view_from_msg,
)
from r2s2r_interfaces.msg import ObjectTrackArray
from r2s2r_policy.analysis.index import (
    LatentIndexError,
    LiveLikenessMonitor,
    MonitorReading,
    load_latent_index,
)
from r2s2r_policy.checkpoint import CheckpointError, load_checkpoint
from r2s2r_policy.inference.commands import ActionCommand
from r2s2r_policy.inference.engine import InferenceConfig, InferenceEngine
from r2s2r_policy.inference.safety_layer import SafetyLayerConfig, StopCause
from r2s2r_policy.spec import DEFAULT_IMAGE_KEYS, ImageSpec, RobotSpec, SpecMismatchError


class PolicyInferenceParams(ConfigModel):
    """Parameters of the ``policy_inference`` node (each one a declared ROS parameter)."""

    checkpoint_path: str = Field(
        default="", description="Policy checkpoint directory (model.safetensors + config.yaml)."
    )
    stale_observation_s: float = Field(
        default=0.2,
        gt=0.0,
        le=10.0,
        description="An input older than this (wall clock since receipt) stops commanding.",
    )
    command_rate_hz: float = Field(
        default=0.0,
        ge=0.0,
        le=1000.0,
        description="Inference/command rate (wall clock); 0 = the checkpoint's control rate.",
    )
    velocity_limit_scale: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Fraction of the joint velocity limits allowed."
    )
    hold_time_s: float = Field(
        default=0.1, gt=0.0, le=10.0, description="time_from_start of a hold command's point."
    )
    trigger: Literal["images", "timer"] = Field(
        default="images",
        description="images: infer when every camera has a new frame; timer: every period.",
    )
    camera_keys: list[str] = Field(
        default_factory=lambda: list(DEFAULT_IMAGE_KEYS),
        min_length=1,
        description="Camera inputs offered; key 'X_rgb' is read from /X/image_raw.",
    )
    image_height_px: int = Field(
        default=128, ge=8, le=1024, description="Height the node resizes every image to."
    )
    image_width_px: int = Field(
        default=128, ge=8, le=1024, description="Width the node resizes every image to."
    )
    joint_names: list[str] = Field(
        default_factory=lambda: list(ALL_JOINT_NAMES),
        min_length=1,
        description="Joint state the robot offers (policy order).",
    )
    action_names: list[str] = Field(
        default_factory=lambda: list(ALL_JOINT_NAMES),
        min_length=1,
        description="Commandable joints (policy order).",
    )
    has_belt_speed: bool = Field(default=True, description="Whether /belt/speed is available.")
    has_object_tracks: bool = Field(
        default=True, description="Whether /objects/tracks (object_tracker) is available."
    )
    object_track_types: list[str] = Field(
        default_factory=list,
        description="Object types of the object_tracker's catalogue, in its order (the "
        "tracked-object input offered from /objects/tracks); empty: no tracker in the graph.",
    )
    execution: Literal["receding", "temporal_ensemble"] = Field(
        default="temporal_ensemble",
        description="receding: a new chunk every executed_steps control steps replaces the "
        "last; temporal_ensemble: a chunk every step, targets averaged over chunks (ACT; "
        "chosen on validation seeds, results/policy_validation_execution.json).",
    )
    executed_steps: int = Field(
        default=1, ge=1, le=256, description="receding: chunk steps run before the next chunk."
    )
    ensemble_weight_decay: float = Field(
        default=0.01, ge=0.0, le=10.0, description="temporal_ensemble: m of exp(-m·i) weights."
    )
    joint_states_topic: str = Field(default=JOINT_STATES, description="JointState input.")
    belt_speed_topic: str = Field(default=BELT_SPEED, description="TwistStamped belt speed.")
    object_tracks_topic: str = Field(
        default=OBJECT_TRACKS, description="ObjectTrackArray input (object_tracker)."
    )
    diagnostics_period_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="Period of /diagnostics."
    )
    trace_dir: str = Field(
        default="",
        description="Write the inference trace of every activation there "
        "(activation_NNNN.npz: what the policy saw and sent, r2s2r_policy.inference.trace); "
        "empty: no trace.",
    )
    trace_images: bool = Field(
        default=False,
        description="The traces also keep the camera images each step read, at the "
        "checkpoint's size (what latent analysis re-runs policies on, r2s2r_policy.analysis; "
        "~1 MB per 15 s at 64 px).",
    )
    torch_threads: int = Field(
        default=1, ge=0, le=64, description="torch intra-op threads (0 = torch default)."
    )
    real_likeness_monitor: bool = Field(
        default=True,
        description="Judge every inference's latent against the checkpoint's real/sim latent "
        "index (latent_index.npz, from 'r2s2r analyze index') and publish its real-likeness "
        "on /diagnostics ('<node>: real-likeness'); a checkpoint without an index runs "
        "without (one info line says whether the monitor is on).",
    )
    real_likeness_window: int = Field(
        default=30,
        ge=1,
        le=10000,
        description="Inferences in the running mean of real-likeness (30 = 3 s at 10 Hz).",
    )
    real_likeness_warn_below: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="WARN while the running mean of real-likeness is below this: the policy's "
        "latents look like its simulated training data, not its real demonstrations (running "
        "on sim-derived behavior; 0.5 = the two are indistinguishable).",
    )
    safety: SafetyLayerConfig = Field(
        default_factory=SafetyLayerConfig,
        description="The safety layer (r2s2r_policy.inference.safety_layer): palm box, "
        "watchdog; a stop holds the arm until ~/rearm.",
    )
    commander_check_period_s: float = Field(
        default=0.2,
        gt=0.0,
        le=10.0,
        description="Period of the check that this node is the only publisher on each "
        "controller's command topic (a second commander stops the policy and holds).",
    )
    autostart: bool = Field(
        default=True, description="Configure and activate at start-up (no lifecycle manager)."
    )

    @property
    def offers_object_tracks(self) -> bool:
        """Whether the node offers the tracked-object input."""
        return self.has_object_tracks and bool(self.object_track_types)

    def robot_spec(self) -> RobotSpec:
        """Return what this node offers a policy."""
        return RobotSpec(
            images=[
                ImageSpec(key=key, height_px=self.image_height_px, width_px=self.image_width_px)
                for key in self.camera_keys
            ],
            joint_names=list(self.joint_names),
            action_names=list(self.action_names),
            has_belt_speed=self.has_belt_speed,
            object_track_fields=(
                object_track_fields(self.object_track_types) if self.offers_object_tracks else []
            ),
            object_track_source=TRACKER_SOURCE if self.offers_object_tracks else "",
        )

    def inference_config(self) -> InferenceConfig:
        """Return the engine's settings."""
        return InferenceConfig(
            stale_observation_s=self.stale_observation_s,
            command_rate_hz=self.command_rate_hz,
            velocity_limit_scale=self.velocity_limit_scale,
            hold_time_s=self.hold_time_s,
            trigger=self.trigger,
            execution=self.execution,
            executed_steps=self.executed_steps,
            ensemble_weight_decay=self.ensemble_weight_decay,
            safety=self.safety,
        )


def camera_topic(key: str) -> str:
    """Return the image topic of a camera key: ``head_camera_rgb`` -> ``/head_camera/image_raw``."""
    return camera_image(key.removesuffix("_rgb"))


def trajectory_messages(command: ActionCommand) -> dict[str, JointTrajectory]:
    """One JointTrajectory per controller (header stamp zero: start on receipt)."""
    messages: dict[str, JointTrajectory] = {}
    durations = [duration_msg(float(t)) for t in command.times_s]
    for controller, (names, positions) in command.by_controller().items():
        msg = JointTrajectory(joint_names=list(names))
        msg.points = [
            JointTrajectoryPoint(positions=row.tolist(), time_from_start=durations[index])
            for index, row in enumerate(np.asarray(positions, dtype=np.float64))
        ]
        messages[controller] = msg
    return messages


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = PolicyInferenceParams


class PolicyInferenceNode(SchemaLifecycleNode[PolicyInferenceParams]):
    """The policy inference node; see the module docstring.

    Args:
        node_name: ROS node name.
        **kwargs: Passed to ``rclpy.lifecycle.Node`` (``context``, ``parameter_overrides``...).

    """

    def __init__(self, node_name: str = "policy_inference", **kwargs: Any) -> None:
        super().__init__(node_name, PARAMETER_SCHEMA, **kwargs)
        self.params: PolicyInferenceParams | None = None
        self.engine: InferenceEngine | None = None
        self.last_error = ""
        self._pubs: dict[str, Any] = {}
        self._subs: list[Any] = []
        self._diagnostics_timer: Any = None
        self._commander_timer: Any = None
        self._monitor: LiveLikenessMonitor | None = None
        self._likeness_guard: Any = None
        self._dropped: dict[str, int] = {}
        self._dropped_lock = threading.Lock()
        self._active = False
        self._activations = 0
        self.create_service(Trigger, "~/rearm", self._on_rearm)

    # -- lifecycle ---------------------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        """Load the checkpoint against the robot spec; FAILURE (reason logged) if it misfits."""
        try:
            params = self.config_from_parameters()
            if not params.checkpoint_path:
                raise ConfigError("checkpoint_path: expected a checkpoint directory, got ''")
            loaded = load_checkpoint(params.checkpoint_path, expected=params.robot_spec())
            if params.torch_threads > 0:
                import torch

                torch.set_num_threads(params.torch_threads)
            engine = InferenceEngine(
                loaded.policy, params.inference_config(), publish=self._publish_command
            )
            index = (
                load_latent_index(loaded.path, loaded.policy)
                if params.real_likeness_monitor
                else None
            )
        except LatentIndexError as error:
            self.last_error = f"{error} (or set real_likeness_monitor false)"
            self.get_logger().error(f"configure failed: {self.last_error}")
            return TransitionCallbackReturn.FAILURE
        except (ConfigError, CheckpointError, SpecMismatchError, KeyError, ValueError) as error:
            self.last_error = str(error)
            self.get_logger().error(f"configure failed: {error}")
            return TransitionCallbackReturn.FAILURE
        self.params, self.engine, self.last_error = params, engine, ""
        self._dropped = {"image": 0, "joint_states": 0, "belt_speed": 0, "object_tracks": 0}
        self._create_interfaces(params)
        if index is not None:
            self._monitor = LiveLikenessMonitor(
                index, params.real_likeness_window, notify=self._likeness_guard.trigger
            )
            engine.monitor = self._monitor
        spec = loaded.policy.spec
        self.get_logger().info(
            f"configured: {loaded.path} ({spec.model.type}, chunk {spec.chunk_length} at "
            f"{spec.control_rate_hz:g} Hz, commands every {engine.period_s * 1e3:.0f} ms)"
        )
        if index is not None:
            monitor = (
                f"on ({index.per_domain} real + {index.per_domain} sim latents, k "
                f"{index.k}; WARN below {params.real_likeness_warn_below:g} mean over "
                f"{params.real_likeness_window} inferences)"
            )
        elif params.real_likeness_monitor:
            monitor = "off (the checkpoint has no latent_index.npz: r2s2r analyze index builds one)"
        else:
            monitor = "off (real_likeness_monitor is false)"
        self.get_logger().info(f"real-likeness monitor: {monitor}")
        return TransitionCallbackReturn.SUCCESS

    def _create_interfaces(self, params: PolicyInferenceParams) -> None:
        self._pubs = {
            controller: self.create_lifecycle_publisher(
                JointTrajectory, joint_trajectory(controller_name(controller)), RELIABLE_QOS
            )
            for controller in ("arm", "hand")
        }
        self._pubs["diagnostics"] = self.create_publisher(DiagnosticArray, DIAGNOSTICS, 10)
        self._subs = [
            self.create_subscription(
                Image,
                camera_topic(key),
                lambda msg, key=key: self._on_image(key, msg),
                SENSOR_DATA_QOS,
            )
            for key in params.camera_keys
        ]
        self._subs.append(
            self.create_subscription(
                JointState, params.joint_states_topic, self._on_joint_states, DEFAULT_QOS
            )
        )
        if params.has_belt_speed:
            self._subs.append(
                self.create_subscription(
                    TwistStamped, params.belt_speed_topic, self._on_belt_speed, DEFAULT_QOS
                )
            )
        if params.offers_object_tracks:
            self._subs.append(
                self.create_subscription(
                    ObjectTrackArray, params.object_tracks_topic, self._on_tracks, DEFAULT_QOS
                )
            )
        self._diagnostics_timer = self.create_timer(
            params.diagnostics_period_s, self._publish_diagnostics
        )
        self._commander_timer = self.create_timer(
            params.commander_check_period_s, self._check_single_commander
        )
        # Triggered by the monitor on the inference thread; its callback publishes on the
        # executor's, so publishing never delays an inference.
        self._likeness_guard = self.create_guard_condition(self._publish_likeness)

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        """Clear observations and start the inference worker."""
        result = super().on_activate(state)
        assert self.engine is not None and self.params is not None
        self.engine.reset()
        if self.params.trace_dir:
            self.engine.new_trace(keep_images=self.params.trace_images)
        self._active = True
        self.engine.start()
        self.get_logger().info("active: commanding the arm and hand")
        return result

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        """Stop commanding at once and send one hold at the measured position."""
        self._active = False
        if self.engine is not None:
            self.engine.stop(send_hold=True)
            self._save_trace()
        self.get_logger().info("inactive: commands stopped, holding")
        return super().on_deactivate(state)

    def _save_trace(self) -> None:
        """Write the trace of the activation that just ended (``activation_NNNN.npz``)."""
        engine, params = self.engine, self.params
        if engine is None or params is None or engine.trace is None:
            return
        self._activations += 1
        path = Path(params.trace_dir) / f"activation_{self._activations:04d}.npz"
        try:
            engine.trace.save(path)
        except OSError as error:
            self.get_logger().error(f"trace not written to {path}: {error}")
        engine.trace = None

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        """Free the policy, subscriptions and publishers."""
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        """Stop commanding (with a hold if active) and free everything."""
        if self._active and self.engine is not None:
            self._active = False
            self.engine.stop(send_hold=True)
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        if self.engine is not None:
            self.engine.stop(send_hold=False)
        self.engine = None
        for subscription in self._subs:
            self.destroy_subscription(subscription)
        self._subs = []
        for timer in (self._diagnostics_timer, self._commander_timer):
            if timer is not None:
                self.destroy_timer(timer)
        self._diagnostics_timer = self._commander_timer = None
        self._monitor = None
        if self._likeness_guard is not None:  # after the engine stopped: nobody triggers it
            self.destroy_guard_condition(self._likeness_guard)
            self._likeness_guard = None
        for key, publisher in self._pubs.items():
            if key == "diagnostics":
                self.destroy_publisher(publisher)
            else:
                self.destroy_lifecycle_publisher(publisher)
        self._pubs = {}
        self.params = None

    # -- inputs (short callbacks: convert and store; inference runs on the engine's thread) ---
    def _drop(self, what: str, reason: str) -> None:
        with self._dropped_lock:
            self._dropped[what] = self._dropped.get(what, 0) + 1
        self.get_logger().warning(f"dropped {what} message: {reason}", throttle_duration_sec=5.0)

    def _on_image(self, key: str, msg: Image) -> None:
        engine = self.engine
        if engine is None:
            return
        try:
            array = from_image_msg(msg)
            if msg.encoding == "bgr8":
                array = np.ascontiguousarray(array[:, :, ::-1])
            elif msg.encoding != "rgb8":
                raise ImageConversionError(f"encoding {msg.encoding!r}: expected rgb8 or bgr8")
            engine.observe_image(key, array, stamp_to_s(msg.header.stamp))
        except (ImageConversionError, ValueError) as error:
            self._drop("image", f"{key}: {error}")

    def _on_joint_states(self, msg: JointState) -> None:
        engine = self.engine
        if engine is None:
            return
        try:
            engine.observe_joints(list(msg.name), list(msg.position), stamp_to_s(msg.header.stamp))
        except ValueError as error:
            self._drop("joint_states", str(error))

    def _on_belt_speed(self, msg: TwistStamped) -> None:
        engine = self.engine
        if engine is None:
            return
        try:
            engine.observe_belt_speed(float(msg.twist.linear.x), stamp_to_s(msg.header.stamp))
        except ValueError as error:
            self._drop("belt_speed", str(error))

    def _on_tracks(self, msg: ObjectTrackArray) -> None:
        engine = self.engine
        if engine is None or not engine.uses_object_tracks:
            return
        try:
            engine.observe_object_tracks(
                [track_view_from_msg(track) for track in msg.tracks], stamp_to_s(msg.header.stamp)
            )
        except ValueError as error:
            self._drop("object_tracks", str(error))

    # -- outputs -----------------------------------------------------------------------------
    def _publish_command(self, command: ActionCommand) -> None:
        for controller, msg in trajectory_messages(command).items():
            publisher = self._pubs.get(controller)
            if publisher is not None:
                publisher.publish(msg)

    def _check_single_commander(self) -> None:
        """Stop the policy (one hold) when another node publishes on a controller's topic."""
        engine = self.engine
        if engine is None or not self._active or engine.safety_stop is not None:
            return
        for controller in ("arm", "hand"):
            topic = joint_trajectory(controller_name(controller))
            others = self.count_publishers(topic) - 1
            if others > 0:
                stop = engine.trip_safety_stop(
                    StopCause.SECOND_COMMANDER,
                    f"{others} other publisher(s) on {topic} while the policy commands it; "
                    "one commander per controller",
                )
                self.get_logger().error(f"{stop}: holding; call ~/rearm after removing it")
                return

    def _on_rearm(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        """``~/rearm``: clear a safety stop (an operator's explicit act)."""
        engine = self.engine
        if engine is None:
            response.success, response.message = False, "not configured: nothing to re-arm"
            return response
        cleared = engine.rearm()
        response.success = True
        response.message = f"re-armed after {cleared}" if cleared else "was armed"
        self.get_logger().warning(response.message)
        return response

    def _publish_diagnostics(self) -> None:
        engine = self.engine
        if engine is None:
            return
        stats = engine.stats()
        with self._dropped_lock:
            dropped = dict(self._dropped)
        values = {
            "state": "active" if self._active else "inactive",
            "inference_latency_p50_ms": f"{stats.latency_p50_s * 1e3:.2f}",
            "inference_latency_p99_ms": f"{stats.latency_p99_s * 1e3:.2f}",
            "commands_sent": str(stats.commands_sent),
            "holds_sent": str(stats.holds_sent),
            **{f"safety_{k}": str(v) for k, v in stats.interventions.items()},
            **{
                f"observation_age_ms.{k}": f"{v * 1e3:.1f}"
                for k, v in stats.observation_age_s.items()
            },
            **{f"dropped_{k}": str(v) for k, v in dropped.items()},
            "last_error": stats.last_error,
        }
        params = self.params
        stale = params is not None and any(
            age > params.stale_observation_s for age in stats.observation_age_s.values()
        )
        level, message = DiagnosticStatus.OK, "commanding" if self._active else "inactive"
        if self._active and stale:
            level, message = DiagnosticStatus.WARN, "stale observations: holding"
        if stats.interventions.get("inference_error", 0) or stats.interventions.get(
            "non_finite_action", 0
        ):
            level = DiagnosticStatus.WARN
            message += " (chunks dropped)"
        values["safety_stop"] = stats.safety_stop_cause
        if stats.safety_stop:
            level = DiagnosticStatus.ERROR
            message = f"{stats.safety_stop}; holding until ~/rearm"
        array = diagnostics_array(
            f"{self.get_name()}: policy",
            level,
            message,
            "policy_inference",
            values,
            self.get_clock().now().to_msg(),
        )
        self._pubs["diagnostics"].publish(array)

    def _publish_likeness(self) -> None:
        """Publish the monitor's judgements since the last call, one array per inference."""
        monitor, params = self._monitor, self.params
        if monitor is None or params is None:
            return
        for reading in monitor.take():
            self._pubs["diagnostics"].publish(self._likeness_array(reading, params))

    def _likeness_array(
        self, reading: MonitorReading, params: PolicyInferenceParams
    ) -> DiagnosticArray:
        mean = reading.running_mean
        level = DiagnosticStatus.OK
        count = min(reading.judged, params.real_likeness_window)
        message = f"real-likeness mean {mean:.2f} over the last {count} inferences"
        if mean < params.real_likeness_warn_below:  # False for NaN
            level = DiagnosticStatus.WARN
            message = (
                f"running on sim-derived behavior: real-likeness mean {mean:.2f} < "
                f"{params.real_likeness_warn_below:g}"
            )
        values = {
            "real_likeness": f"{reading.real_likeness:.3f}",
            "real_likeness_mean": f"{mean:.3f}",
            "nearest_real_distance": f"{reading.nearest_real_distance:.4g}",
            "window": str(params.real_likeness_window),
            "inferences_judged": str(reading.judged),
        }
        return diagnostics_array(
            f"{self.get_name()}: real-likeness",
            level,
            message,
            "policy_inference",
            values,
            self.get_clock().now().to_msg(),
        )


def main(args: list[str] | None = None) -> None:
    """Run the node; with ``autostart`` it configures and activates itself.

    A failed autostart is logged and the node waits for lifecycle transitions. On shutdown the
    engine stops (a hold command if the node was active) before the node is destroyed.
    """

    def stop_engine(node: PolicyInferenceNode) -> None:
        if node.engine is not None:
            node.engine.stop(send_hold=node._active)

    sys.exit(
        run_lifecycle_node(
            PolicyInferenceNode,
            SingleThreadedExecutor,
            args,
            autostart_failed_exit_code=None,
            finish=stop_engine,
        )
    )
