"""Generation builds the simulator its configurations file selects (``simulator:``)."""

from pathlib import Path

import pytest
import yaml
from datagen_support import NOMINAL
from r2s2r_common.config import ConfigError
from r2s2r_datagen.config import GenerateConfig, bundled_configurations_path
from r2s2r_datagen.configurations import load_datagen_config
from r2s2r_datagen.runner import run_generation
from r2s2r_datagen.worker import WorkerSetup, WorkerState
from r2s2r_sim.backend_config import SimBackendConfig
from r2s2r_sim.isaac_backend import isaac_unavailable_reason
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.scene import PRIMITIVE_DETAIL
from r2s2r_testing.generation import OVERRIDES, write_configurations


def _with_simulator(path: Path, simulator: dict[str, object]) -> Path:
    write_configurations(path, NOMINAL)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["simulator"] = simulator
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_worker_builds_the_configured_backend(tmp_path: Path) -> None:
    path = _with_simulator(tmp_path / "c.yaml", {"kind": "mujoco", "enable_rendering": False})
    simulator = load_datagen_config(path).simulator
    assert simulator == SimBackendConfig(kind="mujoco", enable_rendering=False)
    state = WorkerState(WorkerSetup(worker_id="w", run_dir=str(tmp_path), simulator=simulator))
    assert isinstance(state.backend, MujocoBackend) and not state.backend.enable_rendering


@pytest.mark.skipif(isaac_unavailable_reason() is None, reason="Isaac Sim can run here")
def test_isaac_where_it_cannot_run_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = _with_simulator(tmp_path / "c.yaml", {"kind": "isaac"})
    config = GenerateConfig(
        configurations_path=str(path),
        configurations=["nominal_planner"],
        episodes_per_configuration=1,
        output_dir=str(tmp_path / "run"),
        generator_overrides=OVERRIDES[:1],
        progress=False,
    )
    with pytest.raises(ConfigError) as raised:
        run_generation(config)
    message = str(raised.value)
    assert "\n" not in message and "simulator kind = 'isaac'" in message
    assert str(isaac_unavailable_reason()) in message
    assert not (tmp_path / "run").exists()


def test_unknown_simulator_kind_is_refused(tmp_path: Path) -> None:
    path = _with_simulator(tmp_path / "c.yaml", {"kind": "gazebo"})
    with pytest.raises(ConfigError, match="kind"):
        load_datagen_config(path)


def test_the_worker_builds_the_configured_primitive_detail(tmp_path: Path) -> None:
    path = _with_simulator(
        tmp_path / "c.yaml", {"primitive_slices": 14, "primitive_stacks": 8, "scene_cache_size": 6}
    )
    simulator = load_datagen_config(path).simulator
    state = WorkerState(WorkerSetup(worker_id="w", run_dir=str(tmp_path), simulator=simulator))
    assert state.backend.primitive_detail == (14, 8)
    assert state.backend.scene_cache_size == 6
    bundled = load_datagen_config(bundled_configurations_path()).simulator
    assert (bundled.primitive_slices, bundled.primitive_stacks) == (14, 8)
    assert SimBackendConfig().primitive_slices == PRIMITIVE_DETAIL[0]  # elsewhere: the twin's
