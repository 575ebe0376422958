"""The Rerun server behind the view: the web viewer and its data port, bound to one address.

The SDK's own web server binds every interface and takes no address, so the view runs the
Rerun command-line server that ships in the ``rerun-sdk`` wheel (``rerun --serve-web --bind
HOST``) as a child this process owns (it dies with its owner), and logs to it over gRPC. Both
ports are checked before it starts: a port in use is one line naming it and the option that
moves it. ROS-free.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from r2s2r_common.errors import BadInputError, RunFailedError
from r2s2r_common.process import spawn_owned, stop_process_group

from r2s2r_view.config import ServerConfig

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
START_TIMEOUT_S = 20.0
"""Longest wait for both ports to accept connections once the server started (s)."""


class PortInUseError(BadInputError, OSError):
    """A viewer port is already taken on the chosen address."""


class ViewerStartError(RunFailedError):
    """The Rerun server did not start (its log's last line says why)."""


def rerun_executable() -> Path:
    """Return the Rerun command-line binary shipped in the ``rerun-sdk`` wheel.

    Raises:
        ViewerStartError: ``rerun-sdk`` is not installed, or its wheel has no binary.

    """
    try:
        import rerun_cli
    except ImportError:
        raise ViewerStartError(
            "rerun-sdk is not installed: run ./scripts/setup.sh (requirements.txt pins it)"
        ) from None
    binary = Path(rerun_cli.__file__).parent / "rerun"
    if not binary.is_file():
        raise ViewerStartError(f"{binary}: the rerun-sdk wheel has no rerun binary")
    return binary


def check_port_free(host: str, port: int, option: str) -> None:
    """Raise :class:`PortInUseError` when ``host:port`` cannot be bound (one line naming it).

    Args:
        host: IP address to bind.
        port: TCP port.
        option: The parameter or option that moves it (named in the message).

    """
    family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As a server binds (SO_REUSEADDR): a port left in TIME_WAIT is free, one listened on
        # is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"viewer port {port} on {host} is in use ({option}): stop what listens "
                    f"there or choose another port with {option}"
                ) from None
            raise PortInUseError(
                f"cannot bind viewer port {host}:{port} ({option}): {error}"
            ) from None


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class RerunServer:
    """The Rerun web viewer and gRPC data server, as an owned child process.

    Args:
        config: Address, ports and memory limit.
        log_path: File for the server's output (none: a temporary file, removed at stop).

    """

    def __init__(self, config: ServerConfig, log_path: Path | None = None) -> None:
        self.config = config
        self._own_log = log_path is None
        self.log_path = log_path
        self._process: subprocess.Popen[Any] | None = None
        self._log: IO[Any] | None = None

    @property
    def _connect_host(self) -> str:
        """The address clients use (loopback when the server binds every interface)."""
        address = ipaddress.ip_address(self.config.host)
        if address.is_unspecified:
            return "::1" if address.version == 6 else "127.0.0.1"
        return self.config.host

    @property
    def grpc_uri(self) -> str:
        """The data stream's URI, for the SDK and the web viewer."""
        host = self._connect_host
        host = f"[{host}]" if ":" in host else host
        return f"rerun+http://{host}:{self.config.grpc_port}/proxy"

    @property
    def url(self) -> str:
        """The page to open: the web viewer, connected to the data stream."""
        host = self._connect_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.config.web_port}/?url={quote(self.grpc_uri, safe='')}"

    def start(self) -> None:
        """Check both ports, start the server and wait until both ports accept connections.

        Raises:
            PortInUseError: A port is taken (one line naming it and its option).
            ViewerStartError: The server exited or did not listen within
                :data:`START_TIMEOUT_S`.

        """
        config = self.config
        check_port_free(config.host, config.web_port, "web_port / --web-port")
        check_port_free(config.host, config.grpc_port, "grpc_port / --grpc-port")
        command = [
            str(rerun_executable()),
            "--serve-web",
            "--bind",
            config.host,
            "--port",
            str(config.grpc_port),
            "--web-viewer-port",
            str(config.web_port),
            "--server-memory-limit",
            config.server_memory_limit,
            "--hide-welcome-screen",
        ]
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="r2s2r_view_rerun_", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = spawn_owned(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        host = self._connect_host
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                last_line = self._last_line()
                self.stop()
                raise ViewerStartError(f"the Rerun server exited at start-up: {last_line}")
            if _accepts(host, config.web_port) and _accepts(host, config.grpc_port):
                return
            time.sleep(0.1)
        last_line = self._last_line()
        self.stop()
        raise ViewerStartError(
            f"the Rerun server did not listen on {config.host}:{config.web_port} and "
            f":{config.grpc_port} within {START_TIMEOUT_S:g} s: {last_line}"
        )

    def _last_line(self) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return "(no log kept)"
        text = ANSI_ESCAPE.sub("", self.log_path.read_text(errors="replace"))
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return lines[-1] if lines else "(empty log)"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Stop the server (a second call does nothing)."""
        if self._process is not None:
            stop_process_group(self._process, grace_s=3.0)
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
            if self._own_log and self.log_path is not None:
                self.log_path.unlink(missing_ok=True)
                self.log_path = None

    def __enter__(self) -> RerunServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
