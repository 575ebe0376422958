"""Workspace-wide pytest set-up: ROS 2 traffic isolated per run, and the three test tiers.

Every pytest process claims a DDS domain of its own (a lock file per domain id, held while the
process lives) and talks on this host only; the nodes its tests start inherit it. Two runs on
one domain (a one-in-200 draw per pair of concurrent runs before the locks) see each other's
twins: a second ``/joint_states`` stream with another clock makes a ROS client test wait for
the wrong cell time, or log the other twin's samples.

Tiers (markers, one per test; ``pytest --tier unit`` or ``scripts/test.sh --fast`` runs the
unit tier alone):

- ``unit``: plain Python: no rclpy context and no processes (the default);
- ``node``: in-process rclpy (a node built with parameter overrides, publish and assert);
- ``graph``: separate processes (nodes started as a user would, the CLI, process pools).

A test module that imports rclpy, a ROS message or service type, or a node module is ``node``
without saying so; everything else states its tier with ``pytestmark = pytest.mark.<tier>`` or a
decorator (the highest tier given wins, so one graph test in a node module is marked alone).
The tiers are checked while the tests run: a ``unit`` test that initialises rclpy (a context,
hence nodes and DDS traffic), or a ``unit``/``node`` test that starts a process, fails with the
tier it needs. (Importing a module that imports rclpy, e.g. to read a node's parameter schema,
is not using it.)

The fixtures that tests share (a ROS context, generation inputs) are a plugin of their own,
``r2s2r_testing.plugin``, loaded below; synthetic episodes, bags and stand-in programs for tests
are in the same package.
"""

import gc
import multiprocessing.process
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from r2s2r_common.ros_domain import claim_domain

pytest_plugins = ("r2s2r_testing.plugin",)
"""The shared fixtures (ROS context, generation inputs): src/r2s2r_testing, a package of its own."""

# Each pytest process talks on its own DDS domain, on this host only, so that parallel runs
# (or a running cell, which uses the default domain 0) never cross-talk with the tests. The
# claim is the one every private graph of the workspace makes (a lock file per domain id,
# r2s2r_common.ros_domain), so tests and jobs on one host never share a domain either.
_DOMAIN_CLAIM = claim_domain()
_DOMAIN = _DOMAIN_CLAIM.domain_id
os.environ["ROS_DOMAIN_ID"] = str(_DOMAIN)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("MPLBACKEND", "Agg")

# On pytest-xdist's workers (the unit tier of scripts/test.sh), one intra-op thread each: two
# workers on two cores, each with an OpenMP pool of two spinning threads, slowed torch tests
# 15-fold (the translator fixture: 20 s alone, past its 300 s timeout beside a training test,
# whose worker pytest-timeout then ended: "node down").
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)

TIERS = ("unit", "node", "graph")
"""Test tiers, lowest first."""

TIER_KEY = pytest.StashKey[str]()

# Programs that libraries run for themselves (ctypes.util.find_library, platform probes,
# matplotlib building its font cache on a fresh machine with fc-list); they
# are not processes a test starts.
_HELPER_PROGRAMS = {"ldconfig", "gcc", "cc", "ld", "objdump", "uname", "lscpu", "nproc", "fc-list"}


class TierError(AssertionError):
    """A test did what its tier does not allow."""


def _ros_module(name: str) -> bool:
    """Whether a module name is rclpy, a ROS interface package or a node module here."""
    top = name.split(".")[0]
    return (
        top in {"rclpy", "rosidl_runtime_py", "launch", "launch_ros"}
        or ".msg" in name
        or ".srv" in name
        or ".nodes." in name
        or name.endswith(".nodes")
    )


def _imports_ros(module: ModuleType) -> bool:
    for value in vars(module).values():
        if isinstance(value, ModuleType):
            name = value.__name__
        else:
            name = getattr(value, "__module__", None) or ""
            if not isinstance(name, str):
                continue
        if _ros_module(name):
            return True
    return False


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--tier``: run the tests of these tiers only (exact, unlike ``-m`` on module marks)."""
    parser.addoption(
        "--tier",
        action="append",
        choices=TIERS,
        default=[],
        help="run only the tests of this tier (repeatable); default: every tier",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test exactly one tier (explicit, else inferred from its imports); --tier."""
    inferred: dict[str, str] = {}
    for item in items:
        given = [m.name for m in item.iter_markers() if m.name in TIERS]
        if given:
            tier = max(given, key=TIERS.index)
        else:
            module = getattr(item, "module", None)
            key = getattr(module, "__name__", "")
            if key not in inferred:
                inferred[key] = "node" if module is not None and _imports_ros(module) else "unit"
            tier = inferred[key]
        if tier not in given:
            item.add_marker(getattr(pytest.mark, tier))
        item.stash[TIER_KEY] = tier
    wanted = config.getoption("--tier")
    if wanted:
        keep = [item for item in items if item.stash[TIER_KEY] in wanted]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


def _program(args: Any) -> str:
    if isinstance(args, str | bytes | os.PathLike):
        first = os.fsdecode(args).split()[0] if os.fsdecode(args).strip() else ""
    else:
        first = os.fsdecode(next(iter(args), ""))
    return Path(first).name


@pytest.fixture(autouse=True)
def _tier_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail a test that starts processes (unit, node) or initialises rclpy (unit)."""
    tier = request.node.stash.get(TIER_KEY, "unit")
    if tier == "graph":
        yield
        return
    where = request.node.nodeid
    popen_init = subprocess.Popen.__init__

    def guarded_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if _program(args) not in _HELPER_PROGRAMS:
            raise TierError(f"{where} ({tier} tier) started a process {args!r}: mark it graph")
        popen_init(self, args, *rest, **kwargs)

    def guarded_start(self: multiprocessing.process.BaseProcess) -> None:
        raise TierError(f"{where} ({tier} tier) started a process ({self.name}): mark it graph")

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_popen)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", guarded_start)
    context_module = sys.modules.get("rclpy.context")
    if tier == "unit" and context_module is not None:

        def guarded_init(*args: Any, **kwargs: Any) -> None:
            raise TierError(f"{where} (unit tier) initialises rclpy: mark it node")

        monkeypatch.setattr(context_module.Context, "init", guarded_init)
    yield


@pytest.fixture(autouse=True)
def _ros_garbage_collected_after_the_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Finalize a node/graph test's unreachable rclpy objects once its contexts are shut down.

    An rclpy handle that something in a reference cycle still holds (a node whose destruction
    was deferred while in use, an entity keeping its node alive) is finalized when the cyclic
    garbage collector gets to it; the last one of a context destroys its DDS participant. At a
    random moment in a later test, that participant's destruction can deadlock Fast DDS with
    another participant of this process that is delivering discovery data to it (seen in a CI
    rehearsal: the main thread spinning in ``DomainParticipant::set_listener`` with the GIL
    held, a discovery thread in ``EDPSimplePUBListener`` waiting for the participant's mutex;
    no timeout could fire). Collecting here, after the test's own context fixtures were torn
    down (autouse fixtures are set up first and torn down last), finalizes them while no other
    participant of the test is alive.
    """
    yield
    if request.node.stash.get(TIER_KEY, "unit") != "unit":
        gc.collect()
