"""Generation on a Ray cluster given by address, joined as a lab joins one (issue 38).

The cluster is a head node (``ray start --head --port P --num-cpus 1``) and a worker node
(``ray start --address 127.0.0.1:P --num-cpus 1``), each command started on its own with its own
temp dir and the cluster's auth token (:mod:`r2s2r_testing.ray_cluster`); ``r2s2r generate
--ray-address 127.0.0.1:P`` then runs one generation worker on each node. Its dataset is the
local process pool's, episode for episode. An address where nothing answers is refused in one
line, within seconds, before any folder is made.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from datagen_support import NOMINAL
from r2s2r_datagen.compare import compare_datasets
from r2s2r_datagen.pool import RayClusterUnreachableError, check_ray_address
from r2s2r_testing.generation import OVERRIDES, write_configurations
from r2s2r_testing.ray_cluster import LocalRayCluster, free_port

EPISODES = 4
REFUSAL_LIMIT_S = 30.0


def _generate(
    configurations: Path, run_dir: Path, env: dict[str, str] | None = None, *extra: str
) -> subprocess.CompletedProcess[str]:
    args = [
        sys.executable, "-m", "r2s2r.cli", "generate", "--configurations-file",
        str(configurations), "-c", "nominal_planner", "-n", str(EPISODES), "-j", "2",
        "-o", str(run_dir), "--no-progress", "--generator", OVERRIDES[0], *extra,
    ]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, check=False)


def test_an_address_where_nothing_listens_is_refused_at_once() -> None:
    check_ray_address("local")  # left to Ray
    started = time.monotonic()
    with pytest.raises(RayClusterUnreachableError, match=r"127\.0\.0\.1:\d+ does not answer"):
        check_ray_address(f"127.0.0.1:{free_port()}", timeout_s=5.0)
    assert time.monotonic() - started < 5.0


def test_an_address_that_answers_but_not_as_ray_is_refused_at_once() -> None:
    """A web server (or anything not gRPC) at the address: refused, not retried for minutes."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def answer_http1() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(64)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=answer_http1, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        with pytest.raises(RayClusterUnreachableError, match="does not answer as a Ray head"):
            check_ray_address(f"127.0.0.1:{port}", timeout_s=5.0)
    finally:
        server.close()
    assert time.monotonic() - started < 5.0


@pytest.mark.graph
def test_dead_address_one_line_no_folder(tmp_path: Path) -> None:
    configurations = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = _generate(configurations, tmp_path / "run", None, "--ray-address", address)
    assert time.monotonic() - started < REFUSAL_LIMIT_S
    assert done.returncode == 1, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and address in lines[0] and "does not answer" in lines[0], lines
    assert not (tmp_path / "run").exists()


@pytest.mark.graph
@pytest.mark.slow
def test_cluster_generates_the_local_dataset(tmp_path: Path) -> None:
    configurations = write_configurations(tmp_path / "configurations.yaml", NOMINAL)
    local = _generate(configurations, tmp_path / "local")
    assert local.returncode == 0, local.stderr[-2000:]
    # A short folder: Ray's socket paths must fit in 107 bytes.
    with tempfile.TemporaryDirectory(prefix="r2s2r-rc-") as short:
        with LocalRayCluster(Path(short), worker_nodes=1, cpus_per_node=1) as cluster:
            ray_run = _generate(
                configurations, tmp_path / "ray", cluster.env(), "--ray-address", cluster.address
            )
            temps = cluster.node_temp_dirs()
        assert ray_run.returncode == 0, ray_run.stderr[-2000:]
        # One generation worker (a Ray actor of 1 CPU) ran on each node.
        for temp in temps:
            logs = [p.read_text(errors="replace") for p in temp.glob("session_*/logs/worker-*.out")]
            assert sum(":actor_name:_RayWorker" in text for text in logs) >= 1, temp
    comparison = compare_datasets(
        tmp_path / "local" / "datasets" / "nominal_planner.hdf5",
        tmp_path / "ray" / "datasets" / "nominal_planner.hdf5",
    )
    assert comparison.differences == []
    assert comparison.episodes_a == comparison.episodes_b and len(comparison.episodes_a) >= 2
    assert comparison.arrays_compared > 0 and comparison.same(tolerance=1e-6)
