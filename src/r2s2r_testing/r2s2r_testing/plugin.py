"""The workspace's pytest plugin: fixtures every test folder shares.

The root ``conftest.py`` loads it (``pytest_plugins``), next to its tier checks and its ROS
domain per test process. Fixtures:

- ``ros_context``: a fresh rclpy context for a node-tier test, shut down after it
  (:func:`r2s2r_testing.ros.ros_context_of` for other scopes or another domain);
- ``configurations_file``: a tiny generation configurations file whose behaviors the scripted
  test generator plays (:mod:`r2s2r_testing.generation`), with its grounding artifact beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

NOMINAL_WORLD = Path("config") / "world" / "nominal.yaml"
"""The nominal world file, relative to the workspace (pytest's rootdir)."""


@pytest.fixture
def ros_context() -> Iterator[Any]:
    """Give a node-tier test a fresh rclpy context; shut it down after the test."""
    from r2s2r_testing.ros import ros_context_of

    with ros_context_of() as context:
        yield context


@pytest.fixture
def configurations_file(tmp_path: Path, pytestconfig: pytest.Config) -> Path:
    """Write ``configurations.yaml`` (four configurations) and its ``artifact.yaml``; the first."""
    import yaml

    from r2s2r_testing.generation import ARTIFACT_OVERRIDES, write_configurations

    (tmp_path / "artifact.yaml").write_text(yaml.safe_dump(ARTIFACT_OVERRIDES), encoding="utf-8")
    return write_configurations(
        tmp_path / "configurations.yaml", pytestconfig.rootpath / NOMINAL_WORLD
    )
