"""Board steps of the grounding procedure: ``intrinsics`` (+ blur) and ``extrinsics``, both cameras.

As on hardware, an operator holds or places a printed chessboard (:class:`ChessboardConfig`)
and the robot moves; the procedure asks for board placements through the cell's
:class:`~r2s2r_calibration.cell_client.BoardOperator` but never uses the *requested* poses as
measurements: every quantity comes from images, ``/joint_states`` and the nominal description.
A cell client without a board operator (:attr:`CellClient.board_operator`) makes both steps
fail with a :class:`BoardUnavailableError` that says so.

- Head intrinsics + blur: the operator holds the board in front of the head camera at a grid of
  image positions, two distances and alternating tilts (the robot stays home).
- Hand intrinsics + blur and hand-eye (eye-in-hand, ``T_palm_camera``): the board is put down
  in the cell, the robot moves the hand camera around it (nominal IK of the optical frame).
- Head extrinsics (eye-to-hand, ``T_base_camera``): the board is clamped to the palm and the
  robot shows it to the head camera from several poses; the board's pose on the palm is solved
  for with the camera's pose.

Flange poses come from the measured joint positions through the nominal kinematics (the arm's
geometry is the datasheet's; only mounts are uncertain).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_description.cameras import HAND, HEAD
from r2s2r_description.frames import BASE_LINK, PALM_LINK, WORLD_FRAME
from r2s2r_description.transforms import invert_transform
from r2s2r_world.grounding import CAMERA_KEYS
from r2s2r_world.kinematics import IkError, PalmIk
from r2s2r_world.world import WorldParams
from scipy.spatial.transform import Rotation

from r2s2r_calibration.artifact import (
    CameraPoseRecord,
    CameraRecord,
    LookRecord,
    PoseValue,
    Provenance,
    blur_record,
    camera_link_pose,
    intrinsics_record,
    pose_value,
)
from r2s2r_calibration.blur import estimate_blur, simulator_render_variance_px2
from r2s2r_calibration.board_config import BoardStepsConfig
from r2s2r_calibration.camera_look import NOT_MEASURED, estimate_white_balance
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.errors import (
    BoardNotDetectedError,
    BoardUnavailableError,
    CalibrationError,
)
from r2s2r_calibration.extrinsics import HandEyeResult, calibrate_hand_eye
from r2s2r_calibration.geometry import FloatArray, look_at_pose
from r2s2r_calibration.intrinsics import (
    ChessboardConfig,
    IntrinsicsResult,
    calibrate_intrinsics,
    detect_board,
    jackknife_intrinsics,
)
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig, ProgressFn
from r2s2r_calibration.step_support import arm_positions, move_arm
from r2s2r_calibration.uncertainty import (
    CameraReplicate,
    UncertaintyConfig,
    interval_95,
    jackknife_covariance,
    pose_intervals,
)


def _fit_centre(
    camera: CameraModel, target_px: FloatArray, corners_board: FloatArray, T: FloatArray
) -> FloatArray:
    """Shift the board (pose T in the camera) towards the image centre until it fits."""
    K = camera.camera_matrix
    centre = np.array([K[0, 2], K[1, 2]])
    depth = float(T[2, 3])
    for alpha in np.linspace(1.0, 0.0, 11):
        pixel = centre + alpha * (target_px - centre)
        ray = np.linalg.solve(K, np.array([pixel[0], pixel[1], 1.0]))
        candidate = T.copy()
        middle = candidate[:3, :3] @ corners_board.mean(axis=0)
        candidate[:3, 3] = ray / ray[2] * depth - middle
        points = corners_board @ candidate[:3, :3].T + candidate[:3, 3]
        projected = (points[:, :2] / points[:, 2:3]) * [K[0, 0], K[1, 1]] + centre
        inside = (projected >= 3).all() and (projected[:, 0] <= camera.width_px - 4).all()
        if inside and (projected[:, 1] <= camera.height_px - 4).all():
            return candidate
    return candidate


def _board_outline(board: ChessboardConfig, margin_squares: float = 0.5) -> FloatArray:
    side = board.square_length_m
    lo, hi = -margin_squares * side, np.array(board.getChessboardSize()) * side
    hi = hi + margin_squares * side
    return np.array([[lo, lo, 0], [hi[0], lo, 0], [lo, hi[1], 0], [hi[0], hi[1], 0]], float)


def head_view_plan(camera: CameraModel, cfg: BoardStepsConfig) -> list[FloatArray]:
    """``T_camera_board`` requests for the head intrinsics: positions x distances x tilts."""
    outline = _board_outline(cfg.board, 0.25)
    fractions = np.linspace(0.0, 1.0, cfg.image_grid)
    tilts = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    plan = []
    for d_index, distance in enumerate(cfg.head_distances_m):
        for index, (fy, fx) in enumerate((a, b) for a in fractions for b in fractions):
            tx, ty = tilts[(index + d_index) % len(tilts)]
            pose = np.eye(4)
            pose[:3, :3] = Rotation.from_euler(
                "xyz", [tx * cfg.tilt_rad, ty * cfg.tilt_rad, 0.1 * index]
            ).as_matrix()
            pose[2, 3] = distance
            target = np.array([fx * camera.width_px, fy * camera.height_px])
            plan.append(_fit_centre(camera, target, outline, pose))
    return plan


def _capture(client: CellClient, camera: str, delay_s: float) -> tuple[float, np.ndarray]:
    return client.capture_image(camera, client.now_s() + delay_s)


def _intrinsics_interval(
    result: IntrinsicsResult, replicates: list[CameraReplicate], unc: UncertaintyConfig
) -> tuple[float, float, float, float]:
    """95 % half-widths of (fx, fy, cx, cy): fit error, jackknife spread, model floors."""
    spread = np.zeros(4)
    if len(replicates) >= 2:
        values = [
            [
                r.camera_matrix[0, 0],
                r.camera_matrix[1, 1],
                r.camera_matrix[0, 2],
                r.camera_matrix[1, 2],
            ]
            for r in replicates
        ]
        spread = np.sqrt(np.diag(jackknife_covariance(values)))
    floors = (
        unc.focal_rel_floor * result.fx_px,
        unc.focal_rel_floor * result.fy_px,
        unc.principal_point_floor_px,
        unc.principal_point_floor_px,
    )
    return tuple(  # type: ignore[return-value]
        interval_95(float(result.intrinsics_std[i]), float(spread[i]), floors[i]) for i in range(4)
    )


def _intrinsics_and_blur(
    client: CellClient,
    camera: str,
    images: list[np.ndarray],
    stamps: list[float],
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> IntrinsicsResult:
    cfg, unc = config.board_steps, config.uncertainty
    result = calibrate_intrinsics(cfg.board, images, cfg.intrinsics)
    replicates = [
        CameraReplicate(K, D)
        for K, D in jackknife_intrinsics(
            result.detections, result.image_size_px, cfg.intrinsics, unc.jackknife_groups
        )
    ]
    run.camera_replicates[camera] = replicates
    provenance = Provenance(
        source=client.source,
        start_stamp_s=min(stamps),
        end_stamp_s=max(stamps),
        n_samples=len(result.used_view_indices),
        sample_kind=f"{camera} board views",
        solver="chessboard corners (findChessboardCornersSB + cornerSubPix) + "
        "cv2.calibrateCameraExtended",
    )
    record = run.artifact.cameras.setdefault(CAMERA_KEYS[camera], CameraRecord())
    record.intrinsics = intrinsics_record(result, provenance)
    record.intrinsics.interval_95_px = _intrinsics_interval(result, replicates, unc)
    say(
        f"intrinsics: {camera}: fx {result.fx_px:.2f} fy {result.fy_px:.2f} cx "
        f"{result.cx_px:.2f} cy {result.cy_px:.2f} px, rms {result.rms_px:.3f} px from "
        f"{len(result.used_view_indices)} of {len(images)} views"
    )
    used = [images[i] for i in result.used_view_indices]
    removed = (
        simulator_render_variance_px2(result.camera_matrix, result.distortion, result.image_size_px)
        if cfg.blur_for_simulator
        else None
    )
    try:
        blur = estimate_blur(
            cfg.board,
            used,
            result.board_poses,
            result.camera_matrix,
            result.distortion,
            cfg.blur,
            removed,
        )
    except CalibrationError as error:
        say(f"intrinsics: {camera}: blur not estimated: {error}")
    else:
        blur_provenance = provenance.model_copy(
            update={
                "solver": "edge-spread fit on chessboard edges (blur.estimate_blur)"
                + (", less the simulator's render spread" if cfg.blur_for_simulator else "")
            }
        )
        record.blur = blur_record(blur, blur_provenance)
        record.blur.interval_95_px = interval_95(
            blur.sigma_std_px, unc.blur_rel_floor * blur.sigma_px
        )
        say(f"intrinsics: {camera}: blur sigma {blur.sigma_px:.3f} px from {blur.n_edges} edges")
    _white_balance(camera, used, result, cfg, provenance, record, say)
    run.intrinsics[camera] = result
    return result


def _white_balance(
    camera: str,
    images: list[np.ndarray],
    result: IntrinsicsResult,
    cfg: BoardStepsConfig,
    provenance: Provenance,
    record: CameraRecord,
    say: ProgressFn,
) -> None:
    """Measure the camera's white balance on the board's white squares (``record.look``)."""
    if not isinstance(cfg.board, ChessboardConfig) or any(image.ndim != 3 for image in images):
        return
    try:
        balance = estimate_white_balance(
            cfg.board, images, result.board_poses, result.camera_matrix, result.distortion
        )
    except CalibrationError as error:
        say(f"intrinsics: {camera}: white balance not measured: {error}")
        return
    applied = not balance.is_neutral(cfg.white_balance_tolerance)
    record.look = LookRecord(
        white_balance_rgb=balance.gains_rgb,
        white_balance_std=balance.std_rgb,
        samples=balance.samples,
        applied=applied,
        not_measured=list(NOT_MEASURED),
        provenance=provenance.model_copy(
            update={"solver": "median colour of the board's white squares (camera_look)"}
        ),
    )
    red, _, blue = balance.gains_rgb
    say(
        f"intrinsics: {camera}: white balance red {red:.3f} blue {blue:.3f} (vs green, from "
        f"{balance.samples} white squares): "
        + ("applied to the grounded world" if applied else "neutral, not applied")
    )


def run_head_intrinsics(
    client: CellClient,
    config: ProcedureConfig,
    cfg: BoardStepsConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Head camera intrinsics + blur from boards the operator holds in front of it."""
    operator = client.board_operator
    if operator is None:
        raise BoardUnavailableError("no board operator")
    camera = client.camera_model(HEAD.name)
    images, stamps = [], []
    for pose in head_view_plan(camera, cfg):
        operator.place_board(HEAD.optical_frame, pose)
        stamp, rgb = _capture(client, HEAD.name, cfg.frame_delay_s)
        images.append(rgb)
        stamps.append(stamp)
    operator.remove_board()
    _intrinsics_and_blur(client, HEAD.name, images, stamps, config, run, say)


def _outline_fits(
    camera: CameraModel, T_world_optical: FloatArray, outline_world: FloatArray
) -> bool:
    """Whether the board outline (world points) projects inside the image, 3 px in."""
    K = camera.camera_matrix
    local = (outline_world - T_world_optical[:3, 3]) @ T_world_optical[:3, :3]
    if (local[:, 2] <= 0.05).any():
        return False
    projected = local[:, :2] / local[:, 2:3] * [K[0, 0], K[1, 1]] + [K[0, 2], K[1, 2]]
    return bool(
        (projected >= 3).all() and (projected <= [camera.width_px - 4, camera.height_px - 4]).all()
    )


def _hand_view(
    camera: CameraModel,
    centre: FloatArray,
    outline_world: FloatArray,
    distance_m: float,
    polar_rad: float,
    azimuth_rad: float,
    roll_rad: float,
    target_px: FloatArray,
) -> FloatArray | None:
    """``T_world_optical`` seeing the board centre at ``target_px`` (or nearer the image centre).

    The camera sits ``distance_m`` from the board centre, its line of sight ``polar_rad`` from
    the board normal towards ``azimuth_rad``; ``roll_rad`` turns it about that line. None when
    the board does not fit the image even with its centre in the image centre.
    """
    eye = centre + distance_m * np.array(
        [
            np.sin(polar_rad) * np.cos(azimuth_rad),
            np.sin(polar_rad) * np.sin(azimuth_rad),
            np.cos(polar_rad),
        ]
    )
    looking = look_at_pose(eye, centre, [np.cos(roll_rad), np.sin(roll_rad), 0.0])
    K = camera.camera_matrix
    middle = np.array([K[0, 2], K[1, 2]])
    for alpha in np.linspace(1.0, 0.0, 6):
        pixel = middle + alpha * (target_px - middle)
        ray = np.linalg.solve(K, np.array([pixel[0], pixel[1], 1.0]))
        turn = Rotation.align_vectors([ray / np.linalg.norm(ray)], [[0.0, 0.0, 1.0]])[0]
        pose = looking.copy()
        pose[:3, :3] = looking[:3, :3] @ turn.as_matrix().T
        if _outline_fits(camera, pose, outline_world):
            return pose
    return None


def hand_board_pose(cfg: BoardStepsConfig) -> FloatArray:
    """``T_world_board`` where the operator puts the board down for the hand camera."""
    side = cfg.board.square_length_m
    middle = np.array(cfg.board.getChessboardSize(), dtype=float) * side / 2.0
    board = np.eye(4)
    board[:3, :3] = np.diag([1.0, -1.0, -1.0])  # printed face up, board x along world x
    board[:3, 3] = np.asarray(cfg.hand_board_position_m) - board[:3, :3] @ [*middle, 0.0]
    return board


def hand_view_plan(
    camera: CameraModel,
    cfg: BoardStepsConfig,
    reachable: Callable[[FloatArray], bool] | None = None,
) -> tuple[FloatArray, list[FloatArray], int]:
    """Board pose in world and ``T_world_hand_optical`` requests around it.

    The plan has ``hand_views_per_distance`` slots at each of ``hand_view_distances_m``: line
    of sight azimuths around the board, tilts alternating between ``hand_tilt_rad`` and half
    of it, camera rolls and image positions of the board (coverage) varying. A slot whose pose
    is not ``reachable`` (nominal IK) or does not show the whole board tries nearby variants
    (azimuth turned by up to 180 deg, then other rolls, then less tilt) before it is dropped.

    Returns:
        ``T_world_board``, the view poses and the number of slots dropped.

    """
    board = hand_board_pose(cfg)
    centre = np.asarray(cfg.hand_board_position_m, dtype=float)
    outline = _board_outline(cfg.board, 0.25) @ board[:3, :3].T + board[:3, 3]
    fractions = np.linspace(0.25, 0.75, 3)
    targets = [np.array([fx, fy]) for fy in fractions for fx in fractions]
    size = np.array([camera.width_px, camera.height_px], dtype=float)
    turns = [0.0, np.pi / 6, -np.pi / 6, np.pi / 3, -np.pi / 3, np.pi / 2, -np.pi / 2, np.pi]
    rolls = [0.0, np.pi / 2, -np.pi / 2, np.pi]
    count = cfg.hand_views_per_distance
    poses: list[FloatArray] = []
    dropped = 0
    for d_index, distance in enumerate(cfg.hand_view_distances_m):
        for k in range(count):
            azimuth = 2.0 * np.pi * (k + d_index / len(cfg.hand_view_distances_m)) / count
            polar = cfg.hand_tilt_rad * (1.0 if k % 2 == 0 else 0.5)
            roll = 0.7 * k + 1.3 * d_index
            target = targets[(k + 4 * d_index) % len(targets)] * size
            found = None
            for scale in (1.0, 0.6):
                for roll_turn in rolls:
                    for turn in turns:
                        pose = _hand_view(
                            camera,
                            centre,
                            outline,
                            distance,
                            scale * polar,
                            azimuth + turn,
                            roll + roll_turn,
                            target,
                        )
                        if pose is not None and (reachable is None or reachable(pose)):
                            found = pose
                            break
                    if found is not None:
                        break
                if found is not None:
                    break
            if found is None:
                dropped += 1
            else:
                poses.append(found)
    return board, poses, dropped


def _solve_ik(ik: PalmIk, T_world_link: FloatArray, seed: FloatArray) -> FloatArray | None:
    try:
        return ik.solve(T_world_link, seed_q=seed, max_iterations=300)
    except IkError:
        return None


def _visit_views(
    client: CellClient,
    ik: PalmIk,
    views: list[FloatArray],
    home: FloatArray,
    cfg: BoardStepsConfig,
    lead_s: float,
    camera: str,
    say: ProgressFn,
) -> Iterator[tuple[FloatArray, float, np.ndarray]]:
    """Move to each reachable view (nominal IK) and yield (measured arm joints, stamp, image).

    Unreachable views are skipped with a message.
    """
    seed = home
    for view in views:
        q = _solve_ik(ik, view, seed)
        if q is None:
            q = _solve_ik(ik, view, home)
        if q is None:
            say(f"{camera}: a view pose is out of reach; skipped")
            continue
        seed = q
        move_arm(client, q, cfg, lead_s)
        measured = arm_positions(client.joint_positions())
        stamp, rgb = _capture(client, camera, cfg.frame_delay_s)
        yield measured, stamp, rgb


def _capture_hand_views(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    cfg: BoardStepsConfig,
    say: ProgressFn,
) -> tuple[list[np.ndarray], list[float], list[FloatArray]]:
    """Board put down in the cell; robot moves the hand camera around it: images + palm poses."""
    operator = client.board_operator
    if operator is None:
        raise BoardUnavailableError("no board operator")
    camera = client.camera_model(HAND.name)
    layout = nominal.layout()
    ik = PalmIk(layout, HAND.optical_frame)
    fk = PalmIk(layout, PALM_LINK)
    home = arm_positions(client.joint_positions())
    T_world_board, views, dropped = hand_view_plan(
        camera, cfg, lambda pose: _solve_ik(ik, pose, home) is not None
    )
    if dropped:
        say(
            f"hand camera: {dropped} planned views are out of reach or do not show the whole "
            "board (nominal IK and camera model); the others are captured"
        )
    T_base_world = invert_transform(nominal.robot.base_pose.to_pose().matrix())
    operator.place_board(WORLD_FRAME, T_world_board)
    images, stamps, palms = [], [], []
    visits = _visit_views(client, ik, views, home, cfg, config.command_lead_s, HAND.name, say)
    for measured, stamp, rgb in visits:
        images.append(rgb)
        stamps.append(stamp)
        palms.append(T_base_world @ fk.forward(measured))
    operator.remove_board()
    move_arm(client, home, cfg, config.command_lead_s)
    say(f"hand camera: {len(images)} views captured")
    return images, stamps, palms


def run_hand_camera(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    cfg: BoardStepsConfig,
    run: GroundingRun,
    say: ProgressFn,
    extrinsics: bool,
) -> None:
    """Hand camera: intrinsics + blur (if not yet) and eye-in-hand extrinsics."""
    operator = client.board_operator
    if operator is None:
        raise BoardUnavailableError("no board operator")
    if HAND.name not in run.board_views:
        run.board_views[HAND.name] = _capture_hand_views(client, nominal, config, cfg, say)
    images, stamps, palms = run.board_views[HAND.name]
    if HAND.name not in run.intrinsics:
        _intrinsics_and_blur(client, HAND.name, images, stamps, config, run, say)
    if not extrinsics:
        return
    intr = run.intrinsics[HAND.name]
    detections, flanges = [], []
    for image, palm in zip(images, palms, strict=True):
        detection = detect_board(cfg.board, image)
        if detection is not None:
            detections.append(detection)
            flanges.append(palm)
    result = calibrate_hand_eye(
        flanges, detections, intr.camera_matrix, intr.distortion, True, cfg.extrinsics
    )
    intervals = _mount_intervals(
        result,
        run,
        HAND.name,
        True,
        config.uncertainty,
        lambda K_k, D_k: calibrate_hand_eye(flanges, detections, K_k, D_k, True, cfg.extrinsics),
    )
    record = run.artifact.cameras.setdefault("hand", CameraRecord())
    record.pose = _mount_record(
        client,
        pose_value(camera_link_pose(result.X), HAND.mount_frame, HAND.link),
        result,
        stamps,
        intervals,
        sample_kind="hand camera board views + joint states",
        solver="eye-in-hand (extrinsics.calibrate_hand_eye), nominal arm kinematics",
    )
    say(
        f"extrinsics: hand camera in palm_link from {result.n_views} views, rms "
        f"{result.rms_px:.3f} px, std {1000 * np.max(result.translation_std_m):.2f} mm"
    )


def _mount_record(
    client: CellClient,
    pose: PoseValue,
    result: HandEyeResult,
    stamps: Sequence[float],
    intervals: tuple[float | None, float | None],
    sample_kind: str,
    solver: str,
) -> CameraPoseRecord:
    """Return a camera mount's record: pose, the hand-eye fit's residual and errors, 95 % bounds."""
    provenance = Provenance(
        source=client.source,
        start_stamp_s=min(stamps),
        end_stamp_s=max(stamps),
        n_samples=result.n_views,
        sample_kind=sample_kind,
        solver=solver,
    )
    return CameraPoseRecord(
        pose=pose,
        reprojection_rms_px=result.rms_px,
        translation_std_m=tuple(float(v) for v in result.translation_std_m),  # type: ignore[arg-type]
        rotation_std_rad=tuple(float(v) for v in result.rotation_std_rad),  # type: ignore[arg-type]
        provenance=provenance,
        position_interval_95_m=intervals[0],
        rotation_interval_95_rad=intervals[1],
    )


def _mount_intervals(
    result: HandEyeResult,
    run: GroundingRun,
    camera: str,
    calibrated: bool,
    unc: UncertaintyConfig,
    solve: Callable[[FloatArray, FloatArray], HandEyeResult],
) -> tuple[float | None, float | None]:
    """95 % bounds on a camera mount: its fit, re-solved with each intrinsics replicate.

    Each replicate's mount is kept on the replicate (``T_parent_optical``), for what is later
    computed from this camera. Without calibrated intrinsics there is no bound (None, None).
    """
    if not calibrated:
        return None, None
    mounts = []
    for replicate in run.camera_replicates.get(camera, []):
        try:
            replicate.T_parent_optical = solve(replicate.camera_matrix, replicate.distortion).X
        except CalibrationError:
            replicate.T_parent_optical = None
            continue
        mounts.append(replicate.T_parent_optical)
    # The fit's standard errors are of the pose parameters in the parent frame; the bound on
    # the length and angle of the error does not depend on the frame.
    return pose_intervals(
        result.X,
        mounts,
        result.translation_std_m,
        result.rotation_std_rad,
        unc.camera_translation_floor_m,
        unc.camera_rotation_floor_rad,
    )


def head_extrinsics_plan(
    nominal: WorldParams, cfg: BoardStepsConfig
) -> tuple[FloatArray, list[FloatArray]]:
    """``T_palm_board`` (the clamp) and ``T_world_palm`` requests in front of the head camera."""
    side = cfg.board.square_length_m
    middle = np.array([*(np.array(cfg.board.getChessboardSize()) * side / 2.0), 0.0])
    T_palm_board = np.eye(4)
    T_palm_board[:3, :3] = np.diag([1.0, -1.0, -1.0])  # printed face along palm +z
    T_palm_board[:3, 3] = (
        np.array([0.0, 0.0, cfg.palm_board_offset_m]) - np.diag([1.0, -1.0, -1.0]) @ middle
    )
    head = nominal.cameras.head.pose.to_pose().matrix()
    eye = head[:3, 3]
    T_link_optical = np.eye(4)
    T_link_optical[:3, :3] = Rotation.from_euler("xyz", [-np.pi / 2, 0.0, -np.pi / 2]).as_matrix()
    optical = head @ T_link_optical
    poses = []
    for d_index, distance in enumerate(cfg.head_board_distances_m):
        for k in range(6):
            angle = 2.0 * np.pi * (k + 0.5 * d_index) / 6.0
            direction = optical[:3, :3] @ np.array(
                [0.18 * np.cos(angle), 0.18 * np.sin(angle), 1.0]
            )
            centre = eye + distance * direction / np.linalg.norm(direction)
            # Board centre here, facing the camera (its printed face toward the camera) with
            # alternating tilts; the palm sits behind the board.
            tilt = Rotation.from_euler(
                "xyz",
                [cfg.tilt_rad * np.cos(angle + 0.7), cfg.tilt_rad * np.sin(angle + 0.7), 0.0],
            ).as_matrix()
            T_world_board = np.eye(4)
            T_world_board[:3, :3] = optical[:3, :3] @ tilt
            T_world_board[:3, 3] = centre - T_world_board[:3, :3] @ middle
            poses.append(T_world_board @ invert_transform(T_palm_board))
    return T_palm_board, poses


def run_head_extrinsics(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    cfg: BoardStepsConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Head camera in ``base_link`` (eye-to-hand) with the board clamped to the palm."""
    operator = client.board_operator
    if operator is None:
        raise BoardUnavailableError("no board operator")
    intr = run.intrinsics.get(HEAD.name)
    if intr is not None:
        K, dist = intr.camera_matrix, intr.distortion
    else:
        published = client.camera_model(HEAD.name)
        K, dist = published.camera_matrix, published.distortion
        say(
            "extrinsics: head intrinsics from camera_info (intrinsics step not run); no "
            "interval is reported for the mount"
        )
    T_palm_board, views = head_extrinsics_plan(nominal, cfg)
    ik = PalmIk(nominal.layout(), PALM_LINK)
    T_base_world = invert_transform(nominal.robot.base_pose.to_pose().matrix())
    home = arm_positions(client.joint_positions())
    operator.place_board(PALM_LINK, T_palm_board)
    detections, palms, stamps = [], [], []
    visits = _visit_views(client, ik, views, home, cfg, config.command_lead_s, HEAD.name, say)
    for measured, stamp, rgb in visits:
        detection = detect_board(cfg.board, rgb)
        if detection is None:
            say("head extrinsics: board not detected in a view; skipped")
            continue
        detections.append(detection)
        palms.append(T_base_world @ ik.forward(measured))
        stamps.append(stamp)
    operator.remove_board()
    move_arm(client, home, cfg, config.command_lead_s)
    if not detections:
        raise BoardNotDetectedError(
            f"the head camera saw the palm-held board in 0 of {len(views)} poses; check the "
            "board clamp and that the poses are in the head camera's view"
        )
    result = calibrate_hand_eye(palms, detections, K, dist, False, cfg.extrinsics)
    intervals = _mount_intervals(
        result,
        run,
        HEAD.name,
        intr is not None,
        config.uncertainty,
        lambda K_k, D_k: calibrate_hand_eye(palms, detections, K_k, D_k, False, cfg.extrinsics),
    )
    T_world_base = client.frame_pose(BASE_LINK)
    record = run.artifact.cameras.setdefault("head", CameraRecord())
    record.pose = _mount_record(
        client,
        pose_value(camera_link_pose(T_world_base @ result.X), HEAD.mount_frame, HEAD.link),
        result,
        stamps,
        intervals,
        sample_kind="head camera views of the palm-held board + joint states",
        solver="eye-to-hand (extrinsics.calibrate_hand_eye), nominal arm kinematics",
    )
    run.T_base_head_optical_calibrated = result.X
    run.mount_fits[HEAD.name] = result
    say(
        f"extrinsics: head camera in base_link from {result.n_views} views, rms "
        f"{result.rms_px:.3f} px, std {1000 * np.max(result.translation_std_m):.2f} mm"
    )


def _require_board_operator(client: CellClient, step: str) -> None:
    """Refuse a board step on a cell that cannot show a board to the cameras.

    Raises:
        BoardUnavailableError: When the cell has no board operator.

    """
    if client.board_operator is None:
        raise BoardUnavailableError(
            f"{step}: this cell offers no way to show a calibration board to the cameras (no "
            "board operator); on hardware hold the board in front of each camera, on the twin "
            "the operator takes requests on /twin/operator/board_pose (place_board)"
        )


def run_intrinsics_step(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Both cameras' intrinsics and blur (the hand camera's views also serve hand-eye).

    Raises:
        BoardUnavailableError: When the cell has no board operator.

    """
    _require_board_operator(client, "intrinsics")
    cfg = config.board_steps
    run_head_intrinsics(client, config, cfg, run, say)
    run_hand_camera(client, nominal, config, cfg, run, say, extrinsics=False)


def run_extrinsics_step(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Head camera in ``base_link`` and hand camera in ``palm_link``.

    Raises:
        BoardUnavailableError: When the cell has no board operator.

    """
    _require_board_operator(client, "extrinsics")
    cfg = config.board_steps
    run_head_extrinsics(client, nominal, config, cfg, run, say)
    run_hand_camera(client, nominal, config, cfg, run, say, extrinsics=True)
