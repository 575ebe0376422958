"""Fixtures of the r2s2r_datagen tests: a tiny configurations file, an artifact, test generator."""

import os
import random
import sys
from pathlib import Path

import pytest
import yaml

TEST_DIR = Path(__file__).resolve().parent

os.environ["ROS_DOMAIN_ID"] = str(random.Random(os.getpid() + 7).randint(1, 200))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("MUJOCO_GL", "egl")
# The test-only generator module must be importable in spawned workers (they inherit sys.path)
# and in Ray workers and subprocesses (they inherit PYTHONPATH).
if str(TEST_DIR) not in sys.path:
    sys.path.insert(0, str(TEST_DIR))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(TEST_DIR), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)

from datagen_support import ARTIFACT_OVERRIDES, write_configurations  # noqa: E402


@pytest.fixture
def configurations_file(tmp_path: Path) -> Path:
    (tmp_path / "artifact.yaml").write_text(yaml.safe_dump(ARTIFACT_OVERRIDES), encoding="utf-8")
    return write_configurations(tmp_path / "configurations.yaml")
