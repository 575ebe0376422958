"""The world-grounding procedure against a running cell, through what a real cell exposes.

The procedure talks to the cell only through a :class:`CellClient`: camera images and
``camera_info``, head depth, ``/joint_states``, the trajectory controllers, the belt encoder,
the nominal ``/tf_static`` and the trial service (to get an object onto the belt). The ROS
implementation lives in :mod:`r2s2r_calibration.nodes.calibration`; :class:`SimCellClient`
serves an in-process :class:`r2s2r_sim.cell_runtime.SimCell` the same way (tests, benchmark).
Nothing here reads a twin file.

Steps (each can run alone; later steps use earlier results when present):

- ``registration``: belt and bin poses from one head depth image (:mod:`.registration`), with
  the head camera's intrinsics and pose from the artifact when calibrated, else the nominal ones.
- ``sysid``: per-joint excitation through the controllers, ``/joint_states`` logged,
  controller model fitted (:mod:`.sysid`).
- ``belt``: encoder rate and the surface speed of an object on the belt, tracked in the head
  depth images (points above the registered belt surface), fitted with :mod:`.belt_model`.
- ``intrinsics`` / ``extrinsics``: need board views (:mod:`.board_steps`). A real cell has an
  operator who holds the board; a cell client without a board operator
  (:attr:`CellClient.board_operator`) makes these steps fail with a
  :class:`BoardUnavailableError` that says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import cv2
import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.cell import BELT_LENGTH_M, BELT_WIDTH_M, build_description
from r2s2r_description.model import ShapeKind
from r2s2r_description.robot import ALL_JOINT_NAMES, JOINT_LIMITS
from r2s2r_sim.world import WorldParams

from r2s2r_calibration.artifact import (
    OPTICAL_FROM_LINK_RPY_RAD,
    ControllerRecord,
    GroundingArtifact,
    JointControllerRecord,
    Provenance,
    belt_record,
    scene_record,
)
from r2s2r_calibration.belt_model import BeltModelConfig, fit_belt_track
from r2s2r_calibration.bin_views import BinViewsConfig, run_bin_views
from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.errors import CalibrationError, DegenerateMotionError, RegistrationError
from r2s2r_calibration.extrinsics import HandEyeResult, params_from_pose, pose_from_params
from r2s2r_calibration.geometry import FloatArray, invert_pose, pose_from_xyz_rpy
from r2s2r_calibration.intrinsics import IntrinsicsResult
from r2s2r_calibration.registration import (
    BoxPrimitive,
    ElementRegistration,
    PoseAxis,
    RegistrationConfig,
    SceneElement,
    depth_to_points,
    element_bounds,
    register_scene_elements,
)
from r2s2r_calibration.sysid import (
    ExcitationSegment,
    JointStateLog,
    SysIdConfig,
    SysIdLogError,
    SysIdResult,
    check_log,
    identify_controller,
    merge_segments,
    plan_excitation,
)
from r2s2r_calibration.uncertainty import (
    Z_95,
    CameraReplicate,
    UncertaintyConfig,
    carried_covariance,
    interval_95,
    pose_intervals,
)

STEP_NAMES: tuple[str, ...] = (
    "intrinsics",
    "extrinsics",
    "registration",
    "bins",
    "sysid",
    "belt",
)
"""Grounding steps, in the order the full procedure runs them."""

ProgressFn = Callable[[str], None]


class BoardUnavailableError(CalibrationError):
    """A board step was asked for but the cell has no way to show a calibration board."""


@dataclass(frozen=True)
class CameraModel:
    """A camera's published calibration (``camera_info``).

    Attributes:
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        width_px: Image width.
        height_px: Image height.

    """

    camera_matrix: FloatArray
    distortion: FloatArray
    width_px: int
    height_px: int


class BoardOperator(Protocol):
    """The operator who holds or places the calibration board (on hardware, a person)."""

    def place_board(self, frame: str, T_frame_board: FloatArray) -> None:
        """Put the board at a pose in a frame (``world``, ``flange`` or a camera frame)."""
        ...

    def remove_board(self) -> None:
        """Take the board away."""
        ...


class CellClient(Protocol):
    """What the grounding procedure needs from a cell (hardware, the twin or a recording)."""

    @property
    def source(self) -> str:
        """``live`` or a bag path (artifact provenance)."""
        ...

    @property
    def board_operator(self) -> BoardOperator | None:
        """The board operator, or None when the cell cannot show a board."""
        ...

    def now_s(self) -> float:
        """Cell time of the latest ``/joint_states`` (s)."""
        ...

    def wait_until(self, time_s: float) -> None:
        """Return once the cell clock reached ``time_s``."""
        ...

    def joint_positions(self) -> FloatArray:
        """Latest (18,) joint positions, :data:`ALL_JOINT_NAMES` order (rad)."""
        ...

    def start_joint_log(self) -> None:
        """Start logging ``/joint_states`` (and the encoder)."""
        ...

    def stop_joint_log(self) -> JointStateLog:
        """Stop logging and return the joint states."""
        ...

    def encoder_samples(self, duration_s: float) -> tuple[FloatArray, FloatArray]:
        """Record ``/belt/encoder`` for ``duration_s``: (stamps s, unwrapped angles rad)."""
        ...

    def send_trajectory(
        self,
        controller: str,
        joint_names: Sequence[str],
        times_s: FloatArray,
        positions: FloatArray,
        start_time_s: float,
    ) -> None:
        """Publish a JointTrajectory on ``/<controller>_controller/joint_trajectory``."""
        ...

    def camera_model(self, camera: str) -> CameraModel:
        """Return the camera's ``camera_info`` (nominal on an uncalibrated cell)."""
        ...

    def capture_image(self, camera: str, after_s: float | None = None) -> tuple[float, np.ndarray]:
        """First RGB frame of ``camera`` stamped at or after ``after_s`` (default: now)."""
        ...

    def capture_depth(self) -> tuple[float, npt_float32]:
        """Next head depth image: (stamp s, (H, W) float32 metres)."""
        ...

    def frame_pose(self, frame: str) -> FloatArray:
        """``T_world_frame`` of a fixed frame from ``/tf_static`` (the nominal mounts)."""
        ...

    def start_trial(self, seed: int) -> None:
        """Start a trial (objects arrive on the belt)."""
        ...

    def reset_cell(self) -> None:
        """Robot home, belt clear, idle."""
        ...

    def release_streams(self) -> None:
        """Stop receiving camera images and depth until they are asked for again."""
        ...

    def begin_step(self, step: str) -> None:
        """Mark the start of a procedure step (a session bag records it; live cells ignore it)."""
        ...


npt_float32 = np.ndarray  # a (H, W) float32 depth image


class ProcedureConfig(ConfigModel):
    """Settings of the grounding procedure."""

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


def parse_steps(text: str) -> list[str]:
    """Parse ``--steps`` (comma separated, or ``all``) into step names in run order.

    Raises:
        ValueError: Unknown step names (names the known ones).

    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or names == ["all"]:
        return list(STEP_NAMES)
    unknown = sorted(set(names) - set(STEP_NAMES))
    if unknown:
        raise ValueError(f"--steps: unknown steps {unknown}; expected a subset of {STEP_NAMES}")
    return [name for name in STEP_NAMES if name in names]


def scene_elements(nominal: WorldParams, names: Sequence[str]) -> list[SceneElement]:
    """Scene elements (boxes of the description's collision geometry) with nominal poses.

    Poses are in ``base_link`` of the nominal world (the frame registration works in).

    Raises:
        ValueError: An element name the description does not have.

    """
    description = build_description(nominal.layout())
    T_world_base = nominal.robot.base_pose.to_pose().matrix()
    T_base_world = invert_pose(T_world_base)
    poses = {"belt": nominal.belt.pose.to_pose().matrix()}
    poses.update({name: b.pose.to_pose().matrix() for name, b in nominal.bins.items()})
    elements = []
    for name in names:
        if name not in poses:
            raise ValueError(f"scene element {name!r}: expected one of {sorted(poses)}")
        link = description.link(f"{name}_link")
        boxes = [
            BoxPrimitive(
                size_m=tuple(float(v) for v in shape.size_m),  # type: ignore[arg-type]
                xyz_m=shape.origin.xyz_m,
                rpy_rad=shape.origin.rpy_rad,
            )
            for shape in link.shapes
            if shape.kind == ShapeKind.BOX and shape.collision
        ]
        xyz, rpy = _xyz_rpy(T_base_world @ poses[name])
        elements.append(SceneElement(name=name, boxes=boxes, xyz_m=xyz, rpy_rad=rpy))
    return elements


def _xyz_rpy(
    pose: FloatArray,
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    from r2s2r_calibration.geometry import xyz_rpy_from_pose

    xyz, rpy = xyz_rpy_from_pose(pose)
    return (
        (float(xyz[0]), float(xyz[1]), float(xyz[2])),
        (float(rpy[0]), float(rpy[1]), float(rpy[2])),
    )


T_LINK_OPTICAL: FloatArray = pose_from_xyz_rpy((0.0, 0.0, 0.0), OPTICAL_FROM_LINK_RPY_RAD)
"""``T_<camera>_link_<camera>_optical_frame`` (REP 103 body frame to the optical frame)."""


def camera_intrinsics(
    client: CellClient, artifact: GroundingArtifact, key: str
) -> tuple[CameraModel, str | None]:
    """Return the camera's intrinsics from the run's artifact, else its ``camera_info`` + a note.

    Args:
        client: The cell.
        artifact: The run's artifact so far.
        key: ``"head"`` or ``"hand"`` (the camera is ``<key>_camera``).

    """
    record = artifact.cameras.get(key)
    if record is not None and record.intrinsics is not None:
        intr = record.intrinsics
        K = np.array([[intr.fx_px, 0, intr.cx_px], [0, intr.fy_px, intr.cy_px], [0, 0, 1.0]])
        d = intr.distortion
        distortion = np.array([d.k1, d.k2, d.p1, d.p2, d.k3])
        return CameraModel(K, distortion, intr.width_px, intr.height_px), None
    return client.camera_model(f"{key}_camera"), f"{key} intrinsics from camera_info (uncalibrated)"


def _head_camera(
    client: CellClient, artifact: GroundingArtifact, nominal: WorldParams
) -> tuple[CameraModel, FloatArray, list[str]]:
    """Head camera K/D and ``T_base_optical``: calibrated when available, else published."""
    camera, note = camera_intrinsics(client, artifact, "head")
    notes = [note] if note else []
    record = artifact.cameras.get("head")
    T_world_base = client.frame_pose("base_link")
    if record is not None and record.pose is not None:
        T_world_optical = record.pose.pose.matrix() @ T_LINK_OPTICAL
    else:
        T_world_optical = client.frame_pose("head_camera_optical_frame")
        notes.append("head camera pose from /tf_static (uncalibrated)")
    return camera, invert_pose(T_world_base) @ T_world_optical, notes


def _rigid_fit(source: FloatArray, target: FloatArray) -> FloatArray:
    """Least-squares rigid transform (4x4) taking ``source`` points (N, 3) onto ``target``."""
    mean_s, mean_t = source.mean(axis=0), target.mean(axis=0)
    u, _, vt = np.linalg.svd((source - mean_s).T @ (target - mean_t))
    d = np.sign(np.linalg.det(vt.T @ u.T))
    rotation = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    T = np.eye(4)
    T[:3, :3] = rotation
    T[:3, 3] = mean_t - rotation @ mean_s
    return T


def _registered_intervals(
    registration: ElementRegistration,
    bounds: tuple[FloatArray, FloatArray],
    depth: npt_float32,
    camera: CameraModel,
    X: FloatArray,
    run: GroundingRun,
    unc: UncertaintyConfig,
) -> tuple[float | None, float | None]:
    """95 % bounds on a head-depth registration: the head camera's uncertainty carried over.

    With each jackknife replicate of the head calibration (intrinsics ``K_k`` and the mount
    ``X_k`` solved with them) the element's depth pixels would have been seen elsewhere in
    ``base_link``: the rigid motion from their points seen through ``(K, X)`` to their points
    seen through ``(K_k, X_k)`` moves the registered element to its replicate (the principal
    point and the mount's rotation largely cancel there, as they do in the data). The mount
    fit's own covariance, carried to the element with its correlations (pointing and position
    errors that cancel near the board do not cancel at the belt), and a depth model-error floor
    are added.
    The belt's position is bounded across its travel and in height (its along-travel position
    is held); a bin's in x, y and its held height. No bound without a calibrated head camera.
    """
    head = run.artifact.cameras.get("head")
    replicates = [
        (r.camera_matrix, r.distortion, r.T_parent_optical)
        for r in run.camera_replicates.get("head_camera", [])
        if r.T_parent_optical is not None
    ]
    if head is None or head.pose is None or head.intrinsics is None:
        return None, None
    T = registration.T_base_element
    pixels = np.argwhere(np.isfinite(depth) & (depth > 0.05) & (depth < 5.0))
    z = depth[pixels[:, 0], pixels[:, 1]].astype(float)
    uv = pixels[:, ::-1].astype(float).reshape(-1, 1, 2)

    def seen(K: FloatArray, D: FloatArray, X_k: FloatArray) -> FloatArray:
        normalised = cv2.undistortPoints(uv, K, D).reshape(-1, 2)
        points = np.column_stack([normalised * z[:, None], z])
        return points @ X_k[:3, :3].T + X_k[:3, 3]  # type: ignore[no-any-return]

    points = seen(camera.camera_matrix, camera.distortion, X)
    lower, upper = bounds
    local = (points - T[:3, 3]) @ T[:3, :3]
    mine = np.all((local >= lower - 0.01) & (local <= upper + 0.01), axis=1)
    replicas = []
    if np.count_nonzero(mine) >= 10:
        for K_k, D_k, X_k in replicates:
            moved = seen(K_k, D_k, X_k)[mine]
            replicas.append(_rigid_fit(points[mine], moved) @ T)
    mount = run.mount_fits.get("head_camera")
    carried = (
        None
        if mount is None or mount.covariance_x is None
        else carried_covariance(T, X, mount.covariance_x, pose_from_params, params_from_pose)
    )
    zero = (0.0, 0.0, 0.0)
    if registration.name == "belt":
        return pose_intervals(
            T,
            replicas,
            zero,
            zero,
            unc.belt_position_floor_m,
            unc.belt_rotation_floor_rad,
            translation_axes=(1, 2),
            extra_covariance=carried,
        )
    return pose_intervals(
        T,
        replicas,
        (0.0, 0.0, unc.held_height_std_m),
        zero,
        unc.depth_bin_position_floor_m,
        unc.depth_bin_rotation_floor_rad,
        extra_covariance=carried,
    )


def run_registration(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Register belt and bins from one head depth image into the artifact.

    Every element is registered; the ones that succeed go into the artifact (with the
    directions held at nominal), refusals are reported. The step fails (after writing the
    successes) when a required element (:attr:`ProcedureConfig.registration_required`) or every
    element was refused.

    Raises:
        RegistrationError: A required element or every element was refused.

    """
    camera, T_base_optical, notes = _head_camera(client, run.artifact, nominal)
    for note in notes:
        say(f"registration: {note}")
    stamp, depth = client.capture_depth()
    elements = [
        element.model_copy(
            update={
                "unobservable_ok": list(config.registration_unobservable_ok.get(element.name, [])),
                "held": list(config.registration_held.get(element.name, [])),
                "on_support": element.name in config.registration_on_support,
            }
        )
        for element in scene_elements(nominal, config.registration_elements)
    ]
    outcome = register_scene_elements(
        depth,
        camera.camera_matrix,
        T_base_optical,
        elements,
        config.registration,
        camera.distortion,
    )
    T_world_base = client.frame_pose("base_link")
    for name, registration in outcome.registered.items():
        provenance = Provenance(
            source=client.source,
            start_stamp_s=stamp,
            end_stamp_s=stamp,
            n_samples=registration.n_points,
            sample_kind="points",
            solver="degeneracy-aware robust point-to-plane Gauss-Newton "
            "(registration.register_scene_elements)",
        )
        record = scene_record(registration, T_world_base, provenance)
        record.position_interval_95_m, record.rotation_interval_95_rad = _registered_intervals(
            registration,
            element_bounds(next(e for e in elements if e.name == name)),
            depth,
            camera,
            T_base_optical,
            run,
            config.uncertainty,
        )
        run.artifact.scene[name] = record
        correction = registration.T_correction
        held = (
            f", held at nominal: {', '.join(registration.held_at_nominal)}"
            if registration.held_at_nominal
            else ""
        )
        say(
            f"registration: {name}: moved {1000 * np.linalg.norm(correction[:3, 3]):.1f} mm, "
            f"fitness {registration.fitness:.2f}, rmse {1000 * registration.inlier_rmse_m:.2f} mm, "
            f"observability {registration.observability:.2e}{held}"
        )
    for name, message in outcome.failures.items():
        say(f"registration: {name}: refused: {message}")
    run.depth_m = depth
    run.head_camera = camera
    run.T_base_head_optical = T_base_optical
    run.registrations = outcome.registered
    required = [name for name in config.registration_required if name in outcome.failures]
    if required or (outcome.failures and not outcome.registered):
        reason = (
            f"required element(s) {required} refused"
            if required
            else f"all {len(outcome.failures)} elements refused"
        )
        kept = sorted(outcome.registered) or "none"
        raise RegistrationError(
            f"registration: {reason} (registered and kept: {kept}): "
            + "; ".join(f"{name}: {message}" for name, message in outcome.failures.items())
        )


def run_sysid(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Excite the joints through the controllers, log joint states, fit the controller model."""
    rest = client.joint_positions()
    lower = [JOINT_LIMITS[n].lower_rad for n in ALL_JOINT_NAMES]
    upper = [JOINT_LIMITS[n].upper_rad for n in ALL_JOINT_NAMES]
    client.release_streams()  # no camera traffic while 500 Hz joint states are logged
    lead_s = config.sysid_command_lead_s
    for attempt in range(1, config.sysid_attempts + 1):
        start = client.now_s() + lead_s + config.sysid.preroll_s
        segments = plan_excitation(config.sysid_joints, rest, start, config.sysid, lower, upper)
        total = segments[-1].end_time_s - start
        say(f"sysid: {len(segments)} excitation segments over {total:.1f} s of cell time")
        client.start_joint_log()
        # One command per controller, stamped ahead of its start: delivery time does not
        # matter as long as the command arrives before its stamp.
        for excitation in merge_segments(segments):
            client.send_trajectory(
                excitation.controller,
                excitation.joint_names,
                excitation.times_s,
                excitation.positions,
                excitation.start_time_s,
            )
        client.wait_until(segments[-1].end_time_s + 0.05)
        log = client.stop_joint_log()
        try:
            check_log(log, segments, config.sysid)
            break
        except SysIdLogError as error:
            if attempt == config.sysid_attempts:
                raise
            # A late command (the cell clock we see lags the cell under load) or dropped
            # samples: repeat with a longer lead.
            lead_s *= 3.0
            say(f"sysid: attempt {attempt} unusable ({error}); repeating with {lead_s:.1f} s lead")
            client.wait_until(client.now_s() + config.sysid.preroll_s)
    result = identify_controller(nominal, log, segments, config.sysid, say)
    provenance = Provenance(
        source=client.source,
        start_stamp_s=result.start_stamp_s,
        end_stamp_s=result.end_stamp_s,
        n_samples=result.n_samples,
        sample_kind="joint_states",
        solver="MuJoCo response fit (sysid.identify_controller), chirps held out",
    )
    unc = config.uncertainty

    def gain_interval(value: float, rel_std: float, latency_rel: float) -> float:
        # The fit's log-space standard error is relative; the latency's carries over too.
        return value * interval_95(rel_std, latency_rel, unc.gain_rel_floor)

    run.artifact.controller = ControllerRecord(
        gains={
            joint: JointControllerRecord(
                kp=fit.kp,
                kd=fit.kd,
                residual_rms_rad=fit.heldout_rms_rad if np.isfinite(fit.heldout_rms_rad) else 0.0,
                provenance=provenance,
                kp_interval_95=gain_interval(fit.kp, fit.kp_rel_std, fit.kp_latency_rel),
                kd_interval_95=gain_interval(fit.kd, fit.kd_rel_std, fit.kd_latency_rel),
            )
            for joint, fit in result.joints.items()
        },
        latency_s=result.latency_s,
        latency_std_s=result.latency_std_s,
        latency_interval_95_s=interval_95(result.latency_std_s, unc.latency_floor_s),
    )
    run.sysid_segments = list(segments)
    run.sysid_log = log
    run.sysid_result = result


def top_face_position_m(in_belt: FloatArray, config: ProcedureConfig) -> float | None:
    """Position along the belt of an object's top face, from its depth points.

    Args:
        in_belt: (N, 3) points that changed from the empty belt, in ``belt_link`` (m).
        config: The belt step's thresholds (heights, band, point counts, end margins).

    Returns:
        The median belt-x of the top-face points (m), or None without enough object or
        top-face points. The top face's median does not shift as the camera sees the object's
        front, then its back, as the centroid of every point does.

    """
    half_width = 0.5 * BELT_WIDTH_M
    half_length = 0.5 * BELT_LENGTH_M - config.belt_end_margin_m
    on_object = (
        (in_belt[:, 2] > config.belt_min_height_m)
        & (in_belt[:, 2] < 0.2)
        & (np.abs(in_belt[:, 1]) < half_width)
        & (np.abs(in_belt[:, 0]) < half_length)
    )
    if np.count_nonzero(on_object) < config.belt_min_points:
        return None
    heights = in_belt[on_object, 2]
    top = heights >= heights.max() - top_face_band_m(heights, config)
    if np.count_nonzero(top) < config.belt_min_top_points:
        return None
    return float(np.median(in_belt[on_object][top, 0]))


def top_face_band_m(heights: FloatArray, config: ProcedureConfig) -> float:
    """How far below the object's highest point its top face reaches, from the measured noise.

    The top face is flat, so the spread of the highest points is the depth noise; points lower
    than a few times that are the top of the side faces, which lie nearer the camera and pull
    the position along the belt by an amount that changes as the object passes the camera (a
    fixed 8 mm band made the belt speed 1-2 % slow on some cells).
    """
    ordered = np.sort(heights)[::-1]
    highest = ordered[: max(config.belt_min_top_points, ordered.size // 4)]
    noise = 1.4826 * float(np.median(np.abs(highest - np.median(highest))))
    band = config.belt_top_band_sigmas * noise + float(ordered[0] - np.median(highest))
    return float(np.clip(band, config.belttop_face_band_min_m, config.belttop_face_band_m))


def _track_object(
    client: CellClient,
    camera: CameraModel,
    T_belt_optical: FloatArray,
    config: ProcedureConfig,
    seed: int,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Track one trial's object along the belt in head depth, with the encoder meanwhile.

    Returns track stamps, positions along belt x, encoder stamps and unwrapped angles.

    Raises:
        DegenerateMotionError: The object was seen in too few frames.

    """
    _, background = client.capture_depth()
    client.encoder_samples(0.0)  # drop what came before the track
    client.start_trial(seed)
    stamps: list[float] = []
    along: list[float] = []
    encoder_stamps: list[FloatArray] = []
    encoder_angles: list[FloatArray] = []
    deadline = client.now_s() + config.belt_track_s
    last_seen = -np.inf
    while client.now_s() < deadline:
        stamp, depth = client.capture_depth()
        t, a = client.encoder_samples(0.0)
        encoder_stamps.append(t)
        encoder_angles.append(a)
        if stamps and stamp - last_seen > config.belt_lost_s:
            break  # the object left the view
        # Only what changed since the empty-belt frame: the robot and cell parts are static.
        changed = np.where(np.abs(depth - background) > 0.005, depth, np.float32(0.0))
        if np.count_nonzero(changed) < config.belt_min_points:
            continue
        points = depth_to_points(
            changed.astype(np.float32), camera.camera_matrix, camera.distortion, 0.05, 5.0
        )
        in_belt = points @ T_belt_optical[:3, :3].T + T_belt_optical[:3, 3]
        position = top_face_position_m(in_belt, config)
        if position is None:
            continue
        stamps.append(stamp)
        along.append(position)
        last_seen = stamp
    # Encoder messages stamped up to the last frame may still be on their way: wait for them.
    client.wait_until(client.now_s() + config.belt_encoder_wait_s)
    t, a = client.encoder_samples(0.0)
    encoder_stamps.append(t)
    encoder_angles.append(a)
    client.reset_cell()
    enc_t = np.concatenate(encoder_stamps) if encoder_stamps else np.zeros(0)
    enc_a = np.concatenate(encoder_angles) if encoder_angles else np.zeros(0)
    track_t, track_x = np.asarray(stamps), np.asarray(along)
    if enc_t.size >= 2:
        # Frames outside the encoder record (a sample lost at either end) cannot be paired.
        inside = (track_t >= enc_t.min()) & (track_t <= enc_t.max())
        track_t, track_x = track_t[inside], track_x[inside]
    if track_t.size < config.belt.min_track_points:
        raise DegenerateMotionError(
            f"the object on the belt was seen in {track_t.size} head depth frames (need "
            f"{config.belt.min_track_points}); check that trials bring objects into the head "
            "camera's view, or track longer (belt_track_s)"
        )
    return track_t, track_x, enc_t, enc_a


def run_belt(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Belt model: an object's travel along the belt (head depth) against the roller angle.

    The object's position along the belt is the median of its top-face points (the highest
    points above the registered belt surface): unlike the centroid of all visible points it
    does not shift as the camera sees the object's front, then its back.
    """
    camera, T_base_optical, _ = _head_camera(client, run.artifact, nominal)
    T_world_base = client.frame_pose("base_link")
    belt_scene = run.artifact.scene.get("belt")
    if belt_scene is not None:
        T_world_belt = belt_scene.pose.matrix()
    else:
        T_world_belt = client.frame_pose("belt_link")
        say("belt: belt pose from /tf_static (registration not run)")
    T_belt_optical = invert_pose(T_world_belt) @ T_world_base @ T_base_optical
    track_t, track_x, enc_t, enc_a = _track_object(
        client, camera, T_belt_optical, config, config.belt_trial_seed
    )
    fit = fit_belt_track(track_t, track_x, enc_t, enc_a, config.belt)
    # Mean roller rate over the track (its own fit: the report compares radius x rate with the
    # camera speed, which must not hold by construction).
    inside = (enc_t >= track_t[0]) & (enc_t <= track_t[-1])
    rate = float(np.polyfit(enc_t[inside], enc_a[inside], 1)[0]) if inside.sum() > 2 else math.nan
    provenance = Provenance(
        source=client.source,
        start_stamp_s=float(track_t[0]),
        end_stamp_s=float(track_t[-1]),
        n_samples=fit.n_used,
        sample_kind="depth frames with the object",
        solver="object top face along the registered belt vs roller angle "
        "(belt_model.fit_belt_track)",
    )
    run.artifact.belt = belt_record(fit.model, provenance, speed_mps=fit.speed_mps)
    run.belt = BeltObservation(fit.speed_mps, rate, track_t, track_x, enc_t, enc_a)
    if config.belt_validation_seed is not None:
        # A second object, never used in the fit: the report's held-out belt-speed check.
        run.belt.validation = _track_object(
            client, camera, T_belt_optical, config, config.belt_validation_seed
        )
    _belt_intervals(run, fit.model.roller_radius_m, fit.model.roller_radius_std_m, config)
    say(
        f"belt: surface speed {fit.speed_mps:.4f} m/s from {fit.n_used} frames over "
        f"{fit.travel_m:.2f} m, roller radius {1000 * fit.model.roller_radius_m:.2f} +- "
        f"{1000 * fit.model.roller_radius_std_m:.2f} mm, track residual "
        f"{1000 * fit.position_residual_m:.1f} mm"
    )


def _belt_intervals(
    run: GroundingRun, radius_m: float, radius_std_m: float, config: ProcedureConfig
) -> None:
    """95 % intervals of the roller radius and the belt speed (relative, the same for both).

    The track fit's standard error; the second object's track (when tracked) fitted alone,
    whose difference from the first measures the track-to-track error that one track's
    residuals do not show (an object's top face seen through depth pixels whose footprint
    changes along the belt); the head focal length's relative uncertainty (it scales positions
    across the image); a model floor.
    """
    record = run.artifact.belt
    if record is None or run.belt is None:
        return
    unc = config.uncertainty
    terms = [radius_std_m / radius_m, unc.belt_speed_rel_floor]
    if run.belt.validation is not None:
        try:
            other = fit_belt_track(*run.belt.validation, config.belt)
        except CalibrationError:
            other = None
        if other is not None:
            terms.append(abs(other.model.roller_radius_m / radius_m - 1.0) / math.sqrt(2.0))
    head = run.artifact.cameras.get("head")
    if head is not None and head.intrinsics is not None and head.intrinsics.interval_95_px:
        terms.append(head.intrinsics.interval_95_px[0] / Z_95 / head.intrinsics.fx_px)
    relative = interval_95(*terms)
    record.roller_radius_interval_95_m = relative * radius_m
    if record.speed_mps is not None:
        record.speed_interval_95_mps = relative * record.speed_mps


def run_board_step(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
    step: str,
) -> None:
    """Board steps (intrinsics + blur, extrinsics): need a board operator.

    Raises:
        BoardUnavailableError: When the cell has no board operator.

    """
    if client.board_operator is None:
        raise BoardUnavailableError(
            f"{step}: this cell offers no way to show a calibration board to the cameras (no "
            "board operator); on hardware hold the board in front of each camera, on the twin "
            "the operator takes requests on /twin/operator/board_pose (place_board)"
        )
    from r2s2r_calibration import board_steps  # board steps import this module

    if step == "intrinsics":
        board_steps.run_intrinsics_step(client, nominal, config, run, say)
    else:
        board_steps.run_extrinsics_step(client, nominal, config, run, say)


_STEPS: dict[
    str, Callable[[CellClient, WorldParams, ProcedureConfig, GroundingRun, ProgressFn], None]
] = {
    "registration": run_registration,
    "bins": run_bin_views,
    "sysid": run_sysid,
    "belt": run_belt,
}


def run_grounding(
    client: CellClient,
    nominal: WorldParams,
    steps: Sequence[str] = STEP_NAMES,
    config: ProcedureConfig | None = None,
    progress: ProgressFn | None = None,
    keep_going: bool = True,
) -> GroundingRun:
    """Run grounding steps against a cell and collect the artifact.

    Args:
        client: The cell.
        nominal: The nominal world (description, datasheet values, default gains).
        steps: Steps to run (:data:`STEP_NAMES`), run in that order.
        config: Settings; defaults to :class:`ProcedureConfig`.
        progress: One-line progress callback.
        keep_going: Continue with the next step when one fails (its error is recorded).

    Returns:
        The run, with the artifact of every step that succeeded.

    Raises:
        CalibrationError: The first failing step's error when ``keep_going`` is False.

    """
    cfg = config or ProcedureConfig()
    say = progress or (lambda _message: None)
    run = GroundingRun(artifact=GroundingArtifact())
    for step in [s for s in STEP_NAMES if s in steps]:
        say(f"== {step}")
        started = time.perf_counter()
        try:
            client.begin_step(step)
            if step in _STEPS:
                _STEPS[step](client, nominal, cfg, run, say)
            else:
                run_board_step(client, nominal, cfg, run, say, step)
            run.steps_run.append(step)
        except CalibrationError as error:
            run.failures[step] = str(error)
            say(f"{step}: FAILED: {error}")
            if not keep_going:
                raise
        finally:
            run.step_wall_s[step] = time.perf_counter() - started
    # Re-validate so that world_overrides is derived from every record added above.
    run.artifact = GroundingArtifact.model_validate(
        run.artifact.model_dump(mode="python", exclude={"world_overrides"})
    )
    return run
