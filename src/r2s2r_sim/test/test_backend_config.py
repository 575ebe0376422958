"""Backend selection by config, and the one-line refusal of a backend that cannot run here."""

from __future__ import annotations

import subprocess
import sys

import pytest
from r2s2r_sim.backend import BackendUnavailableError
from r2s2r_sim.backend_config import SimBackendConfig, make_backend, make_mujoco_backend
from r2s2r_sim.mujoco_backend import MujocoBackend

from r2s2r_sim import isaac_backend


def test_default_kind_builds_mujoco() -> None:
    backend = make_backend(SimBackendConfig(enable_rendering=False))
    assert isinstance(backend, MujocoBackend) and not backend.enable_rendering


def test_the_factory_defaults_to_mujoco_with_rendering_and_its_options() -> None:
    config = SimBackendConfig()
    backend = make_backend()
    assert isinstance(backend, MujocoBackend) and backend.enable_rendering
    assert backend.primitive_detail == (config.primitive_slices, config.primitive_stacks)
    assert backend.scene_cache_size == config.scene_cache_size and backend.scene_extras == ()
    extra = lambda spec: None  # noqa: E731 (never run: no reset)
    built = make_mujoco_backend(SimBackendConfig(enable_rendering=False), [extra])
    assert isinstance(built, MujocoBackend) and not built.enable_rendering
    assert built.scene_extras == (extra,)


def test_the_mujoco_factory_refuses_another_kind() -> None:
    with pytest.raises(ValueError, match="'isaac'"):
        make_mujoco_backend(SimBackendConfig(kind="isaac"))


def test_unknown_kind_is_refused_by_the_schema() -> None:
    with pytest.raises(ValueError, match="kind"):
        SimBackendConfig(kind="gazebo")  # type: ignore[arg-type]


@pytest.mark.skipif(
    isaac_backend.isaac_unavailable_reason() is None, reason="Isaac Sim can run here"
)
def test_isaac_where_it_cannot_run_fails_in_one_line_before_any_app() -> None:
    reason = isaac_backend.isaac_unavailable_reason()
    assert reason
    with pytest.raises(BackendUnavailableError) as raised:
        make_backend(SimBackendConfig(kind="isaac"))
    message = str(raised.value)
    assert "\n" not in message and reason in message and "'isaac'" in message
    assert "omni.kit_app" not in sys.modules and "kit_app" not in sys.modules  # no app started


def _fake_smi(monkeypatch: pytest.MonkeyPatch, listing: str) -> None:
    monkeypatch.setattr(isaac_backend.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        isaac_backend.subprocess,
        "run",
        lambda *args, **kwargs: subprocess.CompletedProcess(args, 0, stdout=listing),
    )


def test_gpu_check_wants_rt_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(monkeypatch, "NVIDIA H200\n")
    problem = isaac_backend._gpu_problem()
    assert problem is not None and "no RTX GPU" in problem and "H200" in problem
    _fake_smi(monkeypatch, "NVIDIA H100 80GB HBM3\nNVIDIA L40S\n")
    assert isaac_backend._gpu_problem() is None
    _fake_smi(monkeypatch, "NVIDIA GeForce RTX 4090\n")
    assert isaac_backend._gpu_problem() is None
    _fake_smi(monkeypatch, "")
    assert isaac_backend._gpu_problem() == "no NVIDIA GPU (nvidia-smi lists none)"
    monkeypatch.setattr(isaac_backend.shutil, "which", lambda name: None)
    assert isaac_backend._gpu_problem() == "no NVIDIA GPU (nvidia-smi not found)"


def test_import_check_reports_a_failing_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isaac_backend.importlib.util, "find_spec", lambda name: object())

    def bootstrap_exits(name: str) -> object:
        raise SystemExit("Unable to find 'omniverse-kit' package")

    monkeypatch.setattr(isaac_backend.importlib, "import_module", bootstrap_exits)
    assert isaac_backend._import_problem() == (
        "isaacsim does not import (SystemExit: Unable to find 'omniverse-kit' package)"
    )
    monkeypatch.setattr(isaac_backend.importlib.util, "find_spec", lambda name: None)
    assert (
        isaac_backend._import_problem() == "isaacsim does not import (no module named 'isaacsim')"
    )
