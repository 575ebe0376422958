"""Fixtures of the r2s2r_datagen tests: a tiny configurations file, an artifact, test generator."""

import os
import random
import sys
from pathlib import Path

import pytest
import yaml

TEST_DIR = Path(__file__).resolve().parent
REPO = TEST_DIR.parents[2]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"

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

FACTORY = "datagen_test_generators:make_scripted_generator"
OVERRIDES = [f"planner={FACTORY}", f"mimicgen={FACTORY}"]
ARTIFACT_OVERRIDES = {
    "belt": {"speed_mps": 0.104},
    "cameras": {"head": {"fx_px": 123.0, "fy_px": 122.5}},
}


def write_configurations(path: Path, behavior_options: dict | None = None) -> Path:
    data = {
        "schema_version": 1,
        "task": "pick_sort",
        "nominal_world_path": str(NOMINAL),
        "grounding_artifact_path": str(path.parent / "artifact.yaml"),
        "recording": {"rate_hz": 10.0, "image_width_px": 16, "image_height_px": 16},
        "configurations": [
            {"name": "grounded_mimicgen", "world": "grounded", "behavior": "mimicgen"},
            {"name": "grounded_planner", "world": "grounded", "behavior": "planner"},
            {"name": "nominal_mimicgen", "world": "nominal", "behavior": "mimicgen"},
            {"name": "nominal_planner", "world": "nominal", "behavior": "planner"},
        ],
        "behavior_options": behavior_options or {},
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def configurations_file(tmp_path: Path) -> Path:
    (tmp_path / "artifact.yaml").write_text(yaml.safe_dump(ARTIFACT_OVERRIDES), encoding="utf-8")
    return write_configurations(tmp_path / "configurations.yaml")
