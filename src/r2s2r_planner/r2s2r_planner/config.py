"""Typed configuration of the planner core: grasps, intercept, motion planning, timing, pick.

One schema per concern, gathered in :class:`PlannerConfig` (``config/planner/planner.yaml``).
The ``planner`` node declares its ROS parameters from :class:`PlannerNodeConfig`, which embeds
the same schema. Units are in the names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel, load_config


class PinchConfig(ConfigModel):
    """The two-finger pinch synergy of the hand (thumb + index; middle and ring stay open).

    The closure scalar ``s`` sets index ``mcp = s``, ``pip = pip_ratio·s``, ``dip = dip_ratio·s``
    and thumb ``mcp = s``, ``ip = thumb_ip_ratio·s`` (flexions clipped to the joint limits).
    """

    thumb_rot_rad: float = Field(
        default=-0.8, ge=-1.0, le=1.0, description="Thumb rotation that opposes it to the index."
    )
    pip_ratio: float = Field(default=0.5, ge=0.0, le=2.0, description="Index pip / mcp.")
    dip_ratio: float = Field(default=0.3, ge=0.0, le=2.0, description="Index dip / mcp.")
    thumb_ip_ratio: float = Field(default=0.5, ge=0.0, le=2.0, description="Thumb ip / mcp.")
    open_closure: float = Field(
        default=-0.4, ge=-0.5, le=0.0, description="Closure scalar of the fully open pinch."
    )
    other_fingers_mcp_rad: float = Field(
        default=-0.5, ge=-0.5, le=0.0, description="Middle/ring mcp: extended out of the way."
    )
    pre_grasp_gap_m: float = Field(
        default=0.025, ge=0.0, le=0.05, description="Extra opening over the object width."
    )
    squeeze_m: float = Field(
        default=0.04, ge=0.0, le=0.06, description="Commanded closure past contact (grip)."
    )


class GraspConfig(ConfigModel):
    """Grasp proposal generation and scoring."""

    pinch: PinchConfig = Field(default_factory=PinchConfig)
    tilt_angles_rad: list[float] = Field(
        default=[0.0, -0.2, 0.2],
        description="Tilts of the palm about the grasp axis (0 = straight top-down).",
    )
    round_yaw_samples: int = Field(
        default=8, ge=1, le=64, description="Grasp-axis yaws tried on round objects."
    )
    belt_clearance_m: float = Field(
        default=0.005, ge=0.0, le=0.05, description="Minimum fingertip height above the belt."
    )
    top_margin_m: float = Field(
        default=0.006, ge=0.0, le=0.05, description="Pinch contacts stay this far below the top."
    )
    friction: float = Field(
        default=0.7, gt=0.0, le=3.0, description="Assumed friction for the antipodal cone."
    )
    pre_grasp_height_m: float = Field(
        default=0.10, ge=0.02, le=0.4, description="Pre-grasp: palm this far above the grasp."
    )
    max_candidates: int = Field(default=6, ge=1, le=64, description="Best grasps returned.")


class InterceptConfig(ConfigModel):
    """Where and when a moving object is met."""

    reach_zone_belt_x_m: tuple[float, float] = Field(
        default=(-0.35, 0.35), description="Belt-x interval (belt_link frame) the arm works in."
    )
    preferred_belt_x_m: float = Field(
        default=-0.10, ge=-1.0, le=1.0, description="Belt x where grasps are preferred."
    )
    tolerance_s: float = Field(
        default=0.01, gt=0.0, le=1.0, description="Fixed-point convergence of arrival time."
    )
    max_iterations: int = Field(default=20, ge=1, le=200, description="Intercept iterations.")
    duration_factor: float = Field(
        default=1.0,
        ge=1.0,
        le=5.0,
        description="Safety factor on the approach duration when fitting the arrival time.",
    )
    preferred_jitter_m: float = Field(
        default=0.05,
        ge=0.0,
        le=0.5,
        description="Random spread (uniform ±) of the preferred belt x per synthesized pick.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> InterceptConfig:
        low, high = self.reach_zone_belt_x_m
        if low >= high:
            raise ValueError(f"reach_zone_belt_x_m = {self.reach_zone_belt_x_m}: expected lo < hi")
        return self


class MotionConfig(ConfigModel):
    """Sampling-based planning in the 6-D arm joint space with a MuJoCo collision checker."""

    planner: Literal["rrt_connect"] = Field(default="rrt_connect", description="OMPL planner.")
    timeout_s: float = Field(default=2.0, gt=0.0, le=60.0, description="Planning time limit.")
    range_rad: float = Field(
        default=0.6, gt=0.0, le=6.0, description="RRTConnect extension step (0 = OMPL default)."
    )
    motion_check_step_rad: float = Field(
        default=0.01, gt=0.0, le=1.0, description="Edge-check resolution during planning."
    )
    dense_check_step_rad: float = Field(
        default=0.004, gt=0.0, le=0.1, description="Resolution of the final dense re-check."
    )
    clearance_m: float = Field(
        default=0.01, ge=0.0, le=0.1, description="Margin kept between robot and the cell."
    )
    planning_extra_clearance_m: float = Field(
        default=0.005,
        ge=0.0,
        le=0.05,
        description="Added to the clearance while sampling and shortcutting, so that edges "
        "checked at motion_check_step_rad still pass the dense re-check at clearance_m.",
    )
    simplify_time_s: float = Field(
        default=0.1, ge=0.0, le=10.0, description="Shortcutting/simplification time."
    )
    joint_margin_rad: float = Field(
        default=0.05, ge=0.0, le=0.5, description="Planning bounds inside the joint limits."
    )
    max_attempts: int = Field(
        default=3, ge=1, le=20, description="Plans tried until one passes the dense re-check."
    )
    seed: int = Field(default=0, ge=0, description="OMPL random seed (reproducible plans).")
    try_straight_first: bool = Field(
        default=True,
        description="Use the straight joint-space segment when it passes the dense check.",
    )


class TimingConfig(ConfigModel):
    """Time parameterization (ruckig: time-optimal, jerk-limited, straight joint segments)."""

    velocity_scale: float = Field(
        default=0.5, gt=0.0, le=1.0, description="Fraction of the joint velocity limits used."
    )
    max_acceleration_radps2: float = Field(
        default=3.0, gt=0.0, le=50.0, description="Arm joint acceleration limit."
    )
    max_jerk_radps3: float = Field(
        default=30.0, gt=0.0, le=1000.0, description="Arm joint jerk limit."
    )
    sample_period_s: float = Field(
        default=0.04, ge=0.002, le=0.5, description="Trajectory point spacing."
    )


class PickConfig(ConfigModel):
    """Phases of the planner-style pick."""

    descend_duration_s: float = Field(
        default=0.8, gt=0.0, le=5.0, description="Pre-grasp to grasp, following the belt."
    )
    close_duration_s: float = Field(
        default=0.5, gt=0.0, le=5.0, description="Pinch closing, following the belt."
    )
    lift_duration_s: float = Field(default=0.7, gt=0.0, le=5.0, description="Lift segment.")
    lift_height_m: float = Field(default=0.15, gt=0.0, le=0.5, description="Lift above grasp.")
    bin_release_height_m: float = Field(
        default=0.05, ge=0.0, le=0.5, description="Object bottom above the bin walls at release."
    )
    release_duration_s: float = Field(
        default=0.4, gt=0.0, le=5.0, description="Hand opening at the bin."
    )
    planning_budget_s: float = Field(
        default=0.5, ge=0.0, le=10.0, description="Time reserved for planning before moving."
    )
    track_sample_period_s: float = Field(
        default=0.05, ge=0.005, le=0.5, description="IK sample spacing on belt-tracking segments."
    )
    contact_clearance_m: float = Field(
        default=0.002,
        ge=0.0,
        le=0.05,
        description="Clearance to the cell on the belt-following segments (near the belt).",
    )
    max_wait_for_object_s: float = Field(
        default=3.0, gt=0.0, le=60.0, description="Wait for the object to arrive on the belt."
    )


class PlannerConfig(ConfigModel):
    """Everything the planner core needs besides the world."""

    grasp: GraspConfig = Field(default_factory=GraspConfig)
    intercept: InterceptConfig = Field(default_factory=InterceptConfig)
    motion: MotionConfig = Field(default_factory=MotionConfig)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    pick: PickConfig = Field(default_factory=PickConfig)


def load_planner_config(path: str | Path) -> PlannerConfig:
    """Load ``config/planner/*.yaml``.

    Raises:
        r2s2r_common.config.ConfigError: Missing file, unknown key or value out of range.

    """
    return load_config(PlannerConfig, path)
