"""A Ray cluster on this machine, joined the way a lab joins one (tests and benchmarks).

``ray start --head --port P`` for the head node, then ``ray start --address HOST:P`` for each
worker node, each command started on its own (as on separate machines) with its own temp dir
and a fixed number of CPUs, and token authentication as Ray 2.x clusters run it: one token file
that every node and the driver read (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH``; on real
machines the same file is copied to each). :meth:`LocalRayCluster.env` is what a driver needs
(``r2s2r generate --ray-address``).

Stopping: ``ray stop`` ends every Ray process of the machine, including other clusters and
other sessions' Ray tests; here each node was started with ``ray start --block`` in a process
group of its own, and :meth:`LocalRayCluster.stop` ends those groups (SIGTERM, then SIGKILL
after a grace period): what ``ray stop`` would do on each of the cluster's machines.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

NODE_START_TIMEOUT_S = 90.0
STOP_GRACE_S = 30.0
OBJECT_STORE_BYTES = 200 * 1024 * 1024
"""Object store per node: the workers pass episode jobs and reports, not data."""


def free_port() -> int:
    """Return a TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalRayCluster:
    """A head node and worker nodes started by ``ray start`` on this machine.

    Args:
        folder: Where the token, the nodes' temp dirs and their logs go (keep it short: Ray's
            socket paths must fit in 107 bytes).
        worker_nodes: Worker nodes joined to the head.
        cpus_per_node: ``--num-cpus`` of every node (one generation worker needs one).

    """

    def __init__(self, folder: Path, worker_nodes: int = 1, cpus_per_node: int = 1) -> None:
        self.folder = folder
        self.worker_nodes = worker_nodes
        self.cpus_per_node = cpus_per_node
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.commands: list[str] = []
        self._nodes: list[tuple[subprocess.Popen[bytes], Path]] = []
        self._temp_dirs: list[Path] = []

    def env(self) -> dict[str, str]:
        """Return the environment of a node or driver: this process's, plus the token."""
        return {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.folder / "auth_token"),
            "RAY_USAGE_STATS_ENABLED": "0",
        }

    def node_temp_dirs(self) -> list[Path]:
        """Temp dir of each node started, the head first (kept after :meth:`stop`)."""
        return list(self._temp_dirs)

    def _start_node(self, name: str, arguments: list[str]) -> None:
        temp = self.folder / name
        temp.mkdir(parents=True, exist_ok=True)
        ray = str(Path(sys.executable).with_name("ray"))
        command = [
            ray,
            "start",
            *arguments,
            "--num-cpus",
            str(self.cpus_per_node),
            "--object-store-memory",
            str(OBJECT_STORE_BYTES),
            "--temp-dir",
            str(temp),
            "--dashboard-agent-listen-port",
            "0",
            "--disable-usage-stats",
            "--block",
        ]
        self.commands.append(" ".join(["ray", *command[1:]]))
        with (self.folder / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,
            )
        self._nodes.append((process, temp))
        self._temp_dirs.append(temp)

    def _alive_nodes(self) -> int:
        ray = str(Path(sys.executable).with_name("ray"))
        done = subprocess.run(
            [ray, "status", "--address", self.address],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=60,
            check=False,
        )
        active = done.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
        return len(re.findall(r"\bnode_[0-9a-f]+", active)) if done.returncode == 0 else 0

    def start(self) -> None:
        """Start the head, then each worker node; return once every node is in the cluster.

        Raises:
            RuntimeError: A node command exited, or the nodes did not all join in time (the
                nodes started so far are stopped; their logs are in ``folder``).

        """
        self.folder.mkdir(parents=True, exist_ok=True)
        token = self.folder / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        try:
            self._start_node(
                "head", ["--head", "--port", str(self.port), "--include-dashboard", "false"]
            )
            self._wait_for(1)
            for index in range(self.worker_nodes):
                self._start_node(f"worker{index}", ["--address", self.address])
            self._wait_for(1 + self.worker_nodes)
        except BaseException:
            self.stop()
            raise

    def _wait_for(self, nodes: int) -> None:
        deadline = time.monotonic() + NODE_START_TIMEOUT_S
        while time.monotonic() < deadline:
            for process, temp in self._nodes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"ray start ({temp.name}) exited with {process.returncode}; "
                        f"see {self.folder / (temp.name + '.log')}"
                    )
            if self._alive_nodes() >= nodes:
                return
            time.sleep(1.0)
        raise RuntimeError(
            f"Ray cluster at {self.address}: {nodes} nodes not up within "
            f"{NODE_START_TIMEOUT_S:.0f} s; logs in {self.folder}"
        )

    def stop(self) -> None:
        """End every node's process group (SIGTERM, SIGKILL after :data:`STOP_GRACE_S`)."""
        for process, _ in reversed(self._nodes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process, _ in self._nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for process, _ in self._nodes:
            # The group outlives its leader when Ray's children linger: end them too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        self._nodes = []

    def __enter__(self) -> LocalRayCluster:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
