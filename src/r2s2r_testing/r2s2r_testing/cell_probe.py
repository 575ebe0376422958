"""Working a launched cell from outside, over ROS: trials, planned picks, the mirror's check.

:class:`CellProbe` is one rclpy node, spun on its own thread, that does what an operator and a
monitoring screen do with a running ``real_deploy`` graph: start a trial on the twin
(``/trial/start``), wait for the tracker to see the object, ask the planner for a pick
(``/planner/plan_pick``), read the twin's verdict (``/trial/outcome``: its simulator truth
judges whether the object was lifted and binned) and read the sim bridge's mirror status
from ``/diagnostics``. Used by the graph test of the mirror and the planner and by
``bench/check_ros2_launch.py``.

:func:`source_share_overlay` makes an ament prefix whose ``share/r2s2r`` is this source tree's
``config/`` and ``launch/``, so a graph test runs the working tree's graphs with the installed
executables (which import the source tree's packages through ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIRROR_STATUS = "sim_bridge: mirror"
"""Name of the sim bridge's mirror status on ``/diagnostics``."""


@dataclass(frozen=True)
class MirrorReading:
    """One mirror status from ``/diagnostics``.

    Attributes:
        level: 0 OK, 1 WARN, 2 ERROR.
        message: The status message.
        values: Its key/value pairs.

    """

    level: int
    message: str
    values: dict[str, str]

    def figure(self, key: str) -> float | None:
        """Return a numeric value (None for 'none' or when absent)."""
        text = self.values.get(key, "none")
        return None if text == "none" else float(text)


class CellProbe:
    """A node that works a launched cell (see the module docstring).

    Args:
        context: An initialised rclpy context in the cell's domain.
        planner_node: Name of the planner node (its service is ``/<name>/plan_pick``).

    """

    def __init__(self, context: Any, planner_node: str = "planner") -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from r2s2r_common.ros.qos import DEFAULT_QOS, OUTCOME_QOS
        from r2s2r_common.topics import (
            DIAGNOSTICS,
            OBJECT_TRACKS,
            TRIAL_OUTCOME,
            TRIAL_RESET,
            TRIAL_START,
        )
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from std_srvs.srv import Trigger

        from r2s2r_interfaces.msg import ObjectTrackArray, TrialOutcome
        from r2s2r_interfaces.srv import StartTrial

        self.node = Node(f"cell_probe_{os.getpid()}", context=context)
        self._lock = threading.Lock()
        self.mirror: list[MirrorReading] = []
        self.outcomes: list[Any] = []
        self.tracks: list[Any] = []
        self.node.create_subscription(DiagnosticArray, DIAGNOSTICS, self._on_diagnostics, 50)
        self.node.create_subscription(
            TrialOutcome, TRIAL_OUTCOME, self._keep(self.outcomes), OUTCOME_QOS
        )
        self.node.create_subscription(
            ObjectTrackArray, OBJECT_TRACKS, self._keep(self.tracks), DEFAULT_QOS
        )
        self._start_type = StartTrial
        self._trigger_type = Trigger
        self.start_client: Any = self.node.create_client(StartTrial, TRIAL_START)
        self.reset_client: Any = self.node.create_client(Trigger, TRIAL_RESET)
        self.plan_client: Any = self.node.create_client(Trigger, f"/{planner_node}/plan_pick")
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _keep(self, into: list[Any]) -> Callable[[Any], None]:
        def keep(msg: Any) -> None:
            with self._lock:
                into.append(msg)
                del into[:-200]

        return keep

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name == MIRROR_STATUS:
                level = status.level if isinstance(status.level, int) else status.level[0]
                reading = MirrorReading(
                    int(level), status.message, {kv.key: kv.value for kv in status.values}
                )
                with self._lock:
                    self.mirror.append(reading)
                    del self.mirror[:-500]

    def mirror_readings(self) -> list[MirrorReading]:
        """Return the mirror statuses received so far (the newest last)."""
        with self._lock:
            return list(self.mirror)

    def wait_for(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait until ``condition()`` holds.

        Raises:
            TimeoutError: Not within ``timeout_s`` (the message says what was awaited).

        """
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
            time.sleep(0.1)

    def _call(self, client: Any, request: Any, timeout_s: float) -> Any:
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise TimeoutError(f"{client.srv_name}: no service within {timeout_s:.0f} s")
        future = client.call_async(request)
        self.wait_for(future.done, timeout_s, f"{client.srv_name} response")
        return future.result()

    def start_trial(self, seed: int, timeout_s: float = 60.0) -> int:
        """Reset the twin (robot home, belt clear) and start a trial; returns its id.

        Raises:
            RuntimeError: The twin refused the reset or the trial.

        """
        reset = self._call(self.reset_client, self._trigger_type.Request(), timeout_s)
        if not reset.success:
            raise RuntimeError(f"/trial/reset refused: {reset.message}")
        with self._lock:
            self.tracks.clear()  # what the tracker saw before the reset is gone
        response = self._call(self.start_client, self._start_type.Request(seed=seed), timeout_s)
        if not response.success:
            raise RuntimeError(f"/trial/start refused: {response.message}")
        return int(response.trial_id)

    def wait_for_track(self, timeout_s: float) -> Any:
        """Wait for a track message with an object (since the last trial start); returns it."""

        def newest() -> Any:
            with self._lock:
                return next((m for m in reversed(self.tracks) if m.tracks), None)

        self.wait_for(lambda: newest() is not None, timeout_s, "a tracked object")
        return newest()

    def plan_pick(self, timeout_s: float = 120.0) -> tuple[bool, str]:
        """Ask the planner for a pick of the tracked object: (success, message)."""
        response = self._call(self.plan_client, self._trigger_type.Request(), timeout_s)
        return bool(response.success), str(response.message)

    def wait_for_outcome(self, trial_id: int, timeout_s: float) -> Any:
        """Wait for the twin's outcome of ``trial_id``; returns the TrialOutcome message."""

        def outcome() -> Any:
            with self._lock:
                return next((m for m in self.outcomes if m.trial_id == trial_id), None)

        self.wait_for(lambda: outcome() is not None, timeout_s, f"outcome of trial {trial_id}")
        return outcome()

    def close(self) -> None:
        """Stop spinning and destroy the node."""
        self._executor.shutdown()
        self._thread.join(timeout=5.0)
        self.node.destroy_node()


def source_share_overlay(prefix: Path, repo: Path) -> str:
    """Make an ament prefix whose ``r2s2r`` share is the source tree's; return it.

    ``share/r2s2r/{config,package.xml}`` and each ``launch/*.launch.py`` link to ``repo``
    (launch files one by one: ``ros2 launch`` does not follow folder links); ``lib/r2s2r`` to the
    installed bring-up executables (found on ``AMENT_PREFIX_PATH``). Prepend the returned
    prefix to ``AMENT_PREFIX_PATH``.

    Raises:
        FileNotFoundError: No installed ``lib/r2s2r`` on ``AMENT_PREFIX_PATH``.

    """
    installed = [
        Path(p) / "lib" / "r2s2r"
        for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
        if p and (Path(p) / "lib" / "r2s2r").is_dir()
    ]
    if not installed:
        raise FileNotFoundError("no installed lib/r2s2r on AMENT_PREFIX_PATH (scripts/setup.sh)")
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / "r2s2r"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")
    share = prefix / "share" / "r2s2r"
    share.mkdir(parents=True, exist_ok=True)
    for name in ("config", "package.xml"):
        link = share / name
        if not link.exists():
            link.symlink_to(repo / name)
    # ros2 launch finds launch files by walking the share without following folder links.
    (share / "launch").mkdir(exist_ok=True)
    for source in sorted((repo / "launch").glob("*.launch.py")):
        link = share / "launch" / source.name
        if not link.exists():
            link.symlink_to(source)
    (prefix / "lib").mkdir(exist_ok=True)
    if not (prefix / "lib" / "r2s2r").exists():
        (prefix / "lib" / "r2s2r").symlink_to(installed[0])
    return str(prefix)
