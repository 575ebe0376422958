"""Refuse to start a second cell in a ROS domain that already has one.

Two cells in one domain (a second ``r2s2r launch real_deploy``, a twin left running) publish two
``/joint_states``, ``/clock``, ``/belt/speed`` and ``/objects/tracks`` streams: every consumer
mixes them, and a policy commands both arms. Before a graph that brings its own cell (the real
twin) starts, :func:`joint_state_publishers` looks for publishers of ``/joint_states`` in its
domain for a moment, with a short-lived rclpy node in a process of its own, and
:func:`check_no_cell_running` refuses, naming the publishing nodes and the domain.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from r2s2r_common.errors import RunFailedError
from r2s2r_common.topics import JOINT_STATES

CELL_EXECUTABLES = frozenset({("r2s2r_sim", "real_twin"), ("r2s2r_sim", "sim_bridge")})
"""``(package, executable)`` of the nodes that are a cell (they publish ``/joint_states``)."""
PROBE_S = 4.0
"""How long the probe looks for a publisher when none is there (it returns as soon as one is
seen). Localhost discovery usually answers within 1 s; on the 2-core machine under load it took
up to 2.5 s, and a 1.5 s probe missed a running cell 1 time in 6."""
PROBE_START_LIMIT_S = 30.0
"""How long the probe's process may take to import rclpy and start, at most."""
NAME_WAIT_S = 2.0
"""How much longer it waits for the name of a publisher it has seen."""
UNKNOWN = "_UNKNOWN_"
"""What rmw reports for a node whose name it does not know yet."""


class CellAlreadyRunningError(RunFailedError):
    """A cell already publishes ``/joint_states`` in the domain a graph would start one in."""


def joint_state_publishers(
    domain_id: int, wait_s: float = PROBE_S, discovery: str | None = None
) -> list[str]:
    """Return the nodes that publish ``/joint_states`` in ``domain_id`` (fully qualified names).

    Args:
        domain_id: The ROS domain to look in.
        wait_s: How long to wait for discovery (returns as soon as one is seen).
        discovery: ``ROS_AUTOMATIC_DISCOVERY_RANGE`` of the probe (None: this process's).

    """
    import rclpy
    from rclpy.context import Context

    previous = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    if discovery is not None:
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = discovery
    context = Context()
    try:
        rclpy.init(context=context, domain_id=domain_id)
    finally:
        if discovery is not None:
            if previous is None:
                os.environ.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
            else:
                os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = previous
    try:
        node = rclpy.create_node(
            f"r2s2r_cell_probe_{os.getpid()}",
            context=context,
            enable_rosout=False,
            start_parameter_services=False,
        )
        try:
            deadline = time.monotonic() + wait_s
            name_deadline: float | None = None
            names: list[str] = []
            while True:
                names = _publisher_names(node.get_publishers_info_by_topic(JOINT_STATES))
                if names and not any(UNKNOWN in name for name in names):
                    break
                now = time.monotonic()
                if names and name_deadline is None:
                    # A publisher is seen before its node's name arrives: wait a little more.
                    name_deadline = now + NAME_WAIT_S
                if now >= (name_deadline if name_deadline is not None else deadline):
                    break
                time.sleep(0.1)
            return ["an unnamed node" if UNKNOWN in name else name for name in names]
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


def probe_joint_state_publishers(
    domain_id: int, wait_s: float, env: Mapping[str, str]
) -> list[str]:
    """Run :func:`joint_state_publishers` in a child process (this one keeps no participant).

    A DDS participant created and destroyed in this process could deadlock Fast DDS with the
    participant a command creates next (the ROS client of ``r2s2r ground`` or ``evaluate``;
    see ``conftest.py``), so the probe lives and dies in a process of its own.
    """
    command = [sys.executable, "-m", "r2s2r.domain_guard", str(domain_id), str(wait_s)]
    try:
        done = subprocess.run(
            command,
            env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=wait_s + NAME_WAIT_S + PROBE_START_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return []  # no answer: start (the nodes' own checks still apply)
    if done.returncode != 0:
        return []
    names = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else []
    return [str(name) for name in names]


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m r2s2r.domain_guard DOMAIN [WAIT_S]``: print the publishers as a JSON list."""
    args = list(sys.argv[1:] if argv is None else argv)
    wait_s = float(args[1]) if len(args) > 1 else PROBE_S
    print(json.dumps(joint_state_publishers(int(args[0]), wait_s)), flush=True)


def _publisher_names(infos: Sequence[object]) -> list[str]:
    names = set()
    for info in infos:
        namespace = str(getattr(info, "node_namespace", "/")).rstrip("/")
        names.add(f"{namespace}/{getattr(info, 'node_name', UNKNOWN)}")
    return sorted(names)


def starts_a_cell(nodes: Sequence[object]) -> bool:
    """Whether a resolved graph brings its own cell (:data:`CELL_EXECUTABLES`)."""
    return any(
        (getattr(node, "package", ""), getattr(node, "executable", "")) in CELL_EXECUTABLES
        for node in nodes
    )


def check_no_cell_running(env: Mapping[str, str], wait_s: float = PROBE_S) -> None:
    """Refuse when a cell already publishes ``/joint_states`` in the domain of ``env``.

    Args:
        env: The graph's environment (``ROS_DOMAIN_ID``, 0 when unset;
            ``ROS_AUTOMATIC_DISCOVERY_RANGE``).
        wait_s: See :func:`joint_state_publishers`.

    Raises:
        CellAlreadyRunningError: One line naming the publishing node(s) and the domain.

    """
    text = env.get("ROS_DOMAIN_ID", "").strip() or "0"
    try:
        domain_id = int(text)
    except ValueError:
        return  # rcl refuses it itself, in the node's words
    publishers = probe_joint_state_publishers(domain_id, wait_s, env)
    if publishers:
        raise CellAlreadyRunningError(
            f"a cell already runs in ROS domain {domain_id}: {', '.join(publishers)} "
            f"publish{'es' if len(publishers) == 1 else ''} {JOINT_STATES}; stop it, or start "
            "this one in another domain (ROS_DOMAIN_ID=N r2s2r launch ...)"
        )


if __name__ == "__main__":
    main()
