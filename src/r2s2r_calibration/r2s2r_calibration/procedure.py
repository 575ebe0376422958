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

import cv2
import numpy as np
from r2s2r_description.cell import BELT_LENGTH_M, BELT_WIDTH_M
from r2s2r_description.robot import ALL_JOINT_NAMES, JOINT_LIMITS
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import (
    ControllerRecord,
    GroundingArtifact,
    JointControllerRecord,
    Provenance,
    belt_record,
    scene_record,
)
from r2s2r_calibration.belt_model import BeltTrackFit, fit_belt_track
from r2s2r_calibration.bin_views import run_bin_views
from r2s2r_calibration.board_steps import run_extrinsics_step, run_intrinsics_step
from r2s2r_calibration.cell_client import CameraModel, CellClient, npt_float32
from r2s2r_calibration.errors import (
    BoardUnavailableError,
    CalibrationError,
    DegenerateMotionError,
    RegistrationError,
)
from r2s2r_calibration.extrinsics import params_from_pose, pose_from_params
from r2s2r_calibration.geometry import FloatArray, invert_pose
from r2s2r_calibration.procedure_types import (
    STEP_NAMES,
    BeltObservation,
    GroundingRun,
    ProcedureConfig,
    ProgressFn,
)
from r2s2r_calibration.registration import (
    ElementRegistration,
    depth_to_points,
    element_bounds,
    register_scene_elements,
)
from r2s2r_calibration.step_support import T_LINK_OPTICAL, camera_intrinsics, scene_elements
from r2s2r_calibration.sysid import (
    SysIdLogError,
    check_log,
    identify_controller,
    merge_segments,
    plan_excitation,
)
from r2s2r_calibration.uncertainty import (
    Z_95,
    UncertaintyConfig,
    carried_covariance,
    interval_95,
    pose_intervals,
)


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


BeltTrack = tuple[FloatArray, FloatArray, FloatArray, FloatArray]
"""One object's track: stamps, positions along belt x, encoder stamps, unwrapped angles."""


def _accepted_tracks(
    client: CellClient,
    camera: CameraModel,
    T_belt_optical: FloatArray,
    config: ProcedureConfig,
    say: ProgressFn,
) -> tuple[list[tuple[int, BeltTrack, BeltTrackFit]], list[str]]:
    """Track objects until the fit and the held-out check each have an accepted track.

    The trial seed comes first, then the validation seed, then the spares: a track that is
    refused (too few frames, a residual or radius uncertainty over its threshold) is reported
    and never used; the next object replaces it. Returns the accepted tracks with their fits
    (at most two: the fit's, then the held-out one) and the refusals as ``"trial N: reason"``.

    Raises:
        CalibrationError: Every object's track was refused (the first refusal's kind, with
            every reason).

    """
    seeds = [config.belt_trial_seed]
    if config.belt_validation_seed is not None:
        seeds.append(config.belt_validation_seed)
    seeds += [seed for seed in config.belt_spare_seeds if seed not in seeds]
    wanted = 2 if config.belt_validation_seed is not None else 1
    accepted: list[tuple[int, BeltTrack, BeltTrackFit]] = []
    refused: list[str] = []
    errors: list[CalibrationError] = []
    for seed in seeds:
        if len(accepted) == wanted:
            break
        try:
            track = _track_object(client, camera, T_belt_optical, config, seed)
            fit = fit_belt_track(*track, config.belt)
        except CalibrationError as error:
            refused.append(f"trial {seed}: {error}")
            errors.append(error)
            say(f"belt: the track of trial {seed} is refused, not used ({error})")
            continue
        accepted.append((seed, track, fit))
    if not accepted:
        raise type(errors[0])(
            f"every object's track was refused ({len(refused)} tracked): " + "; ".join(refused)
        )
    return accepted, refused


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
    does not shift as the camera sees the object's front, then its back. A track that fails
    its checks is replaced by another object's (``belt_spare_seeds``), never used.
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
    accepted, refused = _accepted_tracks(client, camera, T_belt_optical, config, say)
    seed, (track_t, track_x, enc_t, enc_a), fit = accepted[0]
    # Mean roller rate over the track (its own fit: the report compares radius x rate with the
    # camera speed, which must not hold by construction).
    inside = (enc_t >= track_t[0]) & (enc_t <= track_t[-1])
    rate = float(np.polyfit(enc_t[inside], enc_a[inside], 1)[0]) if inside.sum() > 2 else math.nan
    sample_kind = "depth frames with the object"
    if refused:
        names = ", ".join(reason.split(":")[0] for reason in refused)
        sample_kind += f" of trial {seed} (refused tracks: {names})"
    provenance = Provenance(
        source=client.source,
        start_stamp_s=float(track_t[0]),
        end_stamp_s=float(track_t[-1]),
        n_samples=fit.n_used,
        sample_kind=sample_kind,
        solver="object top face along the registered belt vs roller angle "
        "(belt_model.fit_belt_track)",
    )
    run.artifact.belt = belt_record(fit.model, provenance, speed_mps=fit.speed_mps)
    run.belt = BeltObservation(fit.speed_mps, rate, track_t, track_x, enc_t, enc_a)
    if len(accepted) > 1:
        # A second object, never used in the fit: the report's held-out belt-speed check.
        run.belt.validation = accepted[1][1]
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
    if step == "intrinsics":
        run_intrinsics_step(client, nominal, config, run, say)
    else:
        run_extrinsics_step(client, nominal, config, run, say)


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
            say(f"{step}: {run.step_wall_s[step]:.1f} s wall")
    # Re-validate so that world_overrides is derived from every record added above.
    run.artifact = GroundingArtifact.model_validate(
        run.artifact.model_dump(mode="python", exclude={"world_overrides"})
    )
    return run
