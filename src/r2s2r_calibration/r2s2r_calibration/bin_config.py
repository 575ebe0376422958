"""Settings of the hand-camera bin refinement (procedure step ``bins``, :mod:`.bin_views`)."""

from __future__ import annotations

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel


class BinViewsConfig(ConfigModel):
    """Settings of the hand-camera bin refinement."""

    camera_height_m: float = Field(
        0.33,
        gt=0.05,
        le=2.0,
        description="Hand camera height above the rim (m); the whole rim must be in the image.",
    )
    rolls_rad: list[float] = Field(
        default_factory=lambda: [float(np.radians(30.0)), float(np.radians(210.0))],
        min_length=1,
        description="Camera roll of each view about the vertical, from the bin's x axis (rad). "
        "Opposite rolls cancel a hand-eye translation error in the fit; rolls away from the rim "
        "edges' directions (30 deg) make every edge cross many pixel rows and columns, which "
        "averages out the staircase of a rendered or sampled edge (an edge nearly along a pixel "
        "row measures its angle in steps).",
    )
    profiles_per_edge: int = Field(
        24, ge=3, le=500, description="Profiles across each rim edge (its central part)."
    )
    edge_fraction: float = Field(
        0.7,
        gt=0.1,
        le=0.95,
        description="Central fraction of each edge that is profiled (the corners are left out).",
    )
    profile_half_length_px: float = Field(
        7.0, gt=1.0, le=50.0, description="Profile length on each side of the predicted edge."
    )
    profile_step_px: float = Field(0.25, gt=0.01, le=1.0, description="Profile sample spacing.")
    profile_margin_px: float = Field(
        2.0,
        gt=0.0,
        le=20.0,
        description="The edge is searched up to this far from either end of its profile (px), "
        "so that the model sees both sides of it.",
    )
    min_contrast: float = Field(
        0.08,
        gt=0.0,
        le=1.0,
        description="Least step of the bin-vs-table signal (green minus red, 0..1) for an edge.",
    )
    max_profile_rms: float = Field(
        0.25,
        gt=0.0,
        le=10.0,
        description="A profile whose edge model leaves an RMS residual above this fraction of "
        "its rim-to-outside contrast gives no point (something else is in the way).",
    )
    min_points_per_edge: int = Field(
        6, ge=2, le=500, description="Edge points required on each rim edge over all views."
    )
    max_rms_m: float = Field(
        0.0015, gt=0.0, le=0.05, description="Refuse a fit whose in-plane RMS exceeds this (m)."
    )
    max_correction_m: float = Field(
        0.03,
        gt=0.0,
        le=0.5,
        description="Refuse a fit that moves the bin farther than this from the registration.",
    )
    outlier_sigmas: float = Field(
        4.0,
        gt=1.0,
        le=100.0,
        description="Edge points farther from the fitted rim than this many robust sigmas are "
        "left out (an inner edge or a neighbour taken for the rim).",
    )
    soft_edge_max_rms_m: float = Field(
        0.004,
        gt=0.0,
        le=0.05,
        description="When the rim's colour edges scatter beyond max_rms_m (compressed colour, "
        "e.g. MJPEG's halved chroma resolution), the fit is made again with the height held "
        "and refused above this RMS (m).",
    )
    require_refinement: bool = Field(
        False,
        description="Fail the step when no bin could be refined. Off: every refused bin keeps "
        "its registered pose, the refusal recorded with it (a camera whose compression leaves no "
        "usable rim edge, e.g. strong MJPEG); a refused bin that was not registered still fails "
        "the step when no bin was refined.",
    )
    fit_height: bool = Field(
        True,
        description="Fit the rim's height too (from its apparent size; the robot's base may "
        "stand a few millimetres higher or lower than drawn relative to the table).",
    )
    prediction_passes: int = Field(
        3,
        ge=0,
        le=10,
        description="Times the edges are found again along profiles through the previous fit "
        "before the final fit (the registration may leave a bin a few pixels off).",
    )
    residual_scale_m: float = Field(
        0.001, gt=0.0, le=0.05, description="Scale of the robust (soft L1) loss of the fit (m)."
    )
