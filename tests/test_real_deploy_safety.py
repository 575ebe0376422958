"""Faults injected into ``r2s2r launch real_deploy policy:=true`` on the twin (issue 52's table).

Each row of the fault table, through the command line a user runs, against the launched graph:

- **a saturating checkpoint** (a diverged run, saved by the checkpoint writer, its hash valid:
  every arm action far beyond the joint limits): the palm, computed from ``/joint_states`` with
  the description's forward kinematics, never leaves the configured box nor enters the belt's
  keep-out; the policy is stopped within ``clamped_chunks_to_stop`` chunks (the time is measured
  and bounded); ``/diagnostics`` carries an ERROR of the policy node naming the cause; nothing
  is commanded after the stop's one hold until ``~/rearm``;
- **a second commander** on the arm's topic while the policy commands: the policy holds and
  says so on ``/diagnostics``;
- **a frozen policy node** (SIGSTOP): the supervisor names it on the console while it is
  stopped (:mod:`r2s2r.freeze_watch`); after SIGCONT the arm is not commanded again (the
  freeze is an ERROR of the policy node) until ``~/rearm``.

The second commander and the frozen node share one launched graph (a benign tiny checkpoint);
the saturating checkpoint has its own. Wall time on a 2-core machine under a load of 10: the
saturating checkpoint 22-32 s (its graph's start included), the shared graph 15-19 s to start,
the second commander 3 s, the frozen node 5 s, 4 s to stop: the module in 50-70 s.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("r2s2r_interfaces.msg", reason="needs the workspace build (scripts/setup.sh)")

import torch
from r2s2r_description.robot import ALL_JOINT_NAMES, ARM_JOINT_NAMES
from r2s2r_policy.checkpoint import save_checkpoint
from r2s2r_policy.evaluation.baseline import (
    TINY_MODEL_PARAMS,
    home_stats,
    robot_policy_spec,
    untrained_policy,
)
from r2s2r_policy.inference.safety_layer import PalmWorkspace, SafetyLayerConfig
from r2s2r_policy.models import build_policy
from r2s2r_policy.normalization import FeatureStats

from r2s2r_dataset import ACTIONS_KEY

pytestmark = pytest.mark.graph

REPO = Path(__file__).resolve().parents[1]
POLICY_PARAMETERS = yaml.safe_load(
    (REPO / "config" / "nodes" / "policy_inference.yaml").read_text()
)["policy_inference"]["ros__parameters"]
SAFETY = SafetyLayerConfig(**POLICY_PARAMETERS["safety"])
POLICY_STATUS = "policy_inference: policy"
"""Name of the policy node's status on ``/diagnostics``."""
INTRUDER = "second_commander_probe"
"""``header.frame_id`` of what the test publishes on the arm's topic (the policy sends '')."""
ARM = [ALL_JOINT_NAMES.index(name) for name in ARM_JOINT_NAMES]
_PROBES = itertools.count()
WILD_ARM_RAD = [7.0, 7.0, 4.0, 7.0, 7.0, 7.0]
"""A diverged run's arm actions: beyond the shoulders' and wrists' 2π and the elbow's π."""


def benign_checkpoint(folder: Path) -> Path:
    """The tiny untrained checkpoint of the graph tests: small motions around home."""
    torch.set_num_threads(1)
    policy = untrained_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), seed=4)
    return save_checkpoint(folder / "benign", policy)


def saturating_checkpoint(folder: Path) -> Path:
    """A checkpoint whose every arm action lies far beyond the joint limits (hash valid).

    The tiny model with its action statistics centred on :data:`WILD_ARM_RAD`: what a run that
    diverged writes, through the same writer.
    """
    torch.set_num_threads(1)
    stats = home_stats()
    actions = stats.features[ACTIONS_KEY]
    mean = np.array(actions.mean)
    mean[ARM] = WILD_ARM_RAD
    std = np.array(actions.std)
    stats.features[ACTIONS_KEY] = FeatureStats(
        count=actions.count,
        mean=mean.tolist(),
        std=std.tolist(),
        min=(mean - 3 * std).tolist(),
        max=(mean + 3 * std).tolist(),
    )
    torch.manual_seed(4)
    policy = build_policy(robot_policy_spec(32, 4, 10.0, TINY_MODEL_PARAMS), stats)
    policy.eval()
    return save_checkpoint(folder / "saturating", policy)


@dataclass(frozen=True)
class Status:
    """One status of the policy node on ``/diagnostics``, with its receipt time."""

    at_s: float
    level: int
    message: str
    values: dict[str, str]


class DeployProbe:
    """One rclpy node, spun on its own thread: what the test sees of the launched cell.

    Arm commands of the policy (with receipt times), the arm's measured positions, the policy's
    statuses; ``~/rearm``; a second publisher on the arm's topic.
    """

    def __init__(self, context: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from r2s2r_common.ros.qos import JOINT_STATES_LISTENER_QOS, RELIABLE_QOS
        from r2s2r_common.topics import DIAGNOSTICS, JOINT_STATES, joint_trajectory
        from r2s2r_description.controllers import controller_name
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from sensor_msgs.msg import JointState
        from std_srvs.srv import Trigger
        from trajectory_msgs.msg import JointTrajectory

        self.arm_topic = joint_trajectory(controller_name("arm"))
        self._trajectory, self._qos, self._trigger = JointTrajectory, RELIABLE_QOS, Trigger
        self.node = Node(f"safety_probe_{os.getpid()}_{next(_PROBES)}", context=context)
        self._lock = threading.Lock()
        self.commands: list[tuple[float, Any]] = []
        self.arm_q: list[tuple[float, np.ndarray]] = []
        self.statuses: list[Status] = []
        self.node.create_subscription(
            JointTrajectory, self.arm_topic, self._on_command, RELIABLE_QOS
        )
        self.node.create_subscription(
            JointState, JOINT_STATES, self._on_joint_state, JOINT_STATES_LISTENER_QOS
        )
        self.node.create_subscription(DiagnosticArray, DIAGNOSTICS, self._on_diagnostics, 50)
        self.rearm_client: Any = self.node.create_client(Trigger, "/policy_inference/rearm")
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._closing.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def _on_command(self, msg: Any) -> None:
        if msg.header.frame_id != INTRUDER:
            with self._lock:
                self.commands.append((time.monotonic(), msg))

    def _on_joint_state(self, msg: Any) -> None:
        names = list(msg.name)
        if all(name in names for name in ARM_JOINT_NAMES):
            q = np.array([msg.position[names.index(name)] for name in ARM_JOINT_NAMES])
            with self._lock:
                self.arm_q.append((time.monotonic(), q))

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name == POLICY_STATUS:
                level = status.level if isinstance(status.level, int) else status.level[0]
                values = {kv.key: kv.value for kv in status.values}
                with self._lock:
                    self.statuses.append(
                        Status(time.monotonic(), int(level), status.message, values)
                    )

    def commands_since(self, since_s: float) -> list[tuple[float, Any]]:
        """The policy's arm commands received after ``since_s`` (monotonic)."""
        with self._lock:
            return [(t, msg) for t, msg in self.commands if t > since_s]

    def errors_since(self, since_s: float) -> list[Status]:
        """The policy's ERROR statuses received after ``since_s``."""
        with self._lock:
            return [s for s in self.statuses if s.at_s > since_s and s.level == 2]

    def statuses_between(self, start_s: float, end_s: float) -> list[Status]:
        with self._lock:
            return [s for s in self.statuses if start_s < s.at_s < end_s]

    def arm_positions_since(self, since_s: float) -> np.ndarray:
        with self._lock:
            return np.array([q for t, q in self.arm_q if t > since_s])

    def wait_for(
        self, condition: Callable[[], Any], timeout_s: float, what: str | Callable[[], str]
    ) -> float:
        """Wait until ``condition()`` is truthy; return the seconds it took."""
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > timeout_s:
                told = what() if callable(what) else what
                raise AssertionError(f"{told}: not within {timeout_s:.0f} s")
            time.sleep(0.02)
        return time.monotonic() - started

    def rearm(self) -> tuple[bool, str]:
        """Call ``/policy_inference/rearm``: (success, message)."""
        assert self.rearm_client.wait_for_service(timeout_sec=10.0), "no ~/rearm service"
        future = self.rearm_client.call_async(self._trigger.Request())
        self.wait_for(future.done, 10.0, "~/rearm's answer")
        result = future.result()
        return bool(result.success), str(result.message)

    def intruder(self) -> Any:
        """A second publisher on the arm's command topic."""
        return self.node.create_publisher(self._trajectory, self.arm_topic, self._qos)

    def hold_here(self, publisher: Any) -> None:
        """Publish the measured arm position as a one-point trajectory (0.5 s) on ``publisher``."""
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint

        with self._lock:
            q = self.arm_q[-1][1]
        msg = self._trajectory(joint_names=list(ARM_JOINT_NAMES))
        msg.header.frame_id = INTRUDER
        msg.points = [
            JointTrajectoryPoint(
                positions=q.tolist(), time_from_start=Duration(nanosec=500_000_000)
            )
        ]
        publisher.publish(msg)

    def close(self) -> None:
        """Stop spinning (the thread first: nothing uses the node while it is destroyed)."""
        self._closing.set()
        self._thread.join(timeout=5.0)
        self._executor.shutdown()
        self.node.destroy_node()


class LaunchedCell:
    """``r2s2r launch real_deploy policy:=true checkpoint:=...`` with its console read live."""

    def __init__(self, checkpoint: Path, folder: Path, domain_id: int) -> None:
        from r2s2r_testing.cell_probe import source_share_overlay

        prefix = source_share_overlay(folder / "prefix", REPO)
        env = {
            **os.environ,
            "ROS_DOMAIN_ID": str(domain_id),
            "AMENT_PREFIX_PATH": f"{prefix}{os.pathsep}{os.environ['AMENT_PREFIX_PATH']}",
            "PYTHONUNBUFFERED": "1",
        }
        arguments = [
            "policy:=true",
            f"checkpoint:={checkpoint}",
            "image_height_px:=32",
            "image_width_px:=32",
            "policy_object_tracks:=false",  # the tiny checkpoints read no tracked object
        ]
        self.log_dir = folder / "logs"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "r2s2r.cli", "launch", "real_deploy", *arguments,
             "--no-progress", "--log-dir", str(self.log_dir), "--grace-period", "5"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        self._lock = threading.Lock()
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self.lines.append((time.monotonic(), line.rstrip("\n")))

    def console(self, since_s: float = 0.0) -> list[str]:
        with self._lock:
            return [line for t, line in self.lines if t > since_s]

    def text(self) -> str:
        return "\n".join(self.console())

    def policy_log(self) -> str:
        path = self.log_dir / "policy_inference.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def pid(self, node: str) -> int:
        found = re.search(rf"\b{node} \(pid (\d+)\)", self.text())
        assert found, self.text()
        return int(found[1])

    def stop(self) -> int:
        """SIGINT, as Ctrl-C: the graph stops; return the exit code."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._reader.join(timeout=5.0)
        return self.process.returncode


@dataclass
class Cell:
    launched: LaunchedCell
    probe: DeployProbe

    def commanding(self, since_s: float, count: int = 5, timeout_s: float = 30.0) -> None:
        """Wait for ``count`` policy commands after ``since_s`` (the policy moves the arm)."""
        self.probe.wait_for(
            lambda: len(self.probe.commands_since(since_s)) >= count,
            timeout_s,
            lambda: (
                f"{count} arm commands of the policy (console: "
                f"{self.launched.text()[-1500:]}; policy log: {self.launched.policy_log()[-1500:]})"
            ),
        )

    def quiet_for(self, seconds: float) -> float:
        """Wait until no policy command came for ``seconds``; return the last one's time."""

        def last() -> float:
            commands = self.probe.commands_since(0.0)
            return commands[-1][0] if commands else 0.0

        self.probe.wait_for(lambda: time.monotonic() - last() > seconds, 30.0, "quiet")
        return last()


@contextlib.contextmanager
def launched_cell(checkpoint: Path, folder: Path, commanding: bool = True) -> Iterator[Cell]:
    """The cell launched with ``checkpoint``, and a probe in its domain; stopped afterwards.

    Args:
        checkpoint: The policy's checkpoint.
        folder: Where the launch's files go.
        commanding: Wait for the policy's first command before handing the cell over.

    """
    from r2s2r_common.ros_domain import claim_domain
    from r2s2r_testing.ros import ros_context_of

    claim = claim_domain()
    launched: LaunchedCell | None = None
    try:
        with ros_context_of(claim.domain_id) as context:
            probe = DeployProbe(context)  # first: known to the nodes as they start
            try:
                launched = LaunchedCell(checkpoint, folder, claim.domain_id)
                cell = Cell(launched, probe)
                if commanding:
                    cell.commanding(0.0, count=1, timeout_s=150.0)
                yield cell
            finally:
                probe.close()
    finally:
        code = launched.stop() if launched is not None else 0
        claim.release()
    assert code == 0, launched.text()[-3000:] if launched is not None else ""


def single_point(msg: Any) -> bool:
    return len(msg.points) == 1


def assert_held_until_rearmed(cell: Cell, stopped_s: float, cause: str, quiet_s: float) -> float:
    """Nothing commanded ``quiet_s`` after the stop; ``~/rearm`` names the cause and resumes.

    Returns:
        When ``~/rearm`` was called (monotonic).

    """
    probe = cell.probe
    time.sleep(max(0.0, stopped_s + quiet_s - time.monotonic()))
    assert probe.commands_since(stopped_s) == [], "commanded while stopped"
    rearmed = time.monotonic()
    success, message = probe.rearm()
    assert success and f"safety stop ({cause})" in message, message
    cell.commanding(rearmed, count=1)
    return rearmed


@pytest.mark.timeout(300)
def test_a_saturating_checkpoint_is_stopped_with_the_palm_in_its_box(tmp_path: Path) -> None:
    """Stopped at start-up, held until ~/rearm; re-armed, stopped again as fast (timed run).

    The first run can be over before the probe's subscription has matched the policy's new
    publisher (half a second after activation; discovery on a loaded machine takes longer):
    it is judged by the node's own counters and the measured palm; the run after ~/rearm,
    with the probe matched, is timed command by command.
    """
    workspace = PalmWorkspace(SAFETY, list(ARM_JOINT_NAMES))
    limit = SAFETY.clamped_chunks_to_stop
    with launched_cell(saturating_checkpoint(tmp_path), tmp_path, commanding=False) as cell:
        probe, launched = cell.probe, cell.launched
        probe.wait_for(
            lambda: probe.errors_since(0.0),
            150.0,
            lambda: (
                f"ERROR of the policy (console: {launched.text()[-1500:]}; policy log: "
                f"{launched.policy_log()[-1500:]})"
            ),
        )
        error = probe.errors_since(0.0)[0]
        cause = error.values["safety_stop"]
        sent, holds = int(error.values["commands_sent"]), int(error.values["holds_sent"])
        stopped = max(cell.quiet_for(2.0), error.at_s)
        seen = len(probe.commands_since(0.0))
        rearmed = assert_held_until_rearmed(cell, stopped, cause, 0.5)

        def stopped_again() -> list[Status]:
            return [e for e in probe.errors_since(rearmed) if int(e.values["holds_sent"]) > holds]

        probe.wait_for(stopped_again, 10.0, "ERROR again after ~/rearm")
        again = stopped_again()[0]
        held = cell.quiet_for(2.0)
        run = probe.commands_since(rearmed)
        stop_s, said_s = held - run[0][0], again.at_s - held
        palms = workspace.palm_positions(probe.arm_positions_since(0.0))
        during = probe.arm_positions_since(run[0][0])
    print(
        f"saturating checkpoint: stopped at start-up after {sent} chunks ({cause}; the probe saw "
        f"{seen} of its {sent + holds} messages); re-armed, stopped again {stop_s:.2f} s after "
        f"its first command ({len(run) - 1} chunks and the hold), ERROR on /diagnostics "
        f"{said_s:.2f} s after the hold; palm over {len(palms)} joint states within "
        f"{palms.min(axis=0).round(3)} .. {palms.max(axis=0).round(3)} m"
    )
    assert cause in ("saturation", "workspace"), error
    assert f"safety stop ({cause})" in error.message and "holding until ~/rearm" in error.message
    # The node's own counters: stopped before the watchdog's count of clamped chunks went out.
    assert sent < limit and holds >= 1, error.values
    # Timed: 4 chunks at 10 Hz then the hold (the 5th clamped chunk is not sent).
    assert again.values["safety_stop"] in ("saturation", "workspace"), again
    assert len(run) <= limit and single_point(run[-1][1]), len(run)
    # ... every one of them seen (the node's counters agree): the time is the whole run's.
    counted = int(again.values["commands_sent"]) - sent + int(again.values["holds_sent"]) - holds
    assert len(run) == counted, (len(run), again.values)
    assert stop_s < 2.0, stop_s
    # With the node's next diagnostics (every diagnostics_period_s, 1 s; 1 s of slack for load).
    assert said_s < POLICY_PARAMETERS["diagnostics_period_s"] + 1.0, said_s
    # Measured: the palm over the whole test, the timed run sample by sample.
    assert len(palms) > 100 and len(during) > 10, (len(palms), len(during))
    low, high = np.asarray(SAFETY.workspace_min_m), np.asarray(SAFETY.workspace_max_m)
    outside = palms[np.any(palms < low, axis=1) | np.any(palms > high, axis=1)]
    assert not len(outside), outside[:5]
    keep_low, keep_high = (
        np.asarray(SAFETY.belt_keep_out_min_m),
        np.asarray(SAFETY.belt_keep_out_max_m),
    )
    on_belt = palms[np.all(palms > keep_low, axis=1) & np.all(palms < keep_high, axis=1)]
    assert not len(on_belt), on_belt[:5]


@pytest.fixture(scope="module")
def benign_cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cell]:
    """The cell commanded by the benign tiny checkpoint, shared by the tests that need it."""
    folder = tmp_path_factory.mktemp("benign_cell")
    with launched_cell(benign_checkpoint(folder), folder) as cell:
        yield cell


def armed(cell: Cell) -> None:
    """Make sure the policy commands (re-armed if an earlier test left it stopped)."""
    cell.probe.rearm()  # "was armed" when it is
    cell.commanding(time.monotonic())


@pytest.mark.timeout(240)
def test_a_second_commander_on_the_arm_topic_makes_the_policy_hold_and_say_so(
    benign_cell: Cell,
) -> None:
    cell, probe = benign_cell, benign_cell.probe
    armed(cell)
    intruder = probe.intruder()
    appeared = time.monotonic()
    probe.hold_here(intruder)
    # The policy's last command is its one hold; detected within a few check periods.
    errors = lambda: [e for e in probe.errors_since(appeared) if "second_commander" in e.message]  # noqa: E731
    probe.wait_for(errors, 5.0, "ERROR second_commander on /diagnostics")
    held = cell.quiet_for(1.0)
    probe.hold_here(intruder)  # still publishing: the policy stays quiet
    detected_s = held - appeared
    print(f"second commander: the policy's hold {detected_s:.2f} s after the intruder appeared")
    assert detected_s < 2.0, detected_s
    assert single_point(probe.commands_since(appeared)[-1][1])
    error = errors()[0]
    assert error.values["safety_stop"] == "second_commander"
    assert f"on {probe.arm_topic} while the policy commands it" in error.message, error.message
    assert "holding until ~/rearm" in error.message
    probe.node.destroy_publisher(intruder)
    time.sleep(1.0)  # the policy's graph forgets the intruder
    assert_held_until_rearmed(cell, held, "second_commander", 1.0)


@pytest.mark.timeout(240)
def test_a_frozen_policy_node_is_named_on_the_console_and_needs_a_rearm_after(
    benign_cell: Cell,
) -> None:
    cell, probe, launched = benign_cell, benign_cell.probe, benign_cell.launched
    armed(cell)
    pid = launched.pid("policy_inference")
    os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        warning = f"[r2s2r launch] WARN: node 'policy_inference' (pid {pid}) has been stopped for"
        named = probe.wait_for(
            lambda: any(warning in line for line in launched.console(frozen)), 10.0, warning
        )
        print(f"frozen policy node: named on the console {named:.2f} s after SIGSTOP")
        assert named < 3.0, named  # warn_after_s 1 s, polled every 0.25 s
        time.sleep(max(0.0, frozen + 2.5 - time.monotonic()))
        # Frozen: neither commands nor its own diagnostics.
        assert probe.commands_since(frozen + 0.3) == []
        assert probe.statuses_between(frozen + 0.3, time.monotonic()) == []
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    again = f"node 'policy_inference' (pid {pid}) runs again after"
    probe.wait_for(lambda: any(again in line for line in launched.console(frozen)), 5.0, again)
    errors = lambda: [e for e in probe.errors_since(resumed) if "(frozen)" in e.message]  # noqa: E731
    probe.wait_for(errors, 5.0, "ERROR frozen on /diagnostics")
    said = errors()[0].at_s - resumed
    print(f"frozen policy node: ERROR (frozen) on /diagnostics {said:.2f} s after SIGCONT")
    assert errors()[0].values["safety_stop"] == "frozen"
    held = cell.quiet_for(1.0)
    # After SIGCONT at most the stop's one hold, never a chunk: it waits for ~/rearm.
    after = probe.commands_since(resumed)
    assert len(after) <= 1 and all(single_point(msg) for _, msg in after), after
    assert_held_until_rearmed(cell, max(held, resumed), "frozen", 1.5)
