"""What a policy consumes and produces: the policy spec and the robot spec it must match.

A :class:`PolicySpec` travels with every checkpoint (``config.yaml``). Before a checkpoint
drives a robot, :func:`check_spec` compares it with the :class:`RobotSpec` the robot offers
(camera images at the size the node will feed, joint names, action names, belt speed and the
tracked object with the sources that make them) and lists every mismatch, so a policy trained
for another arm, hand, camera resolution or perception is refused with a message a user can
act on.

Time (docs/architecture.md section 7): an action chunk computed from the observation at ``t``
holds the joint targets for ``t + dt, t + 2·dt, ..., t + H·dt`` (``dt = 1 / control_rate_hz``):
chunk step ``k`` is the target in force ``k + 1`` control steps after the observation. Training
labels (:class:`r2s2r_policy.data.chunks.ChunkDataset`), the inference engine and the trajectory's
``time_from_start`` follow that one rule.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel

from r2s2r_dataset import BELT_SPEED_KEY, CAMERA_KEYS, OBJECT_TRACK_KEY

DEFAULT_IMAGE_KEYS: tuple[str, ...] = CAMERA_KEYS
"""The cameras a policy reads unless told otherwise: every camera of the episode schema."""

# A policy's inputs and labels are keyed by the episode schema's names
# (``r2s2r_dataset``: JOINT_POS_KEY, BELT_SPEED_KEY, OBJECT_TRACK_KEY, ACTIONS_KEY);
# the keys below are the policy's own, never in a dataset file.
ACTION_MASK_KEY = "action_mask"
"""Batch key of the chunk mask (True where a chunk step has a label; ``data.chunks``)."""

PALM_OBJECT_KEY = "palm_object"
"""Normalisation-statistics key of the derived palm/object input (not a dataset key)."""
PALM_OBJECT_DIM = 12
"""Width of that input (``r2s2r_policy.models.palm_frame.PALM_OBJECT_FIELDS``)."""

BELT_SPEED_SOURCE = "belt_speed"
"""``belt_speed_source`` of data whose belt speed is the ``belt_speed`` estimator's output."""


class SpecMismatchError(ValueError):
    """A checkpoint's policy spec does not match the robot (or dataset) it is used with.

    Attributes:
        mismatches: One human-readable line per mismatch.

    """

    def __init__(self, mismatches: list[str], context: str = "policy spec") -> None:
        self.mismatches = list(mismatches)
        lines = "\n  - ".join(self.mismatches)
        super().__init__(f"{context} does not match the robot ({len(mismatches)}):\n  - {lines}")


class ImageSpec(ConfigModel):
    """One camera image input of the policy (RGB, uint8, ``height_px`` × ``width_px`` × 3)."""

    key: str = Field(min_length=1, description="Observation key, e.g. 'head_camera_rgb'.")
    height_px: int = Field(default=128, ge=8, le=1024, description="Image height fed to the model.")
    width_px: int = Field(default=128, ge=8, le=1024, description="Image width fed to the model.")


class ModelConfig(ConfigModel):
    """Which model class builds the policy, and its hyper-parameters.

    ``params`` is validated by the chosen model's own schema (see
    :func:`r2s2r_policy.models.build_policy`), so a typo in a hyper-parameter is an error.
    """

    type: str = Field(default="conv_keypoint", description="Registered model name.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Hyper-parameters of the model type."
    )


class PolicySpec(ConfigModel):
    """Inputs, outputs and model choice of a visuomotor policy."""

    images: list[ImageSpec] = Field(
        default_factory=lambda: [ImageSpec(key=k) for k in DEFAULT_IMAGE_KEYS],
        min_length=1,
        description="Camera inputs, in the order the model reads them.",
    )
    joint_names: list[str] = Field(
        min_length=1, description="Joint position inputs (arm then hand), order of the state."
    )
    action_names: list[str] = Field(
        min_length=1, description="Joint position targets predicted per chunk step."
    )
    use_belt_speed: bool = Field(default=True, description="Feed the belt speed (m/s) as input.")
    belt_speed_source: str = Field(
        default=BELT_SPEED_SOURCE,
        description="What makes the belt-speed input (dataset metadata belt_speed_source).",
    )
    object_track_fields: list[str] = Field(
        default_factory=list,
        description="Columns of the tracked-object input (r2s2r_dataset.object_track; "
        "empty: the policy has no object input).",
    )
    object_track_source: str = Field(
        default="", description="What makes the tracked-object input (e.g. 'object_tracker')."
    )
    palm_object_features: bool = Field(
        default=False,
        description="Also feed the palm position (forward kinematics of the measured joints) "
        "and the tracked object relative to the palm (r2s2r_policy.models.palm_frame); needs "
        "the tracked-object input.",
    )
    object_relative_reach: bool = Field(
        default=False,
        description="Also predict, per chunk step, the palm position relative to the tracked "
        "object seen at the observation, and while the object is visible correct the arm "
        "targets so the palm goes there (r2s2r_policy.models.reach); needs the tracked-object "
        "input.",
    )
    action_representation: Literal["absolute", "delta"] = Field(
        default="absolute",
        description="absolute: the model predicts joint targets; delta: targets minus the "
        "measured joints of the observation (predict_chunk returns absolute targets either way).",
    )
    chunk_length: int = Field(
        default=12, ge=1, le=256, description="Future action steps H predicted per inference."
    )
    control_rate_hz: float = Field(
        default=10.0, gt=0.0, le=1000.0, description="Rate of the chunk's steps (dataset rate)."
    )
    normalization: Literal["mean_std", "min_max"] = Field(
        default="mean_std", description="How state and action dimensions are normalised."
    )
    model: ModelConfig = Field(default_factory=ModelConfig, description="Model type and params.")

    @model_validator(mode="after")
    def _unique_names(self) -> PolicySpec:
        for field_name, names in (
            ("images", [image.key for image in self.images]),
            ("joint_names", self.joint_names),
            ("action_names", self.action_names),
        ):
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ValueError(f"{field_name}: duplicate names {duplicates}")
        if self.palm_object_features and not self.object_track_fields:
            raise ValueError(
                "palm_object_features needs the tracked-object input (object_track_fields empty)"
            )
        if self.object_relative_reach and "visible" not in self.object_track_fields:
            raise ValueError(
                "object_relative_reach needs the tracked-object input with its 'visible' column "
                f"(object_track_fields = {self.object_track_fields})"
            )
        return self

    @property
    def image_keys(self) -> list[str]:
        """Camera observation keys in model order."""
        return [image.key for image in self.images]

    @property
    def uses_object_track(self) -> bool:
        """Whether the policy reads the tracked-object vector."""
        return bool(self.object_track_fields)

    @property
    def state_dim(self) -> int:
        """Length of the low-dimensional state (joints, belt speed, tracked object)."""
        return (
            len(self.joint_names)
            + (1 if self.use_belt_speed else 0)
            + len(self.object_track_fields)
            + (PALM_OBJECT_DIM if self.palm_object_features else 0)
        )

    @property
    def action_dim(self) -> int:
        """Length of one action vector."""
        return len(self.action_names)

    def image_shape(self, key: str) -> tuple[int, int, int]:
        """``(height_px, width_px, 3)`` of camera ``key``.

        Raises:
            KeyError: If the spec has no such camera.

        """
        for image in self.images:
            if image.key == key:
                return (image.height_px, image.width_px, 3)
        raise KeyError(f"image key {key!r} not in policy spec (has {self.image_keys})")


class RobotSpec(ConfigModel):
    """What a robot (or the inference node in front of it) offers a policy."""

    images: list[ImageSpec] = Field(min_length=1, description="Camera images fed to the policy.")
    joint_names: list[str] = Field(min_length=1, description="Joint state names, policy order.")
    action_names: list[str] = Field(min_length=1, description="Commandable joints, policy order.")
    has_belt_speed: bool = Field(default=True, description="Whether belt speed is available.")
    belt_speed_source: str = Field(
        default=BELT_SPEED_SOURCE, description="What makes the belt speed the robot offers."
    )
    object_track_fields: list[str] = Field(
        default_factory=list,
        description="Columns of the tracked-object vector the robot offers (empty: none).",
    )
    object_track_source: str = Field(
        default="", description="What makes the robot's tracked-object vector."
    )


def _name_diff(field_name: str, expected: list[str], actual: list[str]) -> list[str]:
    """Describe how two name lists differ (missing, extra, order, length)."""
    if expected == actual:
        return []
    lines = []
    missing = [n for n in expected if n not in actual]
    extra = [n for n in actual if n not in expected]
    if missing:
        lines.append(f"{field_name}: robot lacks {missing} that the policy needs")
    if extra:
        lines.append(f"{field_name}: robot has {extra} that the policy was not trained on")
    if len(expected) != len(actual):
        lines.append(f"{field_name}: policy has {len(expected)} dims, robot has {len(actual)}")
    if not missing and not extra and len(expected) == len(actual):
        lines.append(
            f"{field_name}: same names in a different order: policy {expected}, robot {actual}"
        )
    return lines


def spec_mismatches(policy: PolicySpec, robot: RobotSpec) -> list[str]:
    """List every way ``policy`` does not fit ``robot`` (empty when compatible).

    Args:
        policy: Spec stored with a checkpoint.
        robot: What the robot offers.

    Returns:
        One line per mismatch: camera keys and sizes, joint names, action names, belt speed.

    """
    lines: list[str] = []
    robot_images = {image.key: image for image in robot.images}
    for image in policy.images:
        offered = robot_images.get(image.key)
        if offered is None:
            lines.append(
                f"images: policy needs camera {image.key!r}, robot offers {sorted(robot_images)}"
            )
        elif (offered.height_px, offered.width_px) != (image.height_px, image.width_px):
            lines.append(
                f"images.{image.key}: policy expects {image.height_px}x{image.width_px} px "
                f"(HxW), robot gives {offered.height_px}x{offered.width_px} px"
            )
    lines += _name_diff("joint_names", policy.joint_names, robot.joint_names)
    lines += _name_diff("action_names", policy.action_names, robot.action_names)
    if policy.use_belt_speed and not robot.has_belt_speed:
        lines.append(f"{BELT_SPEED_KEY}: policy needs belt speed, robot has none")
    elif policy.use_belt_speed and policy.belt_speed_source != robot.belt_speed_source:
        lines.append(
            f"{BELT_SPEED_KEY}: policy was trained on {policy.belt_speed_source!r} belt speed, "
            f"robot gives {robot.belt_speed_source!r}"
        )
    if policy.uses_object_track:
        if not robot.object_track_fields:
            lines.append(
                f"{OBJECT_TRACK_KEY}: policy needs the tracked object "
                f"({policy.object_track_source}), robot offers none (no /objects/tracks)"
            )
        else:
            lines += _name_diff(
                OBJECT_TRACK_KEY, policy.object_track_fields, robot.object_track_fields
            )
            if policy.object_track_source != robot.object_track_source:
                lines.append(
                    f"{OBJECT_TRACK_KEY}: policy was trained on {policy.object_track_source!r} "
                    f"tracks, robot gives {robot.object_track_source!r}"
                )
    elif robot.object_track_fields:
        lines.append(
            "object_track: the robot provides the tracked object "
            f"({robot.object_track_source}) but the policy does not read it (trained without "
            "object-track inputs: retrain with them, or run the graph without the tracker)"
        )
    return lines


def check_spec(policy: PolicySpec, robot: RobotSpec) -> None:
    """Raise if ``policy`` does not fit ``robot``.

    Raises:
        SpecMismatchError: Listing every mismatch.

    """
    lines = spec_mismatches(policy, robot)
    if lines:
        raise SpecMismatchError(lines)
