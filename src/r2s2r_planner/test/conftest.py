import os
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from r2s2r_world.world import WorldParams, load_world

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"


@pytest.fixture(scope="session")
def nominal_world() -> WorldParams:
    return load_world(NOMINAL)


@pytest.fixture(scope="session")
def pick_planner(nominal_world: WorldParams):
    from r2s2r_planner.pick import PickPlanner

    return PickPlanner(nominal_world)
