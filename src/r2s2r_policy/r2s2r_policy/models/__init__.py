"""Policy model types, selected by name from the spec (``spec.model.type``).

Larger models (ACT, Diffusion Policy, LeRobot policies) plug in by subclassing
:class:`~r2s2r_policy.models.base.Policy` and calling :func:`register_model`.
"""

from __future__ import annotations

from ..normalization import NormalizationStats
from ..spec import PolicySpec
from .base import Policy, masked_chunk_loss
from .conv_keypoint import ConvKeypointParams, ConvKeypointPolicy

_REGISTRY: dict[str, type[Policy]] = {"conv_keypoint": ConvKeypointPolicy}


def register_model(name: str, policy_class: type[Policy]) -> None:
    """Make ``policy_class`` buildable as ``model.type: <name>``.

    Raises:
        ValueError: If ``name`` is taken by another class.

    """
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not policy_class:
        raise ValueError(f"model type {name!r} is registered already ({existing.__name__})")
    _REGISTRY[name] = policy_class


def model_types() -> list[str]:
    """Return the registered model type names."""
    return sorted(_REGISTRY)


def build_policy(spec: PolicySpec, stats: NormalizationStats) -> Policy:
    """Build the policy named by ``spec.model.type``.

    Raises:
        ValueError: If the type is not registered (the message lists the registered ones).
        r2s2r_common.config.ConfigError: If ``spec.model.params`` are invalid for the type.

    """
    policy_class = _REGISTRY.get(spec.model.type)
    if policy_class is None:
        raise ValueError(f"model.type = {spec.model.type!r}: expected one of {model_types()}")
    return policy_class(spec, stats)


__all__ = [
    "ConvKeypointParams",
    "ConvKeypointPolicy",
    "Policy",
    "build_policy",
    "masked_chunk_loss",
    "model_types",
    "register_model",
]
