"""Excitation design and acceptance thresholds of the system identification."""

from __future__ import annotations

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel

MIN_RESPONSE_IN_WINDOW_S = 0.05
"""Step response a fit window must hold after the largest latency searched (s)."""


class SysIdConfig(ConfigModel):
    """Excitation design and acceptance thresholds of the system identification."""

    arm_step_rad: float = Field(
        0.015,
        gt=0.0,
        le=0.2,
        description="Step amplitude of arm joints (small: the servo must not saturate).",
    )
    hand_step_rad: float = Field(0.08, gt=0.0, le=0.5, description="Step amplitude, hand joints.")
    step_hold_s: float = Field(0.3, gt=0.0, le=5.0, description="Hold after each step edge (s).")
    chirp_duration_s: float = Field(0.8, gt=0.0, le=20.0, description="Chirp length (s).")
    chirp_start_hz: float = Field(1.0, gt=0.0, le=50.0, description="Chirp start frequency.")
    chirp_end_hz: float = Field(6.0, gt=0.0, le=100.0, description="Chirp end frequency.")
    chirp_point_period_s: float = Field(
        0.01, gt=0.0, le=0.1, description="Spacing of the chirp's trajectory points (s)."
    )
    fit_window_s: float = Field(
        0.2,
        gt=0.0,
        le=5.0,
        description="Step response compared after each step's start (s); the rest is settled.",
    )
    settle_s: float = Field(0.15, ge=0.0, le=5.0, description="Rest between segments (s).")
    preroll_s: float = Field(
        0.04, gt=0.0, le=1.0, description="Logged rest before a segment that starts its simulation."
    )
    max_latency_s: float = Field(
        0.15,
        ge=0.0,
        le=0.5,
        description="Largest latency searched (s): three times the twin family's 0.05 s, so "
        "that a slower command path than the family's is still measured; a fit at this bound is "
        "refused (LatencyAtBoundError), never clipped.",
    )
    max_rise_s: float = Field(
        0.1,
        gt=0.0,
        le=2.0,
        description="A step response must pass 20 % of the step this long after latency (s).",
    )
    latency_joints: list[str] = Field(
        default_factory=lambda: ["wrist_1_joint", "index_mcp_joint"],
        description="Joints whose step segments fix the shared latency (those present are used).",
    )
    gain_bounds_factor: float = Field(
        5.0, gt=1.0, le=100.0, description="kp, kd searched within nominal / f .. nominal * f."
    )
    refinement_passes: int = Field(
        1,
        ge=1,
        le=5,
        description="Fitting passes; later passes simulate the other joints with fitted gains.",
    )
    min_motion_fraction: float = Field(
        0.2,
        gt=0.0,
        le=1.0,
        description="A joint must move at least this fraction of its step amplitude.",
    )
    max_gap_factor: float = Field(
        2.5, gt=1.0, le=100.0, description="A sample interval above this x the median is a gap."
    )
    max_heldout_relative_rms: float = Field(
        0.15,
        gt=0.0,
        le=10.0,
        description="Refuse when a joint's held-out RMS error / its chirp amplitude exceeds this.",
    )

    @model_validator(mode="after")
    def _window_sees_the_response(self) -> SysIdConfig:
        # A step response is compared over fit_window_s from the command time: with a latency
        # near the window's end the window holds too little response to fit the gains.
        if self.fit_window_s < self.max_latency_s + MIN_RESPONSE_IN_WINDOW_S:
            raise ValueError(
                f"fit_window_s = {self.fit_window_s} s must be at least max_latency_s + "
                f"{MIN_RESPONSE_IN_WINDOW_S} s = {self.max_latency_s + MIN_RESPONSE_IN_WINDOW_S:g} "
                "s (the step response after the largest latency searched)"
            )
        return self
