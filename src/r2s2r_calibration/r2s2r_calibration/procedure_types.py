"""What every step of the grounding procedure shares: its signature, settings and the run.

:class:`ProcedureConfig` holds every step's settings; :class:`GroundingRun` is what one run of
the procedure produced so far (the artifact and the measurements behind it). Every step is a
:class:`Step`, ``(client, nominal, config, run, say) -> None``, in :mod:`.steps` (one module per
step family; :data:`.procedure.STEPS` is their table); the steps depend on this module and
:mod:`.step_support`, not on each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import Field
from r2s2r_common.camera_model import CameraModel
from r2s2r_common.config import ConfigModel
from r2s2r_description.robot import ALL_JOINT_NAMES
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import GroundingArtifact
from r2s2r_calibration.belt_model import BeltModelConfig
from r2s2r_calibration.bin_config import BinViewsConfig
from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.cell_client import CellClient, npt_float32
from r2s2r_calibration.extrinsics import HandEyeResult
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.intrinsics import IntrinsicsResult
from r2s2r_calibration.registration.elements import PoseAxis
from r2s2r_calibration.registration.register import ElementRegistration, RegistrationConfig
from r2s2r_calibration.sysid.config import SysIdConfig
from r2s2r_calibration.sysid.excitation import ExcitationSegment
from r2s2r_calibration.sysid.identify import SysIdResult
from r2s2r_calibration.sysid.log import JointStateLog
from r2s2r_calibration.uncertainty import CameraReplicate, UncertaintyConfig

ProgressFn = Callable[[str], None]
"""One-line progress messages of a step."""


class ProcedureConfig(ConfigModel):
    """Settings of the grounding procedure."""

    cell_name: str | None = Field(
        None,
        description="The lab's name for the cell, recorded in the artifact's `cell` section "
        "(with the static scene the registration step observes): readers on a running cell "
        "given another name refuse the artifact. None: unnamed (the static scene still "
        "identifies the cell).",
    )
    sysid: SysIdConfig = Field(default_factory=SysIdConfig)
    sysid_command_lead_s: float = Field(
        1.5,
        gt=0.0,
        le=30.0,
        description="Send the excitation this long before it starts (s): more than the lag of "
        "the cell clock this client sees (a backlog of 500 Hz joint states under load).",
    )
    sysid_attempts: int = Field(
        3, ge=1, le=5, description="Excitation runs before an unusable log fails the step."
    )
    sysid_joints: list[str] = Field(
        default_factory=lambda: list(ALL_JOINT_NAMES), description="Joints to identify."
    )
    command_lead_s: float = Field(
        0.5,
        gt=0.0,
        le=5.0,
        description="Send each trajectory this long before its start (s); more than the worst "
        "delivery delay of a command, which the controller holds until its stamp.",
    )
    registration: RegistrationConfig = Field(
        default_factory=lambda: RegistrationConfig(
            min_points=60, icp_distances_m=[0.04, 0.02, 0.01]
        ),
        description="Registration settings (a 128 px depth image sees ~150 points per bin; its "
        "points scatter ~2 mm about the surfaces at 2-3 m, so the last stage keeps 10 mm).",
    )
    registration_elements: list[str] = Field(
        default_factory=lambda: ["belt", "bin_0", "bin_1", "bin_2"],
        description="Scene elements to register (belt, bin_<n>).",
    )
    registration_unobservable_ok: dict[str, list[PoseAxis]] = Field(
        default_factory=lambda: {"belt": list[PoseAxis](["tx"])},
        description="Per element, pose directions (element frame) allowed to be unobservable; "
        "they are held at the nominal pose. The belt's ends are out of the head camera's view, "
        "so translation along its travel axis (belt_link x) is not observable.",
    )
    registration_held: dict[str, list[PoseAxis]] = Field(
        default_factory=lambda: {
            "belt": list[PoseAxis](["rx"]),
            **{name: list[PoseAxis](["rx", "ry", "tz"]) for name in ("bin_0", "bin_1", "bin_2")},
        },
        description="Per element, pose directions (element frame) known from physics and held "
        "at the nominal pose instead of registered. A bin stands on the table, so its roll, "
        "pitch and height are the table top's; only x, y and yaw are registered (its wall tops "
        "and floor strip carry too few points at 2-3 m to fix the others to 0.5 deg). A "
        "conveyor is levelled across its travel at installation: the belt's roll is held (its "
        "0.3 m width seen in 128 px depth at 2-3 m gives it only to ~0.8 deg).",
    )
    registration_on_support: list[str] = Field(
        default_factory=lambda: ["bin_0", "bin_1", "bin_2"],
        description="Elements standing on the table top (z = 0 of their frame): observed "
        "points nearer to the table plane than to the element are left out of their fit.",
    )
    registration_required: list[str] = Field(
        default_factory=lambda: ["belt"],
        description="Elements whose refusal fails the registration step (the belt step needs "
        "the belt surface); other refusals are reported and the rest is kept, unless every "
        "element was refused.",
    )
    bin_views: BinViewsConfig = Field(
        default_factory=BinViewsConfig,
        description="Bin refinement from hand-camera views of the rims (step 'bins').",
    )
    belt: BeltModelConfig = Field(default_factory=BeltModelConfig)
    belt_trial_seed: int = Field(7, ge=0, description="Seed of the trial that brings an object.")
    belt_validation_seed: int | None = Field(
        8, ge=0, description="Seed of a second trial tracked for the held-out check (None: skip)."
    )
    belt_spare_seeds: list[int] = Field(
        default_factory=lambda: [9, 10],
        description="Trials tried in turn when a track is refused (an object whose depth "
        "track is poor, e.g. a round one whose highest points jump between parts as it passes "
        "the camera): the refused track is reported and never used, and the next object is "
        "tracked instead, first for the fit, then for the held-out check.",
    )
    belt_track_s: float = Field(
        14.0, gt=0.5, le=120.0, description="Longest object tracking time (s)."
    )
    belt_encoder_wait_s: float = Field(
        0.3, ge=0.0, le=5.0, description="Wait for late encoder messages after a track (s)."
    )
    belt_lost_s: float = Field(
        1.0, gt=0.0, le=10.0, description="Stop tracking once the object was unseen this long (s)."
    )
    belttop_face_band_m: float = Field(
        0.008,
        gt=0.0,
        le=0.05,
        description="Points at most this far below the object's highest point can be its top "
        "face (the band is narrower when the highest points' spread, the depth noise, allows).",
    )
    belttop_face_band_min_m: float = Field(
        0.001, gt=0.0, le=0.05, description="Narrowest top-face band (m)."
    )
    belt_top_band_sigmas: float = Field(
        3.0,
        gt=0.0,
        le=20.0,
        description="Top-face band: this many robust sigmas of the highest points' heights.",
    )
    belt_min_top_points: int = Field(4, ge=1, le=100000, description="Top-face points per frame.")
    belt_end_margin_m: float = Field(
        0.2,
        ge=0.0,
        le=0.7,
        description="Ignore the object this close to the belt's ends (it is placed or falls off).",
    )
    belt_min_height_m: float = Field(
        0.01, gt=0.0, le=0.2, description="Points this far above the belt surface are object."
    )
    belt_min_points: int = Field(15, ge=3, le=100000, description="Object points per frame.")
    board_steps: BoardStepsConfig = Field(default_factory=BoardStepsConfig)
    uncertainty: UncertaintyConfig = Field(
        default_factory=UncertaintyConfig,
        description="How the artifact's 95 % intervals are built (r2s2r_calibration.uncertainty).",
    )


@dataclass
class BeltObservation:
    """What the belt step measured (kept for the grounding report).

    Attributes:
        camera_speed_mps: Surface speed from the tracked object (m/s).
        encoder_rate_rad_s: Mean encoder rate over the same time (rad/s).
        stamps_s: Track stamps (s).
        along_belt_m: Object position along belt x per stamp (m).
        encoder_stamps_s: Encoder stamps over the track (s).
        encoder_angles_rad: Unwrapped roller angles (rad).
        validation: A second object's track (stamps, positions, encoder stamps, angles), not
            used in the fit; the report's held-out check.

    """

    camera_speed_mps: float
    encoder_rate_rad_s: float
    stamps_s: FloatArray
    along_belt_m: FloatArray
    encoder_stamps_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    encoder_angles_rad: FloatArray = field(default_factory=lambda: np.zeros(0))
    validation: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None


@dataclass
class GroundingRun:
    """Everything one run of the procedure produced.

    Attributes:
        artifact: The grounding artifact.
        steps_run: Steps that ran and succeeded.
        failures: Step name -> error message of the steps that failed.
        step_wall_s: Wall time per step (s).
        sysid_segments: Excitation that was sent.
        sysid_log: Measured joint states.
        sysid_result: Fitted model.
        depth_m: The head depth image used for registration.
        registrations: Registered elements (base_link).
        belt: Belt measurements.
        camera_replicates: Jackknife replicates of each camera's calibration (intrinsics, then
            the mount solved with them), for the uncertainty of what is computed from it.
        mount_fits: Each camera mount's hand-eye solution (its parameter covariance).

    """

    artifact: GroundingArtifact
    steps_run: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    step_wall_s: dict[str, float] = field(default_factory=dict)
    sysid_segments: list[ExcitationSegment] = field(default_factory=list)
    sysid_log: JointStateLog | None = None
    sysid_result: SysIdResult | None = None
    depth_m: npt_float32 | None = None
    head_camera: CameraModel | None = None
    T_base_head_optical: FloatArray | None = None
    registrations: dict[str, ElementRegistration] = field(default_factory=dict)
    belt: BeltObservation | None = None
    intrinsics: dict[str, IntrinsicsResult] = field(default_factory=dict)
    board_views: dict[str, tuple[list[np.ndarray], list[float], list[FloatArray]]] = field(
        default_factory=dict
    )
    T_base_head_optical_calibrated: FloatArray | None = None
    camera_replicates: dict[str, list[CameraReplicate]] = field(default_factory=dict)
    mount_fits: dict[str, HandEyeResult] = field(default_factory=dict)


class Step(Protocol):
    """One step of the grounding procedure (:data:`r2s2r_calibration.procedure.STEPS`).

    A step measures through the cell client and adds its records to ``run.artifact`` (and what
    later steps or the report need to ``run``); it reports progress through ``say``.

    Raises:
        CalibrationError: The step cannot give a result (the procedure records it and, by
            default, goes on with the next step).

    """

    def __call__(
        self,
        client: CellClient,
        nominal: WorldParams,
        config: ProcedureConfig,
        run: GroundingRun,
        say: ProgressFn,
        /,
    ) -> None:
        """Run the step against ``client`` (``nominal``: the description and datasheet world)."""
