"""Settings of the board steps (kept apart from :mod:`.steps.board` to avoid an import cycle)."""

from __future__ import annotations

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel

from r2s2r_calibration.blur import BlurConfig
from r2s2r_calibration.extrinsics import ExtrinsicsConfig
from r2s2r_calibration.intrinsics import ChessboardConfig, IntrinsicsConfig


class BoardStepsConfig(ConfigModel):
    """Board, view plans and acceptance thresholds of the board steps."""

    board: ChessboardConfig = Field(default_factory=ChessboardConfig)
    intrinsics: IntrinsicsConfig = Field(
        default_factory=lambda: IntrinsicsConfig(
            min_corners_per_view=12,
            min_views=8,
            fix_k3=True,
            # Fitted: a lens element tilted by a fraction of a degree gives p1, p2 of 1e-3
            # (twin family), and held at 0 they shift the principal point by 0.2-0.4 px, which
            # the extrinsics then take up as a 0.1-0.25 deg pointing error.
            zero_tangential=False,
            reject_view_rms_factor=2.0,
        )
    )
    blur: BlurConfig = Field(default_factory=lambda: BlurConfig(min_pixels_per_edge=15))
    blur_for_simulator: bool = Field(
        True,
        description="Report the simulator's blur parameter: remove the edge spread the "
        "simulator's own rendering adds (blur.simulator_render_variance_px2) instead of only "
        "the sensor pixel box.",
    )
    white_balance_tolerance: float = Field(
        0.03,
        ge=0.0,
        le=1.0,
        description="A measured white balance within this of 1 (per gain, and within 2 sigma) "
        "is neutral: the grounded world keeps the simulator's identity look.",
    )
    extrinsics: ExtrinsicsConfig = Field(default_factory=ExtrinsicsConfig)
    head_distances_m: list[float] = Field(
        default_factory=lambda: [0.34, 0.40, 0.46],
        description="Head intrinsics board distances (m). Not farther: at 0.55 m a 4 cm square "
        "images at 8 px, and under 1.6 px of blur the focal length came out 0.5 % long and the "
        "principal point 0.6 px off.",
    )
    tilt_rad: float = Field(0.6, ge=0.0, le=1.0, description="Board tilt of the views (rad).")
    image_grid: int = Field(4, ge=2, le=5, description="Board positions per image axis.")
    hand_board_position_m: tuple[float, float, float] = Field(
        (0.45, 0.12, 0.93), description="Where the board is put down (nominal world, m)."
    )
    hand_view_distances_m: list[float] = Field(
        default_factory=lambda: [0.26, 0.32, 0.38],
        description="Hand camera to board (m). Not farther: at 0.42 m a 4 cm square images at "
        "6-8 px, and under 1.5 px of blur its corners come out biased outward (the focal "
        "length then 0.5 % long).",
    )
    hand_views_per_distance: int = Field(
        10, ge=3, le=40, description="Hand camera views planned at each distance."
    )
    hand_tilt_rad: float = Field(
        0.7,
        ge=0.1,
        le=1.0,
        description="Largest tilt of the hand camera's line of sight from the board normal (rad).",
    )
    head_board_distances_m: list[float] = Field(
        default_factory=lambda: [0.62, 0.75],
        description="Head camera to the palm-held board for head extrinsics (m).",
    )
    palm_board_offset_m: float = Field(
        0.17, gt=0.0, le=0.5, description="Board centre in front of the palm (m, palm z)."
    )
    move_s: float = Field(1.5, gt=0.1, le=10.0, description="Time of the longest robot moves (s).")
    move_speed_rad_s: float = Field(
        0.6,
        gt=0.01,
        le=5.0,
        description="A shorter move takes its largest joint change at this speed, in no less "
        "than min_move_s (most moves between neighbouring views are a few tenths of a radian).",
    )
    min_move_s: float = Field(0.6, gt=0.1, le=10.0, description="Time of the shortest moves (s).")
    settle_s: float = Field(0.4, ge=0.0, le=5.0, description="Wait after a move (s).")
    settle_timeout_s: float = Field(
        5.0, gt=0.0, le=60.0, description="Longest extra wait for the arm to come to rest (s)."
    )
    rest_check_s: float = Field(
        0.05, gt=0.0, le=1.0, description="Interval of the at-rest check (cell time, s)."
    )
    rest_tolerance_rad: float = Field(
        2e-4, gt=0.0, le=0.1, description="At rest: no joint moved more than this per interval."
    )
    reach_tolerance_rad: float = Field(
        0.03,
        gt=0.0,
        le=0.5,
        description="Arrived: every joint this close to the target (servo droop under load).",
    )
    frame_delay_s: float = Field(
        0.15, ge=0.0, le=2.0, description="Use frames this long after a board/robot change (s)."
    )

    @model_validator(mode="after")
    def _move_times_ordered(self) -> BoardStepsConfig:
        if self.min_move_s > self.move_s:
            raise ValueError(
                f"min_move_s = {self.min_move_s} exceeds move_s = {self.move_s}; expected "
                "min_move_s <= move_s"
            )
        return self
