"""Graph isolation (issue 36, case 7 and the weak domain case).

- Private domains are claimed with a lock file per id: two claims on one host (or in one
  process) never get the same domain.
- Every graph the workspace starts discovers on this host only unless asked.
- A launch that brings its own cell refuses to start where a cell already runs in its domain,
  in one line naming the publishing node and the domain, and the running cell is untouched.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from r2s2r_common.ros_domain import (
    DISCOVERY_ENV,
    DiscoveryError,
    apply_discovery,
    claim_domain,
    private_environment,
    release_domain,
)

from r2s2r.graph import ResolvedNode
from r2s2r.pipeline.commands import private_ros_environment

REPO = Path(__file__).resolve().parents[1]


def test_two_claims_get_different_domains() -> None:
    first, second = claim_domain(), claim_domain()
    try:
        assert first.domain_id != second.domain_id
        assert first.lock is not None and second.lock is not None
        assert first.domain_id != 0 and second.domain_id != 0
    finally:
        first.release()
        second.release()


@pytest.mark.graph
def test_a_claim_is_held_across_processes() -> None:
    claim = claim_domain()
    try:
        # Another process claiming every id it can never gets ours.
        code = (
            "from r2s2r_common.ros_domain import claim_domain, DOMAIN_IDS\n"
            "ids = {claim_domain().domain_id for _ in DOMAIN_IDS}\n"
            f"print({claim.domain_id} in ids, len(ids))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        held, count = done.stdout.split()
        assert held == "False", done.stdout
        assert int(count) >= 1
    finally:
        claim.release()


def test_private_environments_are_localhost_and_distinct() -> None:
    first, second = private_ros_environment(), private_environment()
    try:
        assert first["ROS_DOMAIN_ID"] != second["ROS_DOMAIN_ID"]
        for env in (first, second):
            assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    finally:
        release_domain(int(first["ROS_DOMAIN_ID"]))
        release_domain(int(second["ROS_DOMAIN_ID"]))


def test_discovery_localhost_unless_asked() -> None:
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}  # a shell's setting is not asking
    assert apply_discovery(env) == "LOCALHOST" and env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == (
        "LOCALHOST"
    )
    env = {DISCOVERY_ENV: "subnet"}
    assert apply_discovery(env) == "SUBNET"
    with pytest.raises(DiscoveryError, match=DISCOVERY_ENV):
        apply_discovery({DISCOVERY_ENV: "lan"})


@pytest.mark.graph
def test_launched_nodes_discover_on_localhost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from r2s2r.supervisor import GraphSupervisor

    prefix = tmp_path / "prefix"
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages" / "fake_pkg"
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    script = prefix / "lib" / "fake_pkg" / "env_printer"
    script.parent.mkdir(parents=True)
    script.write_text(
        f"#!{sys.executable}\nimport os\n"
        "print('range', os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE'), flush=True)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(
        "AMENT_PREFIX_PATH", f"{prefix}{os.pathsep}{os.environ['AMENT_PREFIX_PATH']}"
    )
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")  # the shell's
    monkeypatch.delenv(DISCOVERY_ENV, raising=False)
    node = ResolvedNode("env_printer", "fake_pkg", "env_printer", ())
    for opened, expected in ((None, "LOCALHOST"), ("SUBNET", "SUBNET")):
        if opened:
            monkeypatch.setenv(DISCOVERY_ENV, opened)
        logs = tmp_path / f"logs_{expected}"
        supervisor = GraphSupervisor([node], logs, 2.0, console=open(os.devnull, "w"))  # noqa: SIM115
        supervisor.start()
        assert supervisor.wait() == 0
        assert f"range {expected}" in (logs / "env_printer.log").read_text()


def _launch(domain: int, log_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain)}
    env.pop(DISCOVERY_ENV, None)
    return subprocess.Popen(
        [sys.executable, "-m", "r2s2r.cli", "launch", "real_deploy", "--no-progress",
         "--log-dir", str(log_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip


@pytest.mark.graph
def test_second_cell_in_a_domain_is_refused(tmp_path: Path) -> None:
    from r2s2r.domain_guard import probe_joint_state_publishers

    claim = claim_domain()  # a domain no other job or test run on this host uses
    first = _launch(claim.domain_id, tmp_path / "first")
    try:
        deadline = time.monotonic() + 120.0
        probe_env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        while not probe_joint_state_publishers(claim.domain_id, 1.0, probe_env):
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the first cell never published /joint_states"
        second = _launch(claim.domain_id, tmp_path / "second")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 1, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        assert f"a cell already runs in ROS domain {claim.domain_id}" in lines[0], lines
        assert "/real_twin" in lines[0] and "/joint_states" in lines[0], lines
        assert not (tmp_path / "second").exists()  # nothing of the second one started
        assert first.poll() is None  # the first cell keeps running
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGINT)
        out, err = first.communicate(timeout=90)
        claim.release()
    assert first.returncode == 0, (out[-2000:], err[-2000:])
