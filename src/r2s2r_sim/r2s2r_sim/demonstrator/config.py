"""Typed style configuration of the human-like demonstrator (one schema for core and node)."""

from __future__ import annotations

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel

Range = list[float]
"""A ``[lo, hi]`` range (a list so that it maps to a ROS double-array parameter)."""


def _check_range(name: str, value: Range) -> None:
    if len(value) != 2 or value[0] > value[1]:
        raise ValueError(f"{name} = {value}: expected [lo, hi] with lo ≤ hi")


class DemonstratorStyle(ConfigModel):
    """How the simulated teleoperator moves; each ``*_range`` is sampled per demonstration.

    All durations are nominal (``speed_factor`` = 1); a demonstration draws one speed factor and
    divides every duration by it. Heights are palm-surface heights above the object's top.
    """

    reaction_delay_s: Range = Field(
        default_factory=lambda: [0.25, 0.45],
        description="Delay from first seeing an object to reacting.",
    )
    perception_lag_s: float = Field(
        default=0.12, ge=0.0, le=0.5, description="Age of the object estimate the operator uses."
    )
    replan_period_s: float = Field(
        default=0.15, ge=0.02, le=1.0, description="Visual-servoing correction period."
    )
    correction_duration_s: float = Field(
        default=0.3, ge=0.05, le=2.0, description="Duration of one corrective submovement."
    )
    command_dt_s: float = Field(
        default=0.05, ge=0.005, le=0.2, description="Spacing of the commanded trajectory points."
    )
    speed_factor: Range = Field(
        default_factory=lambda: [0.85, 1.15],
        description="Overall speed multiplier of a demonstration.",
    )
    reach_duration_s: Range = Field(
        default_factory=lambda: [1.6, 2.1],
        description="Time from starting the reach to the grasp pose.",
    )
    intercept_along_m: Range = Field(
        default_factory=lambda: [-0.22, -0.05],
        description="Where along the object's travel (relative to the robot base) to grasp it.",
    )
    hover_height_m: Range = Field(
        default_factory=lambda: [0.06, 0.1],
        description="Height of the pre-grasp via above the grasp pose.",
    )
    grasp_height_m: Range = Field(
        default_factory=lambda: [0.0, 0.008],
        description="Extra palm height above the cage pre-shape's grasp height.",
    )
    hover_fraction: Range = Field(
        default_factory=lambda: [0.6, 0.7],
        description="Fraction of the reach taken by the submovement to the pre-grasp via.",
    )
    descent_start_fraction: Range = Field(
        default_factory=lambda: [0.45, 0.55],
        description="Fraction of the reach at which the descent submovement starts (it "
        "overlaps the end of the move to the via, as human submovements do).",
    )
    wrist_yaw_noise_rad: float = Field(
        default=0.08, ge=0.0, le=0.5, description="Std of the wrist yaw around the grasp yaw."
    )
    closure_lead_s: Range = Field(
        default_factory=lambda: [-0.05, 0.1],
        description="Hand starts closing this long before the grasp time.",
    )
    closure_duration_s: Range = Field(
        default_factory=lambda: [0.35, 0.5], description="Duration of the whole-hand closure."
    )
    hold_before_lift_s: Range = Field(
        default_factory=lambda: [0.05, 0.2], description="Dwell after closing, before lifting."
    )
    closure_flexion_rad: float = Field(
        default=0.6, ge=0.2, le=1.6, description="Extra MCP flexion from pre-shape to closure."
    )
    closure_scale: Range = Field(
        default_factory=lambda: [0.93, 1.05], description="Multiplier of the closed-hand flexion."
    )
    lift_height_m: Range = Field(
        default_factory=lambda: [0.14, 0.2], description="Lift above the grasp pose."
    )
    lift_duration_s: Range = Field(
        default_factory=lambda: [0.6, 0.8], description="Duration of the lift."
    )
    transport_duration_s: Range = Field(
        default_factory=lambda: [2.0, 2.6], description="Duration of the move over the bin."
    )
    transport_arc_m: Range = Field(
        default_factory=lambda: [0.0, 0.06],
        description="Extra height of the transport arc at mid-way.",
    )
    drop_height_m: Range = Field(
        default_factory=lambda: [0.02, 0.05],
        description="Object bottom above the bin rim at the end of the move over the bin.",
    )
    place_height_m: Range = Field(
        default_factory=lambda: [0.015, 0.035],
        description="Object bottom above the bin floor when releasing: the operator lowers "
        "the object into the bin rather than dropping it over the rim (a dropped cylinder "
        "lands on its side and can roll on for seconds).",
    )
    lower_duration_s: Range = Field(
        default_factory=lambda: [0.5, 0.7],
        description="Duration of lowering the object into the bin.",
    )
    rise_duration_s: Range = Field(
        default_factory=lambda: [0.35, 0.5],
        description="Duration of raising the opened hand back above the rim.",
    )
    drop_jitter_m: float = Field(
        default=0.025, ge=0.0, le=0.08, description="Max horizontal offset of the drop point."
    )
    release_duration_s: Range = Field(
        default_factory=lambda: [0.3, 0.45], description="Hand opening time."
    )
    return_duration_s: Range = Field(
        default_factory=lambda: [1.6, 2.2], description="Duration of the return to the ready pose."
    )

    @model_validator(mode="after")
    def _ordered(self) -> DemonstratorStyle:
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, list):
                _check_range(name, value)
        if self.descent_start_fraction[1] > self.hover_fraction[0]:
            raise ValueError(
                f"descent_start_fraction = {self.descent_start_fraction}: expected its upper end "
                f"≤ the lower end of hover_fraction = {self.hover_fraction}"
            )
        if self.hover_fraction[1] >= 1.0:
            raise ValueError(f"hover_fraction = {self.hover_fraction}: expected < 1")
        if self.speed_factor[0] <= 0.0:
            raise ValueError(f"speed_factor = {self.speed_factor}: expected > 0")
        return self
