"""Which simulator backend to build: the config and the one factory.

``kind: mujoco`` (default, the tested backend) or ``kind: isaac`` (Isaac Sim, written against
its public API and never run here; see :mod:`r2s2r_sim.isaac_backend`). Requesting ``isaac``
where it cannot run fails at once with one line naming why, before any app is started.

Every simulator of the package modules is built here (:func:`make_backend`; the twin, the
evaluation, generation and the calibration helpers alike), so a backend added here serves them
all; code that reads MuJoCo's own model and data (the mirror, system identification) asks for
that backend by name (:func:`make_mujoco_backend`). ``tests/test_house_rules.py`` keeps backend
constructions out of other modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import Field
from r2s2r_common.config import ConfigModel

from r2s2r_sim.backend import BackendUnavailableError, SimBackend
from r2s2r_sim.isaac_backend import IsaacSimConfig, isaac_unavailable_reason
from r2s2r_sim.scene import PRIMITIVE_DETAIL, SCENE_CACHE_SIZE, SceneExtra

if TYPE_CHECKING:
    from r2s2r_sim.mujoco_backend import MujocoBackend

BACKEND_KINDS: tuple[str, ...] = ("mujoco", "isaac")
"""The selectable simulator backends."""


class SimBackendConfig(ConfigModel):
    """The simulator behind the twin/generation code (one of :data:`BACKEND_KINDS`)."""

    kind: Literal["mujoco", "isaac"] = Field(
        default="mujoco",
        description="Simulator backend: 'mujoco' (tested) or 'isaac' (Isaac Sim, unverified; "
        "needs the isaacsim wheel and an RTX GPU).",
    )
    enable_rendering: bool = Field(
        default=True, description="Create the camera renderers (off: physics only)."
    )
    primitive_slices: int = Field(
        default=PRIMITIVE_DETAIL[0],
        ge=4,
        le=256,
        description="MuJoCo: slices of the rendered spheres, capsules and cylinders "
        "(model.vis.quality.numslices; MuJoCo's default). Fewer draw faster at a rounder look.",
    )
    primitive_stacks: int = Field(
        default=PRIMITIVE_DETAIL[1],
        ge=2,
        le=256,
        description="MuJoCo: stacks of the rendered spheres and capsules "
        "(model.vis.quality.numstacks; MuJoCo's default).",
    )
    scene_cache_size: int = Field(
        default=SCENE_CACHE_SIZE,
        ge=1,
        le=64,
        description="MuJoCo: compiled scenes kept (model and renderers, ~45 MB each with "
        "rendering), one per world and set of episode objects: an episode matching a kept "
        "scene does not build its model and renderers again (~70 ms).",
    )
    isaac: IsaacSimConfig = Field(
        default_factory=IsaacSimConfig, description="Isaac Sim app options (kind: isaac)."
    )


class ClosableSimBackend(SimBackend, Protocol):
    """A :class:`SimBackend` that also frees its renderers/scene (both backends do)."""

    def close(self) -> None:
        """Free renderers and scene; the next reset builds them again."""
        ...


def check_backend_available(config: SimBackendConfig) -> None:
    """Raise before any work starts if the configured backend cannot run here.

    Raises:
        BackendUnavailableError: ``kind: isaac`` where Isaac Sim cannot import or there is no
            RTX GPU (the message says which).

    """
    if config.kind == "isaac":
        reason = isaac_unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"simulator kind = 'isaac': {reason}")


def make_backend(
    config: SimBackendConfig | None = None, scene_extras: Sequence[SceneExtra] = ()
) -> ClosableSimBackend:
    """Build the configured backend.

    Args:
        config: Which backend, with its options; None: the defaults (MuJoCo, rendering).
        scene_extras: MuJoCo scene extras (e.g. the calibration board); MuJoCo only.

    Raises:
        BackendUnavailableError: The backend cannot run here (one line saying why).
        ValueError: Scene extras requested from the Isaac Sim backend.

    """
    config = config or SimBackendConfig()
    check_backend_available(config)
    if config.kind == "isaac":
        if scene_extras:
            raise ValueError(
                "scene_extras are MuJoCo spec edits (e.g. the calibration board); the isaac "
                "backend cannot add them"
            )
        from r2s2r_sim.isaac_backend import IsaacSimBackend

        return IsaacSimBackend(config.isaac, enable_rendering=config.enable_rendering)
    return make_mujoco_backend(config, scene_extras)


def make_mujoco_backend(
    config: SimBackendConfig | None = None, scene_extras: Sequence[SceneExtra] = ()
) -> MujocoBackend:
    """Build the MuJoCo backend, for code that reads its model and data (``.model``, ``.data``).

    Args:
        config: Its options (``kind`` must be ``mujoco``); None: the defaults (rendering).
        scene_extras: MuJoCo scene extras (e.g. the calibration board).

    Raises:
        ValueError: A config of another kind.

    """
    config = config or SimBackendConfig()
    if config.kind != "mujoco":
        raise ValueError(f"simulator kind = {config.kind!r}: this code needs MuJoCo's model")
    from r2s2r_sim.mujoco_backend import MujocoBackend

    return MujocoBackend(
        enable_rendering=config.enable_rendering,
        scene_extras=scene_extras,
        primitive_detail=(config.primitive_slices, config.primitive_stacks),
        scene_cache_size=config.scene_cache_size,
    )
