"""The ``belt`` step of the grounding procedure: roller radius and surface speed.

The encoder rate and the surface speed of an object on the belt, tracked in the head depth
images (points above the registered belt surface), fitted with :mod:`..belt_model`.
"""

from __future__ import annotations

import math

import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_description.cell import BELT_LENGTH_M, BELT_WIDTH_M
from r2s2r_description.frames import BASE_LINK
from r2s2r_description.transforms import invert_transform
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import Provenance, belt_record
from r2s2r_calibration.belt_model import BeltTrackFit, fit_belt_track
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.errors import CalibrationError, DegenerateMotionError
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.procedure_types import (
    BeltObservation,
    GroundingRun,
    ProcedureConfig,
    ProgressFn,
)
from r2s2r_calibration.registration.depth import depth_to_points
from r2s2r_calibration.step_support import head_camera
from r2s2r_calibration.uncertainty import Z_95, interval_95


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
    camera, T_base_optical, _ = head_camera(client, run.artifact)
    T_world_base = client.frame_pose(BASE_LINK)
    belt_scene = run.artifact.scene.get("belt")
    if belt_scene is not None:
        T_world_belt = belt_scene.pose.matrix()
    else:
        T_world_belt = client.frame_pose("belt_link")
        say("belt: belt pose from /tf_static (registration not run)")
    T_belt_optical = invert_transform(T_world_belt) @ T_world_base @ T_base_optical
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
