import pytest
from r2s2r_world.world import WorldParams, load_world
from world_support import NOMINAL


@pytest.fixture
def nominal_world() -> WorldParams:
    return load_world(NOMINAL)
