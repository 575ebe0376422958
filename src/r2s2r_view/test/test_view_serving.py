"""The view's server and bag replay: loopback binding, a port in use, a bag without cameras."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from r2s2r_common.config import ConfigError, parse_config
from r2s2r_common.topics import HAND_CAMERA_IMAGE, HEAD_CAMERA_IMAGE
from r2s2r_testing.bags import EpisodeSpec, write_episode_bag
from r2s2r_view.bag_replay import replay_bag
from r2s2r_view.config import ServerConfig
from r2s2r_view.rerun_log import CellLogger
from r2s2r_view.server import PortInUseError, RerunServer, check_port_free

pytestmark = pytest.mark.graph


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_bad_host_and_equal_ports_are_refused() -> None:
    with pytest.raises(ConfigError, match="not an IP address"):
        parse_config(ServerConfig, {"host": "localhost:9090"})
    with pytest.raises(ConfigError, match="different ports"):
        parse_config(ServerConfig, {"web_port": 9000, "grpc_port": 9000})


def test_server_binds_loopback_only_and_stops() -> None:
    web, grpc = free_port(), free_port()
    server = RerunServer(ServerConfig(web_port=web, grpc_port=grpc))
    with server:
        assert server._process is not None
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process(server._process.pid).net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening == {("127.0.0.1", web), ("127.0.0.1", grpc)}
        assert server.url == (
            f"http://127.0.0.1:{web}/?url=rerun%2Bhttp%3A%2F%2F127.0.0.1%3A{grpc}%2Fproxy"
        )
    assert not server.running


def test_a_port_in_use_is_one_line_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with pytest.raises(PortInUseError) as error:
            check_port_free("127.0.0.1", port, "--web-port")
        assert str(error.value) == (
            f"viewer port {port} on 127.0.0.1 is in use (--web-port): stop what listens there "
            "or choose another port with --web-port"
        )
        server = RerunServer(ServerConfig(web_port=free_port(), grpc_port=port))
        with pytest.raises(PortInUseError, match=f"viewer port {port} .*grpc_port"):
            server.start()
        assert not server.running and server.log_path is None  # nothing left behind


class Spy:
    """A recording stand-in that keeps the entity of every log call."""

    def __init__(self) -> None:
        self.entities: list[str] = []
        self.texts: list[str] = []

    def set_time(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def log(self, entity: str, *archetypes: Any, static: bool = False) -> None:
        self.entities.append(entity)
        for archetype in archetypes:
            text = getattr(archetype, "text", None)
            if text is not None:
                self.texts += text.as_arrow_array().to_pylist()

    def flush(self) -> None:
        pass


def test_bag_without_cameras_is_named_and_the_rest_drawn(tmp_path: Path) -> None:
    cameras = {HEAD_CAMERA_IMAGE, HAND_CAMERA_IMAGE}
    bag = write_episode_bag(tmp_path / "episode_000000", EpisodeSpec(omit_topics=cameras))
    spy = Spy()
    lines: list[str] = []
    summary = replay_bag(bag, CellLogger(spy), on_missing=lines.append)  # type: ignore[arg-type]
    assert summary.missing == ["/tf", HEAD_CAMERA_IMAGE, HAND_CAMERA_IMAGE]  # no /tf either
    assert lines == [summary.missing_line()]
    assert "no /tf, /head_camera/image_raw, /hand_camera/image_raw (" in lines[0]
    assert any("camera panels stay empty" in text for text in spy.texts)
    assert summary.logged["/objects/tracks"] > 0 and "cell/objects" in spy.entities
    assert not any(entity.startswith("cameras/") for entity in spy.entities)


def test_bag_with_cameras_draws_them_thinned(tmp_path: Path) -> None:
    bag = write_episode_bag(tmp_path / "episode_000000", EpisodeSpec())
    spy = Spy()
    summary = replay_bag(bag, CellLogger(spy), image_period_s=0.1)  # type: ignore[arg-type]
    # 45 frames 33,333,333 ns apart: three of them span 99.99 ms < 0.1 s, so every 4th is drawn.
    assert summary.logged[HEAD_CAMERA_IMAGE] == 12
    assert summary.thinned[HEAD_CAMERA_IMAGE] == 34  # of 46 frames in 1.5 s
    assert spy.entities.count("cameras/head") == 12


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "r2s2r.cli", "view", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_port_in_use_and_bag_without_cameras(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        done = run_cli("--web-port", str(port), "--duration-s", "0.1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"r2s2r: error: viewer port {port} on 127.0.0.1 is in use (--web-port): stop what "
        "listens there or choose another port with --web-port"
    ]
    bag = write_episode_bag(
        tmp_path / "episode_000000", EpisodeSpec(omit_topics={HEAD_CAMERA_IMAGE, HAND_CAMERA_IMAGE})
    )
    web, grpc = free_port(), free_port()
    done = run_cli(
        str(bag), "--web-port", str(web), "--grpc-port", str(grpc), "--duration-s", "0.5"
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"r2s2r view: warning: {bag}: the bag has no /tf, /head_camera/image_raw, "
        "/hand_camera/image_raw (the view shows the rest; its camera panels stay empty)"
    ]
    assert f"view at http://127.0.0.1:{web}/" in done.stdout
