"""Evaluation through the ROS graph, exactly as on hardware.

The policy_inference node drives the cell (the real twin, or the real robot); this harness only
does what an operator does, through the cell's and the node's public interfaces:

for each trial of the protocol: deactivate the policy (it stops and holds) -> ``/trial/reset``
(robot home, belt clear) -> ``/trial/start`` (seed, condition) -> activate the policy -> wait
for the ``/trial/outcome`` with that trial id (the operator's judgement) -> deactivate.

The policy node is switched through its standard lifecycle services
(``/<node>/change_state``), never an ad-hoc service. :class:`EvaluationGraph` optionally starts
the nodes (``real_twin``, ``belt_speed``, ``policy_inference``) as processes from the install
space, with their ``config/`` parameter files, for a self-contained run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from r2s2r_common.config import resolve_config_path
from r2s2r_common.process import spawn_owned, stop_process_group
from r2s2r_common.ros.qos import OUTCOME_QOS
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import Trigger

from .report import EvaluationReport
from .trials import NOMINAL, EvaluationConfig, TrialRecord, trial_plan


class HarnessError(RuntimeError):
    """The cell or the policy node did not answer as the protocol needs."""


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
        from r2s2r_interfaces.msg import TrialOutcome
        from r2s2r_interfaces.srv import StartTrial

        self.node = Node("evaluation_harness", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.service_timeout_s = service_timeout_s
        self._start_type = StartTrial
        self.outcomes: dict[int, Any] = {}
        self.node.create_subscription(TrialOutcome, "/trial/outcome", self._on_outcome, OUTCOME_QOS)
        self.start_client: Any = self.node.create_client(StartTrial, "/trial/start")
        self.reset_client: Any = self.node.create_client(Trigger, "/trial/reset")
        self.policy_node = policy_node
        self.change_state: Any = (
            self.node.create_client(ChangeState, f"/{policy_node}/change_state")
            if policy_node
            else None
        )
        self.get_state: Any = (
            self.node.create_client(GetState, f"/{policy_node}/get_state") if policy_node else None
        )

    def _on_outcome(self, msg: Any) -> None:
        self.outcomes[int(msg.trial_id)] = msg

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

    def _call(self, client: Any, request: Any, what: str) -> Any:
        if not client.wait_for_service(timeout_sec=0.0) and not self.spin_until(
            lambda: client.service_is_ready(), self.service_timeout_s
        ):
            raise HarnessError(f"{what}: service {client.srv_name} not available")
        future = client.call_async(request)
        if not self.spin_until(future.done, self.service_timeout_s):
            raise HarnessError(
                f"{what}: no answer from {client.srv_name} in {self.service_timeout_s} s"
            )
        return future.result()

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
        return str(self._call(self.get_state, GetState.Request(), "get_state").current_state.label)

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

    def run_trial(self, seed: int, condition: str, wall_timeout_s: float) -> tuple[int, Any | None]:
        """Reset, start a trial, run the policy until the outcome (or the timeout).

        Returns:
            ``(trial_id, TrialOutcome message or None on timeout)``.

        Raises:
            HarnessError: If reset or start is refused.

        """
        self.set_policy_active(False)
        reset = self._call(self.reset_client, Trigger.Request(), "/trial/reset")
        if not reset.success:
            raise HarnessError(f"/trial/reset refused: {reset.message}")
        request = self._start_type.Request(seed=seed, condition=condition)
        started = self._call(self.start_client, request, "/trial/start")
        if not started.success:
            raise HarnessError(f"/trial/start refused: {started.message}")
        trial_id = int(started.trial_id)
        self.set_policy_active(True)
        self.spin_until(lambda: trial_id in self.outcomes, wall_timeout_s)
        self.set_policy_active(False)
        return trial_id, self.outcomes.get(trial_id)


def run_protocol(
    harness: EvaluationHarness,
    config: EvaluationConfig,
    policy_name: str,
    progress: Any = None,
) -> EvaluationReport:
    """Run every trial of ``config`` through ``harness`` and collect the report."""
    report = EvaluationReport(policy=policy_name, mode="ros", config=config)
    started = time.perf_counter()
    for trial in trial_plan(config):
        trial_started = time.perf_counter()
        condition = "" if trial.condition == NOMINAL else trial.condition
        _, outcome = harness.run_trial(trial.seed, condition, config.trial_wall_timeout_s)
        if outcome is None:
            record = TrialRecord(
                trial.index,
                trial.seed,
                trial.condition,
                False,
                "harness_timeout",
                wall_s=time.perf_counter() - trial_started,
            )
        else:
            record = TrialRecord(
                index=trial.index,
                seed=trial.seed,
                condition=trial.condition,
                success=bool(outcome.success),
                reason=str(outcome.reason),
                object_type=str(outcome.object_type),
                duration_s=float(outcome.duration_s),
                wall_s=time.perf_counter() - trial_started,
            )
        report.records.append(record)
        if progress is not None:
            progress(record)
    report.wall_s = time.perf_counter() - started
    return report


def executable_path(package: str, executable: str) -> Path:
    """``<prefix>/lib/<package>/<executable>`` of an installed ROS package.

    Raises:
        HarnessError: If the package or executable is not installed.

    """
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        path = Path(get_package_prefix(package)) / "lib" / package / executable
    except (PackageNotFoundError, ValueError, OSError) as error:
        raise HarnessError(
            f"package {package!r} not installed ({error}); run scripts/setup.sh and source "
            "scripts/env.sh"
        ) from None
    if not path.is_file():
        raise HarnessError(f"{path}: executable not found (rebuild with scripts/setup.sh)")
    return path


@dataclass
class GraphNode:
    """A node process to start: package, executable, parameter file, overrides."""

    package: str
    executable: str
    params_file: str
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluationGraph:
    """The nodes an evaluation needs, as processes: twin, belt speed, policy inference.

    Args:
        checkpoint: Policy checkpoint directory.
        twin_config: Hidden twin world (given to the twin only).
        real_time_factor: Twin speed; the policy's command rate is scaled with it so that it
            replans at the checkpoint's rate in simulated time.
        control_rate_hz: The checkpoint's control rate.
        policy_overrides: Extra policy_inference parameters.
        log_dir: Where ``<node>.log`` files go.
        use_twin: False on the real cell (only the policy node is started).
        object_tracks: Run the object tracker (and render depth) for a policy that reads
            ``/objects/tracks``; off for one that does not (the node then offers no tracks).
        domain_id: ROS_DOMAIN_ID of the processes (None: inherited).

    """

    checkpoint: str
    twin_config: str = "twin/default.yaml"
    real_time_factor: float = 1.0
    control_rate_hz: float = 10.0
    policy_overrides: dict[str, Any] = field(default_factory=dict)
    log_dir: Path = Path("runs/evaluation/logs")
    use_twin: bool = True
    object_tracks: bool = True
    domain_id: int | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def nodes(self) -> list[GraphNode]:
        """List the node processes of the graph."""
        nodes = []
        if self.use_twin:
            nodes += [
                GraphNode(
                    "r2s2r_sim",
                    "real_twin",
                    "nodes/real_twin.yaml",
                    {
                        "twin_config_path": str(resolve_config_path(self.twin_config)),
                        "real_time_factor": float(self.real_time_factor),
                        "publish_depth": self.object_tracks,
                    },
                ),
                GraphNode("r2s2r_belt", "belt_speed", "nodes/belt_speed.yaml"),
            ]
            if self.object_tracks:
                nodes.append(GraphNode("r2s2r_belt", "object_tracker", "nodes/object_tracker.yaml"))
        overrides = {
            "checkpoint_path": self.checkpoint,
            "command_rate_hz": self.control_rate_hz * self.real_time_factor,
            "autostart": False,
            "has_object_tracks": self.object_tracks,
            **self.policy_overrides,
        }
        nodes.append(
            GraphNode("r2s2r_policy", "policy_inference", "nodes/policy_inference.yaml", overrides)
        )
        return nodes

    def start(self) -> None:
        """Start every node process (own process group, output to a log file each)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if self.domain_id is not None:
            env["ROS_DOMAIN_ID"] = str(self.domain_id)
        for node in self.nodes():
            command = [
                str(executable_path(node.package, node.executable)),
                "--ros-args",
                "--params-file",
                str(resolve_config_path(node.params_file)),
            ]
            for key, value in node.overrides.items():
                text = str(value).lower() if isinstance(value, bool) else str(value)
                command += ["-p", f"{key}:={text}"]
            with open(self.log_dir / f"{node.executable}.log", "wb") as log:
                # Owned: the node dies with this process, whatever ends it.
                self.processes.append(
                    spawn_owned(command, stdout=log, stderr=subprocess.STDOUT, env=env)
                )

    def dead_node(self) -> str | None:
        """Describe the first node process that exited (code, log, its last lines), else None."""
        for node, process in zip(self.nodes(), self.processes, strict=False):
            if process.poll() is not None:
                log = self.log_dir / (node.executable + ".log")
                return (
                    f"{node.executable} exited with code {process.returncode} (log: {log}; "
                    f"last lines: {log_tail(log)})"
                )
        return None

    def check_alive(self) -> None:
        """Raise if a node process exited.

        Raises:
            HarnessError: Naming the node and its exit code (see its log).

        """
        dead = self.dead_node()
        if dead is not None:
            raise HarnessError(dead)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGINT every process, then SIGKILL those still alive after ``grace_s``."""
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stop_process_group(process, grace_s, (signal.SIGKILL,))
        self.processes = []


def log_tail(path: Path, lines: int = 3) -> str:
    """Return the last non-empty lines of a log file, joined by ' | ' ('' if unreadable)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    kept = [line.strip() for line in text if line.strip()]
    return " | ".join(kept[-lines:])[-600:]


def evaluate_ros(
    checkpoint: str | Path,
    config: EvaluationConfig | None = None,
    launch: bool = True,
    twin_config: str = "twin/default.yaml",
    real_time_factor: float = 1.0,
    policy_node: str = "policy_inference",
    policy_overrides: dict[str, Any] | None = None,
    log_dir: str | Path = "runs/evaluation/logs",
    graph_timeout_s: float = 90.0,
    context: Context | None = None,
    domain_id: int | None = None,
    progress: Any = None,
) -> EvaluationReport:
    """Evaluate a checkpoint through the ROS graph (see the module docstring).

    Args:
        checkpoint: Policy checkpoint directory (the policy node loads it).
        config: Protocol (default: 24 nominal + 26 shifted trials).
        launch: Start twin, belt_speed and policy_inference as processes (False: use the graph
            that is already running, e.g. on the real cell).
        twin_config: Twin world for a launched twin.
        real_time_factor: Twin speed for a launched twin.
        policy_node: Policy node name ('' = do not switch its lifecycle).
        policy_overrides: Extra policy_inference parameters for a launched node.
        log_dir: Node logs of a launched graph.
        graph_timeout_s: Wall-clock limit for the graph to come up.
        context: rclpy context to use (None: a fresh one, shut down at the end).
        domain_id: ROS_DOMAIN_ID of a fresh context and of launched nodes (None: the
            environment's), e.g. to keep a test graph apart from others on the machine.
        progress: Called after each trial with its record.

    Returns:
        The report (``mode='ros'``).

    Raises:
        HarnessError: Graph not up, a node died, a service refused or the checkpoint refused.

    """
    from ..checkpoint import read_checkpoint_config

    config = config or EvaluationConfig()
    spec = read_checkpoint_config(checkpoint).spec
    graph: EvaluationGraph | None = None
    own_context = context is None
    if context is None:
        context = Context()
        rclpy.init(context=context, domain_id=domain_id)
    harness: EvaluationHarness | None = None
    try:
        if launch:
            # The launched node resizes camera images to the checkpoint's size (it refuses a
            # checkpoint whose images differ from its image size parameters).
            image = spec.images[0]
            sizes = {"image_height_px": image.height_px, "image_width_px": image.width_px}
            graph = EvaluationGraph(
                checkpoint=str(Path(checkpoint).resolve()),
                twin_config=twin_config,
                real_time_factor=real_time_factor,
                control_rate_hz=spec.control_rate_hz,
                object_tracks=spec.uses_object_track,
                policy_overrides={**sizes, **(policy_overrides or {})},
                log_dir=Path(log_dir),
                domain_id=domain_id,
            )
            graph.start()
        harness = EvaluationHarness(context, policy_node)
        try:
            harness.wait_for_graph(graph_timeout_s)
            if graph is not None:
                graph.check_alive()
            if policy_node:
                state = harness.policy_state()
                if state == "unconfigured":
                    request = ChangeState.Request()
                    request.transition.id = Transition.TRANSITION_CONFIGURE
                    if not harness._call(harness.change_state, request, "configure").success:
                        raise HarnessError(
                            f"/{policy_node} refused to configure with {checkpoint} (spec "
                            "mismatch or bad checkpoint; see "
                            f"{Path(log_dir) / 'policy_inference.log'})"
                        )
            report = run_protocol(harness, config, str(checkpoint), progress)
        except HarnessError as error:
            # A service that never answers is often a node that died: say which, with its log.
            dead = graph.dead_node() if graph is not None else None
            if dead is None:
                raise
            raise HarnessError(f"{error}; {dead}") from None
        report.metadata.update(
            {"real_time_factor": real_time_factor, "launched": launch, "twin_config": twin_config}
        )
        return report
    finally:
        if harness is not None:
            harness.close()
        if graph is not None:
            graph.stop()
        if own_context:
            rclpy.shutdown(context=context)
