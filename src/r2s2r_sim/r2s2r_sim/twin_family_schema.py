"""The twin family's schema: a range with its reason per axis, and the family file's models.

:mod:`r2s2r_sim.twin_family` samples, places and checks twins with it (see its docstring).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel, load_config

FAMILY_VERSION = 1

OUTER_FIFTH = 0.2
"""``outer_fraction`` of :func:`sample_twin` that draws from the outer fifth of every range."""

FAMILY_PATH = "twin/family.yaml"
"""The documented family, relative to ``config/`` (:func:`resolve_config_path`)."""


class Range(ConfigModel):
    """A closed range ``lo..hi`` of one deviation, with why a real cell spans it."""

    lo: float = Field(description="Lowest value (unit of the axis).")
    hi: float = Field(description="Highest value.")
    reason: str = Field(min_length=10, description="The physical reason for this range.")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)) or self.lo > self.hi:
            raise ValueError(f"expected finite lo <= hi, got lo = {self.lo}, hi = {self.hi}")
        return self

    def sample(self, rng: np.random.Generator, outer_fraction: float = 0.0) -> float:
        """One uniform draw in the range, or in its outer parts.

        Args:
            rng: The generator; one draw is taken with ``outer_fraction`` 0 and two otherwise
                (position, then side), even when lo == hi.
            outer_fraction: 0 draws in ``[lo, hi]``; f in (0, 0.5] draws uniformly in
                ``[lo, lo + f (hi - lo)]`` or ``[hi - f (hi - lo), hi]``, the side at random.

        Raises:
            ValueError: ``outer_fraction`` outside [0, 0.5].

        """
        span = self.hi - self.lo
        if outer_fraction == 0.0:
            return float(self.lo + span * rng.random())
        _check_outer_fraction(outer_fraction)
        position = rng.random()
        low_side = rng.random() < 0.5
        width = outer_fraction * span
        return float(self.lo + width * position if low_side else self.hi - width * position)

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the range (with a rounding tolerance)."""
        tolerance = 1e-9 + 1e-6 * max(abs(self.lo), abs(self.hi))
        return self.lo - tolerance <= value <= self.hi + tolerance


def _check_outer_fraction(outer_fraction: float) -> None:
    if not 0.0 <= outer_fraction <= 0.5:
        raise ValueError(
            f"outer_fraction = {outer_fraction}: expected 0 (whole range) to 0.5 (each half); "
            f"{OUTER_FIFTH} draws from the outer fifth of every range"
        )


class PoseDeviation(ConfigModel):
    """Deviation of a mounted frame from its nominal pose (added to xyz and to rpy)."""

    xy_m: Range = Field(description="Added to x and to y (m), each drawn independently.")
    z_m: Range = Field(description="Added to z (m).")
    roll_pitch_rad: Range = Field(description="Added to roll and to pitch (rad), independently.")
    yaw_rad: Range = Field(description="Added to yaw (rad).")


class AppearanceDeviation(ConfigModel):
    """How one real camera's look departs from a clean render (:class:`CameraAppearance`).

    Sampled only when asked (``sample_twin(..., appearance=True)``, ``--appearance``), from a
    random stream of its own, so a seed's geometry, dynamics and lighting are the same with
    and without it; a camera whose appearance is the identity (today's look) is not checked
    against these ranges.
    """

    exposure_ev: Range = Field(description="Exposure offset (stops, absolute).")
    auto_exposure: Range = Field(description="Auto-exposure strength 0..1 (absolute).")
    white_balance_red_rel: Range = Field(description="Red gain / nominal - 1.")
    white_balance_blue_rel: Range = Field(description="Blue gain / nominal - 1.")
    crosstalk: Range = Field(description="Colour crosstalk (absolute).")
    gamma: Range = Field(description="Encoding gamma of the tone curve (absolute).")
    black_level: Range = Field(description="Black-level offset 0..1 (absolute).")
    vignetting: Range = Field(description="Light loss at the corners 0..1 (absolute).")
    shot_noise: Range = Field(description="Shot-noise std at full scale (absolute).")
    read_noise: Range = Field(description="Read-noise std (absolute).")
    motion_blur_px: Range = Field(description="Horizontal smear during the exposure (px).")
    jpeg_quality: Range = Field(description="MJPEG quality (absolute, rounded to an integer).")


class CameraDeviation(ConfigModel):
    """Deviation of one camera from its datasheet values and its nominal mount."""

    focal_rel: Range = Field(description="fx / nominal fx - 1.")
    aspect_rel: Range = Field(description="(fy / fx) / (nominal fy / fx) - 1.")
    principal_point_px: Range = Field(description="Added to cx and to cy (px), independently.")
    k1: Range = Field(description="Radial distortion k1 (absolute value; nominal is 0).")
    k2: Range = Field(description="Radial distortion k2 (absolute value).")
    tangential: Range = Field(description="Tangential p1 and p2 (absolute), independently.")
    blur_sigma_px: Range = Field(description="Gaussian blur sigma (absolute value, px).")
    mount: PoseDeviation = Field(description="Camera link pose in its parent frame.")
    appearance: AppearanceDeviation | None = Field(
        default=None, description="The camera's look (sampled on request; see the class)."
    )


class CamerasDeviation(ConfigModel):
    """Both cameras."""

    head: CameraDeviation
    hand: CameraDeviation


class ControllerDeviation(ConfigModel):
    """Per-joint servo and command path."""

    kp_rel: Range = Field(description="kp / nominal kp - 1, per joint.")
    damping_ratio_rel: Range = Field(
        description="Damping ratio / nominal damping ratio - 1, per joint: (kd / kd_nominal) / "
        "sqrt(kp / kp_nominal) - 1 (a joint's inertia is the nominal one)."
    )
    latency_s: Range = Field(description="Command latency (absolute value, s; continuous).")


class BeltDeviation(ConfigModel):
    """The conveyor."""

    mount: PoseDeviation = Field(description="belt_link pose in world.")
    speed_rel: Range = Field(description="speed_mps / nominal - 1.")
    roller_radius_rel: Range = Field(description="roller_radius_m / nominal - 1.")


class ObjectsDeviation(ConfigModel):
    """Every object type (each drawn independently)."""

    mass_rel: Range = Field(description="mass_kg / nominal - 1.")
    friction_rel: Range = Field(description="friction / nominal - 1.")


class LightingDeviation(ConfigModel):
    """The cell's light."""

    diffuse: Range = Field(description="Directional intensity (absolute value).")
    ambient: Range = Field(description="Ambient intensity (absolute value).")
    direction_xy: Range = Field(
        description="Added to the direction's x and y (the direction is not normalised; its z "
        "stays nominal), independently."
    )


class TwinFamily(ConfigModel):
    """The distribution of twins (see the module docstring)."""

    schema_version: Literal[1] = Field(1, description="Schema version of this file.")
    cameras: CamerasDeviation
    base: PoseDeviation = Field(description="base_link in world.")
    controller: ControllerDeviation
    belt: BeltDeviation
    bins: PoseDeviation = Field(description="Each bin's pose in world, drawn independently.")
    objects: ObjectsDeviation
    lighting: LightingDeviation


def load_family(path: str | Path) -> TwinFamily:
    """Load and validate a twin family file.

    Raises:
        ConfigError: Missing file, bad YAML, unknown key, a range with lo > hi or no reason.

    """
    return load_config(TwinFamily, path)
