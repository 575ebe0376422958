"""Evaluation through the ROS graph, exactly as on hardware.

The policy_inference node drives the cell (the real twin, or the real robot); this harness only
does what an operator does, through the cell's and the node's public interfaces:

for each trial of the protocol: deactivate the policy (it stops and holds) -> ``/trial/reset``
(robot home, belt clear) -> ``/trial/start`` (seed, condition) -> activate the policy -> wait
for the ``/trial/outcome`` with that trial id (the operator's judgement) -> deactivate.

The policy node is switched through its standard lifecycle services
(``/<node>/change_state``), never an ad-hoc service. For a self-contained run the bring-up
starts the ``evaluate`` graph (``config/graphs/evaluate.yaml``: twin, belt speed, object
tracker, policy_inference) with the arguments :func:`evaluation_graph_arguments` computes
from the checkpoint, and hands the started graph in as a :class:`NodeWatch`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import rclpy
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from r2s2r_common.config import resolve_config_path
from r2s2r_common.ros.qos import OUTCOME_QOS, RELIABLE_QOS
from r2s2r_common.ros.services import ServiceNoAnswerError, call_service
from r2s2r_common.ros.time import stamp_to_s
from r2s2r_common.topics import (
    DIAGNOSTICS,
    TRIAL_OUTCOME,
    TRIAL_RESET,
    TRIAL_START,
    joint_trajectory,
)
from r2s2r_description.controllers import controller_name
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import Trigger

from .report import EvaluationReport
from .trials import (
    NOMINAL,
    NOT_RUN,
    EvaluationConfig,
    TrialRecord,
    policy_fault_reason,
    trace_file_name,
    trial_plan,
)


class HarnessError(RuntimeError):
    """The cell or the policy node did not answer as the protocol needs."""


RESEND_AFTER_S = 2.0
"""Seconds without an answer after which a repeatable request (get_state, reset) is resent."""


class EvaluationHarness:
    """The operator's side of an evaluation, as a ROS node.

    Args:
        context: rclpy context (initialised by the caller).
        policy_node: Name of the policy_inference node whose lifecycle the harness switches;
            empty: do not switch it (it runs on its own).
        service_timeout_s: Wall-clock limit for each service call.

    """

    def __init__(
        self,
        context: Context,
        policy_node: str = "policy_inference",
        service_timeout_s: float = 20.0,
    ) -> None:
        from trajectory_msgs.msg import JointTrajectory

        from r2s2r_interfaces.msg import TrialOutcome
        from r2s2r_interfaces.srv import StartTrial

        self.node = Node("evaluation_harness", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.service_timeout_s = service_timeout_s
        self._start_type = StartTrial
        self.outcomes: dict[int, Any] = {}
        self.node.create_subscription(TrialOutcome, TRIAL_OUTCOME, self._on_outcome, OUTCOME_QOS)
        # Chunks the policy sends, counted as the controller receives them (a hold is 1 point).
        self.chunks_seen = 0
        self.node.create_subscription(
            JointTrajectory,
            joint_trajectory(controller_name("arm")),
            self._on_arm_trajectory,
            RELIABLE_QOS,
        )
        self.start_client: Any = self.node.create_client(StartTrial, TRIAL_START)
        self.reset_client: Any = self.node.create_client(Trigger, TRIAL_RESET)
        self.policy_node = policy_node
        self.change_state: Any = (
            self.node.create_client(ChangeState, f"/{policy_node}/change_state")
            if policy_node
            else None
        )
        self.get_state: Any = (
            self.node.create_client(GetState, f"/{policy_node}/get_state") if policy_node else None
        )
        # The safety layer: re-armed by the operator (this harness) at each trial's start; a
        # stop during the trial is read from the node's /diagnostics (ERROR, 'safety stop').
        self.rearm_client: Any = (
            self.node.create_client(Trigger, f"/{policy_node}/rearm") if policy_node else None
        )
        self.safety_stop = ""
        self._policy_status_name = f"{policy_node}: policy"
        from diagnostic_msgs.msg import DiagnosticArray

        self.node.create_subscription(
            DiagnosticArray, DIAGNOSTICS, self._on_diagnostics, RELIABLE_QOS
        )

    def _on_outcome(self, msg: Any) -> None:
        self.outcomes[int(msg.trial_id)] = msg

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name != self._policy_status_name:
                continue
            values = {item.key: item.value for item in status.values}
            if values.get("safety_stop") and not self.safety_stop:
                self.safety_stop = str(status.message)

    def _on_arm_trajectory(self, msg: Any) -> None:
        if len(msg.points) > 1:
            self.chunks_seen += 1

    def close(self) -> None:
        """Destroy the harness node."""
        self.executor.shutdown()
        self.node.destroy_node()

    def spin_until(self, predicate: Any, timeout_s: float) -> bool:
        """Spin the harness until ``predicate()`` or the timeout; return whether it held."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.02)
            if predicate():
                return True
        return False

    def _call(
        self, client: Any, request: Any, what: str, resend_after_s: float | None = None
    ) -> Any:
        """Call a service and wait for its answer (``service_timeout_s`` in all).

        ``resend_after_s`` (for requests that may be repeated: queries, a reset): send the
        request again when no answer came within this (see ``r2s2r_common.ros.services``:
        Fast DDS can drop the first response after a node starts).
        """
        if not client.wait_for_service(timeout_sec=0.0) and not self.spin_until(
            lambda: client.service_is_ready(), self.service_timeout_s
        ):
            raise HarnessError(f"{what}: service {client.srv_name} not available")
        try:
            return call_service(
                client,
                request,
                what,
                self.service_timeout_s,
                lambda future, timeout_s: self.spin_until(future.done, timeout_s),
                resend_after_s,
            )
        except ServiceNoAnswerError as error:
            raise HarnessError(str(error)) from error

    def wait_for_graph(self, timeout_s: float = 60.0) -> None:
        """Wait until the cell's services and the policy node's lifecycle services exist.

        Raises:
            HarnessError: Naming what is missing.

        """
        clients = [self.start_client, self.reset_client]
        clients += [c for c in (self.change_state, self.get_state) if c is not None]
        if not self.spin_until(lambda: all(c.service_is_ready() for c in clients), timeout_s):
            missing = [c.srv_name for c in clients if not c.service_is_ready()]
            raise HarnessError(
                f"graph not ready after {timeout_s:.0f} s: no {', '.join(missing)}; is the cell "
                "running (e.g. `r2s2r launch real_deploy`) with the policy node?"
            )

    def policy_state(self) -> str:
        """Return the current lifecycle state label of the policy node."""
        assert self.get_state is not None
        answer = self._call(self.get_state, GetState.Request(), "get_state", RESEND_AFTER_S)
        return str(answer.current_state.label)

    def set_policy_active(self, active: bool) -> None:
        """Activate or deactivate the policy node (no-op if already there or not managed).

        Raises:
            HarnessError: If the node is unconfigured (its checkpoint was refused) or the
                transition fails.

        """
        if self.change_state is None:
            return
        state = self.policy_state()
        if state == "unconfigured":
            raise HarnessError(
                f"/{self.policy_node} is unconfigured (checkpoint refused or not loaded; see its "
                "log for the spec mismatches)"
            )
        if (state == "active") == active:
            return
        transition = Transition.TRANSITION_ACTIVATE if active else Transition.TRANSITION_DEACTIVATE
        request = ChangeState.Request()
        request.transition.id = transition
        if not self._call(self.change_state, request, "change_state").success:
            raise HarnessError(f"/{self.policy_node}: transition {transition} failed")

    def run_trial(
        self,
        seed: int,
        condition: str,
        wall_timeout_s: float,
        dead_node: Callable[[], str | None] | None = None,
        settle_s: float = 0.0,
    ) -> tuple[int, Any | None, int]:
        """Reset, start a trial, run the policy until the outcome (or the timeout).

        Args:
            seed: Trial seed.
            condition: Twin condition ('' = nominal).
            wall_timeout_s: Wall-clock limit for the outcome.
            dead_node: Asked while waiting: a node of the graph that died (stops the wait).
            settle_s: Seconds the reset cell idles before the start (wall clock: cell time at
                a real-time factor of 1).

        Returns:
            ``(trial_id, TrialOutcome message or None when none came, chunks sent until the
            outcome)``.

        Raises:
            HarnessError: If reset or start is refused, or a lifecycle call fails.

        """
        self.set_policy_active(False)
        reset = self._call(self.reset_client, Trigger.Request(), TRIAL_RESET, RESEND_AFTER_S)
        if not reset.success:
            raise HarnessError(f"{TRIAL_RESET} refused: {reset.message}")
        self.spin_until(lambda: False, settle_s)
        request = self._start_type.Request(seed=seed, condition=condition)
        started = self._call(self.start_client, request, TRIAL_START)
        if not started.success:
            raise HarnessError(f"{TRIAL_START} refused: {started.message}")
        trial_id = int(started.trial_id)
        self.chunks_seen = 0
        if self.rearm_client is not None and self.rearm_client.service_is_ready():
            self._call(self.rearm_client, Trigger.Request(), "rearm")
        self.safety_stop = ""
        self.set_policy_active(True)
        checked = [time.monotonic()]

        def ended() -> bool:
            if trial_id in self.outcomes:
                return True
            if dead_node is None or time.monotonic() - checked[0] < DEAD_NODE_POLL_S:
                return False
            checked[0] = time.monotonic()
            return dead_node() is not None

        self.spin_until(ended, wall_timeout_s)
        chunks = self.chunks_seen
        outcome = self.outcomes.get(trial_id)
        if dead_node is not None and dead_node() is not None:
            return trial_id, outcome, chunks  # nobody left to switch off: the caller stops
        self.set_policy_active(False)
        return trial_id, outcome, chunks


DEAD_NODE_POLL_S = 0.5
"""How often the harness asks the started graph whether a node died while a trial runs."""


def _claim_trace(trace_dir: Path, before: set[str], index: int, wait_s: float = 3.0) -> None:
    """Rename the policy node's trace of the activation that just ended to the trial's name."""
    deadline = time.monotonic() + wait_s
    while True:
        new = sorted(set(path.name for path in trace_dir.glob("activation_*.npz")) - before)
        if new:
            (trace_dir / new[-1]).replace(trace_dir / trace_file_name(index))
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def run_protocol(
    harness: EvaluationHarness,
    config: EvaluationConfig,
    policy_name: str,
    progress: Any = None,
    trace_dir: str | Path | None = None,
    watch: NodeWatch | None = None,
) -> EvaluationReport:
    """Run every trial of ``config`` through ``harness`` and collect the report.

    A trial whose outcome never comes (within ``trial_wall_timeout_s``) is recorded as not run
    and the next one starts. When the graph breaks (a node died, a service stopped answering)
    the trial is recorded as not run, so are the trials after it, and the protocol stops:
    ``report.metadata["stopped"]`` says why in one line. Not-run trials count in no rate.

    Args:
        harness: The operator's node.
        config: Trials.
        policy_name: Name in the report.
        progress: Called after each trial with its record.
        trace_dir: Where the policy node writes its traces (its ``trace_dir`` parameter);
            each trial's is renamed to ``trial_NNN.npz`` there.
        watch: The started graph, asked which node died.

    """
    report = EvaluationReport(policy=policy_name, mode="ros", config=config)
    started = time.perf_counter()
    traces = Path(trace_dir) if trace_dir else None
    dead_node = watch.dead_node if watch is not None else None
    plan = trial_plan(config)
    for trial in plan:
        trial_started = time.perf_counter()
        condition = "" if trial.condition == NOMINAL else trial.condition
        before = {p.name for p in traces.glob("activation_*.npz")} if traces else set()
        broken = ""
        try:
            _, outcome, chunks = harness.run_trial(
                trial.seed, condition, config.trial_wall_timeout_s, dead_node, config.settle_s
            )
        except HarnessError as error:
            outcome, chunks, broken = None, -1, str(error)
        died = dead_node() if dead_node is not None else None
        if died is not None:  # a policy that died mid-trial: its outcome is not the policy's
            broken = died
        if traces is not None and not broken:
            _claim_trace(traces, before, trial.index)
        if broken or outcome is None:
            why = broken or f"no outcome within {config.trial_wall_timeout_s:.0f} s (wall)"
            record = TrialRecord(
                trial.index,
                trial.seed,
                trial.condition,
                False,
                NOT_RUN,
                wall_s=time.perf_counter() - trial_started,
                not_run=why,
            )
        else:
            record = TrialRecord(
                index=trial.index,
                seed=trial.seed,
                condition=trial.condition,
                success=bool(outcome.success),
                reason=policy_fault_reason(
                    bool(outcome.success), str(outcome.reason), chunks, harness.safety_stop
                ),
                object_type=str(outcome.object_type),
                duration_s=float(outcome.duration_s),
                wall_s=time.perf_counter() - trial_started,
                commands_sent=chunks,
                started_at_s=stamp_to_s(outcome.header.stamp) - float(outcome.duration_s),
                safety_stop=harness.safety_stop,
            )
        report.records.append(record)
        if progress is not None:
            progress(record)
        if broken:
            report.metadata["stopped"] = (
                f"stopped at trial {trial.index + 1} of {len(plan)}: {broken}"
            )
            for rest in plan[trial.index + 1 :]:
                report.records.append(
                    TrialRecord(
                        rest.index,
                        rest.seed,
                        rest.condition,
                        False,
                        NOT_RUN,
                        not_run=f"not started: the evaluation stopped at trial {trial.index + 1}",
                    )
                )
            break
    report.wall_s = time.perf_counter() - started
    return report


GRAPH_NAME = "evaluate"
"""The bring-up graph of an evaluation over ROS (``config/graphs/evaluate.yaml``)."""

# policy_inference parameters a caller may set through the evaluate graph's arguments.
GRAPH_POLICY_PARAMETERS = (
    "image_height_px",
    "image_width_px",
    "execution",
    "executed_steps",
    "trace_dir",
    "trace_images",
)


def evaluation_graph_arguments(
    checkpoint: str | Path,
    twin_config: str | Path,
    real_time_factor: float = 1.0,
    policy_overrides: Mapping[str, Any] | None = None,
    cell_arguments: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Launch arguments of the ``evaluate`` graph for a checkpoint (what the graph needs).

    The policy node resizes camera images to the checkpoint's size (it refuses a checkpoint
    whose images differ from its image size parameters), commands at the checkpoint's control
    rate in simulated time (scaled by the twin's speed), and gets object tracks only when the
    checkpoint reads them.

    Args:
        checkpoint: Policy checkpoint directory.
        twin_config: The twin's world file (resolved against ``config/`` when relative).
        real_time_factor: Speed of the twin.
        policy_overrides: policy_inference parameters among
            :data:`GRAPH_POLICY_PARAMETERS` (e.g. the experiment's execution settings).
        cell_arguments: How the cell runs (e.g. grounded: ``grounding_artifact``,
            ``head_camera_info``, ``hand_camera_info``, ``tracker_anchor_to_belt``), passed on.

    Raises:
        ValueError: An override the graph does not take.

    """
    from ..checkpoint import read_checkpoint_config

    spec = read_checkpoint_config(checkpoint).spec
    image = spec.images[0]
    overrides = dict(policy_overrides or {})
    unknown = sorted(set(overrides) - set(GRAPH_POLICY_PARAMETERS))
    if unknown:
        raise ValueError(
            f"policy overrides {unknown}: the {GRAPH_NAME} graph takes "
            f"{list(GRAPH_POLICY_PARAMETERS)}"
        )
    values: dict[str, Any] = {
        "checkpoint": str(Path(checkpoint).resolve()),
        "twin_config": str(resolve_config_path(str(twin_config)).resolve()),
        "real_time_factor": float(real_time_factor),
        "command_rate_hz": spec.control_rate_hz * float(real_time_factor),
        "object_tracks": spec.uses_object_track,
        "image_height_px": image.height_px,
        "image_width_px": image.width_px,
        **overrides,
        **dict(cell_arguments or {}),
    }
    return {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in values.items()
    }


def deploy_graph_arguments(
    checkpoint: str | Path, execution: str, executed_steps: int
) -> dict[str, str]:
    """Launch arguments that run ``checkpoint`` on the cell (``real_deploy``'s policy node).

    The checkpoint's image size and tracked-object input, and the chunk execution (e.g. the
    one the experiment chose for it on validation seeds).

    Args:
        checkpoint: Policy checkpoint directory.
        execution: ``receding`` or ``temporal_ensemble``.
        executed_steps: Chunk steps run before the next chunk (receding).

    """
    from ..checkpoint import read_checkpoint_config

    spec = read_checkpoint_config(checkpoint).spec
    image = spec.images[0]
    return {
        "policy": "true",
        "checkpoint": str(Path(checkpoint).resolve()),
        "image_height_px": str(image.height_px),
        "image_width_px": str(image.width_px),
        "policy_object_tracks": str(spec.uses_object_track).lower(),
        "execution": execution,
        "executed_steps": str(executed_steps),
    }


class NodeWatch(Protocol):
    """What the harness asks of a graph started for it: whether a node has died."""

    def dead_node(self) -> str | None:
        """Describe the first node that exited (name, code, log), else None."""


def evaluate_ros(
    checkpoint: str | Path,
    config: EvaluationConfig | None = None,
    policy_node: str = "policy_inference",
    graph_timeout_s: float = 90.0,
    context: Context | None = None,
    domain_id: int | None = None,
    progress: Any = None,
    watch: NodeWatch | None = None,
    policy_log: str | Path = "",
    trace_dir: str | Path | None = None,
) -> EvaluationReport:
    """Evaluate a checkpoint through a running ROS graph (see the module docstring).

    The graph (the cell, or the ``evaluate`` graph the bring-up starts for a self-contained
    run: ``r2s2r.pipeline.evaluate``) is already running; this is the operator's side.

    Args:
        checkpoint: Policy checkpoint directory (the policy node loads it).
        config: Protocol (default: 24 nominal + 26 shifted trials).
        policy_node: Policy node name ('' = do not switch its lifecycle).
        graph_timeout_s: Wall-clock limit for the graph to come up.
        context: rclpy context to use (None: a fresh one, shut down at the end).
        domain_id: ROS_DOMAIN_ID of a fresh context (None: the environment's).
        progress: Called after each trial with its record.
        watch: The started graph, asked which node died when the cell does not answer.
        policy_log: The policy node's log, named when it refuses the checkpoint.
        trace_dir: The policy node's ``trace_dir`` (its traces are renamed per trial).

    Returns:
        The report (``mode='ros'``).

    Raises:
        HarnessError: Graph not up, a node died, a service refused or the checkpoint refused.

    """
    config = config or EvaluationConfig()
    own_context = context is None
    if context is None:
        context = Context()
        rclpy.init(context=context, domain_id=domain_id)
    harness: EvaluationHarness | None = None
    try:
        harness = EvaluationHarness(context, policy_node)
        try:
            harness.wait_for_graph(graph_timeout_s)
            dead = watch.dead_node() if watch is not None else None
            if dead is not None:
                raise HarnessError(dead)
            if policy_node:
                state = harness.policy_state()
                if state == "unconfigured":
                    request = ChangeState.Request()
                    request.transition.id = Transition.TRANSITION_CONFIGURE
                    if not harness._call(harness.change_state, request, "configure").success:
                        where = f"see {policy_log}" if policy_log else "see its log"
                        raise HarnessError(
                            f"/{policy_node} refused to configure with {checkpoint} (spec "
                            f"mismatch or bad checkpoint; {where})"
                        )
            report = run_protocol(harness, config, str(checkpoint), progress, trace_dir, watch)
        except HarnessError as error:
            # A service that never answers is often a node that died: say which, with its log.
            dead = watch.dead_node() if watch is not None else None
            if dead is None or str(error) == dead:
                raise
            raise HarnessError(f"{error}; {dead}") from None
        report.metadata["launched"] = watch is not None
        return report
    finally:
        if harness is not None:
            harness.close()
        if own_context:
            rclpy.shutdown(context=context)
