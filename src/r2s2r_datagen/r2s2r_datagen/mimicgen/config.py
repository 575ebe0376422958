"""Typed configuration of subtask annotation and MimicGen generation.

Values live in ``config/datagen/mimicgen.yaml``.

One schema, :class:`MimicGenConfig`, with two parts: :class:`AnnotationConfig` (how subtask
boundaries are found in a demonstration) and :class:`GenerationParams` (how a new trial is
generated from the source demonstrations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from r2s2r_common.config import ConfigModel, load_config

FrameRange = tuple[int, int]


def _ordered(value: tuple[float, float] | tuple[int, int]) -> tuple[float, float] | tuple[int, int]:
    if value[0] > value[1]:
        raise ValueError(f"expected lo ≤ hi, got {value}")
    return value


class AnnotationConfig(ConfigModel):
    """How the two object-centric subtasks are found in a demonstration.

    Signals (all from the episode, never from simulator state): hand closure = mean commanded
    flexion of ``closure_joints``; object lifted = tracked object z above its resting height
    on the belt by ``lift_margin_m``; object over bin = tracked object xy inside the footprint
    of its target bin (bin poses from the NOMINAL world). On the frames after the object track
    has ended (the real tracker loses the object to the hand) the palm (FK of the commanded arm
    joints) stands in: lifted = palm z above its height at closure by ``lift_margin_m``; over
    bin = palm xy in the footprint.
    """

    closure_joints: list[str] = Field(
        default_factory=lambda: [
            "thumb_mcp_joint",
            "index_mcp_joint",
            "middle_mcp_joint",
            "ring_mcp_joint",
        ],
        min_length=1,
        description="Hand joints whose mean commanded flexion is the closure signal.",
    )
    min_closure_range_rad: float = Field(
        default=0.3,
        gt=0.0,
        le=3.0,
        description="Smallest rise of the closure signal that counts as a grasp.",
    )
    closed_fraction: float = Field(
        default=0.8,
        gt=0.0,
        lt=1.0,
        description="Fraction of the closure rise at which the hand counts as closed.",
    )
    open_fraction: float = Field(
        default=0.5,
        gt=0.0,
        lt=1.0,
        description="Fraction of the closure rise below which the hand counts as open again.",
    )
    lift_margin_m: float = Field(
        default=0.03, gt=0.0, le=0.3, description="Object height above its rest that is lifted."
    )
    lift_window_s: float = Field(
        default=2.0, gt=0.0, le=10.0, description="The lift must follow closure within this."
    )
    bin_margin_m: float = Field(
        default=0.0,
        ge=-0.1,
        le=0.1,
        description="Grows (> 0) or shrinks the bin footprint when testing 'object over bin'.",
    )
    start_motion_rad: float = Field(
        default=0.01,
        gt=0.0,
        le=0.5,
        description="Arm command change from the first frame that marks the reach onset.",
    )


class GenerationParams(ConfigModel):
    """How a new trial is generated from the source demonstrations."""

    max_attempts: int = Field(
        default=3, ge=1, le=50, description="Rollouts per job (a new source demo each time)."
    )
    nn_k: int = Field(
        default=3, ge=1, le=100, description="Pick the source uniformly among the k nearest."
    )
    lateral_scale_m: float = Field(
        default=0.04, gt=0.0, le=1.0, description="NN distance scale of the across-belt offset."
    )
    yaw_scale_rad: float = Field(
        default=0.4, gt=0.0, le=10.0, description="NN distance scale of the yaw difference."
    )
    speed_scale_mps: float = Field(
        default=0.03, gt=0.0, le=1.0, description="NN distance scale of the belt speed."
    )
    same_object_type_only: bool = Field(
        default=False,
        description="Sources of the new object's type are always preferred; with this set, "
        "a job with none is skipped instead of using another type's demos.",
    )
    start_offset_frames: FrameRange = Field(
        default=(-1, 0), description="Random offset of the reach-onset boundary (frames)."
    )
    grasp_offset_frames: FrameRange = Field(
        default=(-1, 1), description="Random offset of the grasp/transport boundary (frames)."
    )
    bridge_s: float = Field(
        default=0.5, gt=0.0, le=3.0, description="Interpolation before subtask 1 (from rest)."
    )
    bridge_between_s: float = Field(
        default=0.3, gt=0.0, le=3.0, description="Interpolation between subtasks 1 and 2."
    )
    bridge_dt_s: float = Field(
        default=0.05, gt=0.0, le=0.5, description="Spacing of the bridge's trajectory points."
    )
    action_noise_rad: float = Field(
        default=0.002, ge=0.0, le=0.1, description="Std of Gaussian noise on arm joint targets."
    )
    yaw_phase_in_m: float = Field(
        default=0.12,
        ge=0.0,
        le=2.0,
        description="Palm-object horizontal distance within which the object's yaw is fully "
        "applied to subtask 1 (phased in from 0 at the reach onset; 0 = rigid transform).",
    )
    bin_phase_in_m: float = Field(
        default=0.15,
        ge=0.0,
        le=2.0,
        description="Palm-bin horizontal distance within which subtask 2 is fully in the new "
        "target bin's frame (phased in from the lift; matters when the bins differ).",
    )
    moving_frame: bool = Field(
        default=True,
        description="Express subtask 1 in the object's moving frame and retime its start "
        "(False: MimicGen's static frame, the object pose read once; an ablation).",
    )
    settle_timeout_s: float = Field(
        default=4.0, gt=0.0, le=60.0, description="Wait after the last segment for the outcome."
    )
    steps_per_call: int = Field(
        default=10, ge=1, le=1000, description="Physics steps per runner call while waiting."
    )
    ik_tolerance_m: float = Field(
        default=1e-4, gt=0.0, le=0.01, description="IK position tolerance."
    )
    ik_tolerance_rad: float = Field(
        default=2e-3, gt=0.0, le=0.1, description="IK orientation tolerance."
    )

    @field_validator("start_offset_frames", "grasp_offset_frames")
    @classmethod
    def _check_range(cls, value: FrameRange) -> FrameRange:
        return _ordered(value)  # type: ignore[return-value]


class MimicGenConfig(ConfigModel):
    """Everything the MimicGen generator needs besides the job (``config/datagen/mimicgen.yaml``).

    Relative paths are resolved against the folder of the YAML file.
    """

    schema_version: Literal[1] = Field(default=1, description="Schema version of this file.")
    source_dataset: str = Field(
        default="",
        description="Source demonstrations (HDF5 file or shard directory); the real demos.",
    )
    nominal_world_path: str = Field(
        default="../world/nominal.yaml",
        description="NOMINAL world: bin footprints for annotation (a cell's drawings).",
    )
    annotation: AnnotationConfig = Field(default_factory=AnnotationConfig)
    generation: GenerationParams = Field(default_factory=GenerationParams)


def bundled_config_path() -> Path:
    """Return the bundled ``config/datagen/mimicgen.yaml`` (share dir, else source tree)."""
    try:
        from ament_index_python.packages import get_package_share_directory

        share = Path(get_package_share_directory("r2s2r")) / "config" / "datagen"
        if (share / "mimicgen.yaml").is_file():
            return share / "mimicgen.yaml"
    except Exception:
        pass
    return Path(__file__).resolve().parents[4] / "config" / "datagen" / "mimicgen.yaml"


def load_mimicgen_config(path: str | Path | None = None) -> tuple[MimicGenConfig, Path]:
    """Load the MimicGen config (the bundled file by default).

    Returns:
        The config and the folder relative paths in it are resolved against.

    Raises:
        r2s2r_common.config.ConfigError: Missing file or invalid content.

    """
    config_path = Path(path) if path else bundled_config_path()
    return load_config(MimicGenConfig, config_path), config_path.resolve().parent


def resolve(base_dir: Path, value: str) -> Path:
    """``value`` as a path, relative ones against ``base_dir``."""
    path = Path(value)
    return path if path.is_absolute() else (base_dir / path).resolve()
