"""Scene steps of the grounding procedure: ``registration`` (head depth) and ``bins`` (hand views).

- ``registration``: belt and bin poses from one head depth image (:mod:`..registration`), with
  the head camera's intrinsics and pose from the artifact when calibrated, else the nominal ones.
- ``bins``: each bin's x, y and yaw refined from hand-camera views of its rim (the algorithm is
  :mod:`..bin_views`). On hardware the arm moves between the views as in the board steps
  (joint-space moves at ``board_steps.move_s``, nominal IK), so the space above the bins must be
  clear of people and objects, and the bins empty (an object inside does not disturb the rim
  edges, one on the rim does).
"""

from __future__ import annotations

import cv2
import numpy as np
from r2s2r_common.camera_model import CameraModel
from r2s2r_description.cameras import HAND, HEAD
from r2s2r_description.frames import BASE_LINK, PALM_LINK, WORLD_FRAME
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_description.transforms import invert_transform
from r2s2r_world.cell_identity import identity_from_depth
from r2s2r_world.kinematics import IkError, PalmIk
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import Provenance, ScenePoseRecord, pose_value, scene_record
from r2s2r_calibration.bin_views import (
    RimGeometry,
    RimView,
    refine_bin_pose_or_soft_edges,
    rim_intervals,
    view_poses,
    yaw_change,
)
from r2s2r_calibration.cell_client import CellClient, npt_float32
from r2s2r_calibration.errors import CalibrationError, RegistrationError
from r2s2r_calibration.extrinsics import params_from_pose, pose_from_params
from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig, ProgressFn
from r2s2r_calibration.registration.faces import element_bounds
from r2s2r_calibration.registration.register import ElementRegistration, register_scene_elements
from r2s2r_calibration.step_support import (
    T_LINK_OPTICAL,
    camera_intrinsics,
    head_camera,
    move_arm,
    scene_elements,
)
from r2s2r_calibration.uncertainty import UncertaintyConfig, carried_covariance, pose_intervals


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
        for r in run.camera_replicates.get(HEAD.name, [])
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
    mount = run.mount_fits.get(HEAD.name)
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
    camera, T_base_optical, notes = head_camera(client, run.artifact)
    for note in notes:
        say(f"registration: {note}")
    stamp, depth = client.capture_depth()
    # The static scene this depth image shows identifies the cell (r2s2r_world.cell_identity).
    run.artifact.cell = identity_from_depth(depth, stamp, config.cell_name, HEAD.name)
    say(f"registration: cell {run.artifact.cell.describe()}")
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
    T_world_base = client.frame_pose(BASE_LINK)
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


def run_bin_views(
    client: CellClient,
    nominal: WorldParams,
    config: ProcedureConfig,
    run: GroundingRun,
    say: ProgressFn,
) -> None:
    """Refine each bin's x, y and yaw from hand-camera views of its rim (procedure step ``bins``).

    Starts from the registration step's bin poses (nominal when a bin was not registered) and
    uses the calibrated hand camera of this run's artifact (``camera_info`` and the nominal
    mount otherwise, with a note). A bin whose views do not give a good fit keeps its
    registered pose, the refusal recorded in its scene record (``refinement_refused``).

    Raises:
        CalibrationError: No bin was refined, and either a refused bin has no registered pose
            (it would stay where the description draws it) or ``require_refinement`` is set.

    """
    cfg = config.bin_views
    board_cfg = config.board_steps
    layout = nominal.layout()
    camera, note = camera_intrinsics(client, run.artifact, "hand")
    K, D = camera.camera_matrix, camera.distortion
    if note:
        say(f"bins: {note}")
    record = run.artifact.cameras.get("hand")
    blur_sigma_px = record.blur.sigma_px if record is not None and record.blur is not None else None
    if blur_sigma_px is None:
        # Without the calibrated blur the edge model fits it (less exactly): the rim's apparent
        # size, and so its height, is left to the registration.
        say("bins: hand camera blur not calibrated: fitted from the rim profiles; bin heights held")
        cfg = cfg.model_copy(update={"fit_height": False})
    if record is not None and record.pose is not None:
        T_palm_link = record.pose.pose.matrix()
    else:
        T_palm_link = layout.hand_camera_pose.matrix()
        say("bins: hand camera mount from the description (uncalibrated)")
    T_palm_optical = T_palm_link @ T_LINK_OPTICAL
    T_world_base = client.frame_pose(BASE_LINK)
    T_base_world = invert_transform(T_world_base)
    T_base_world_kinematics = invert_transform(nominal.robot.base_pose.to_pose().matrix())
    ik = PalmIk(layout, HAND.optical_frame)
    fk = PalmIk(layout, PALM_LINK)
    home = np.asarray(client.joint_positions(), dtype=float)[: len(ARM_JOINT_NAMES)]
    elements = scene_elements(nominal, list(nominal.bins))
    failures: dict[str, str] = {}
    unregistered: list[str] = []
    refined = 0
    seed = home
    try:
        for element in elements:
            name = element.name
            scene = run.artifact.scene.get(name)
            T_world_bin = (
                scene.pose.matrix() if scene is not None else T_world_base @ element.nominal_pose()
            )
            if scene is None:
                say(f"bins: {name} was not registered; starting from its nominal pose")
            rim = RimGeometry.from_element(element)
            T_base_bin = T_base_world @ T_world_bin
            views: list[RimView] = []
            for T_world_optical in view_poses(T_world_bin, rim, cfg):
                try:
                    q = ik.solve(T_world_optical, seed_q=seed, max_iterations=300)
                except IkError:
                    try:
                        q = ik.solve(T_world_optical, seed_q=home, max_iterations=300)
                    except IkError:
                        say(f"bins: a view of {name} is out of reach; skipped")
                        continue
                seed = q
                move_arm(client, q, board_cfg, config.command_lead_s)
                measured = np.asarray(client.joint_positions(), dtype=float)[: len(q)]
                stamp, image = client.capture_image(
                    HAND.name, client.now_s() + board_cfg.frame_delay_s
                )
                T_base_palm = T_base_world_kinematics @ fk.forward(measured)
                views.append(RimView(image, K, D, T_base_palm @ T_palm_optical, stamp))
            try:
                if not views:
                    raise CalibrationError("no view of it was reachable")
                fit, found, used, soft_note = refine_bin_pose_or_soft_edges(
                    views, T_base_bin, rim, cfg, blur_sigma_px
                )
            except CalibrationError as error:
                failures[name] = str(error)
                if scene is None:
                    unregistered.append(name)
                    say(f"bins: {name}: refused, and it was not registered: {error}")
                else:
                    scene.refinement_refused = str(error)
                    say(f"bins: {name}: refused, keeping the registered pose: {error}")
                continue
            if soft_note:
                say(f"bins: {name}: {soft_note}")
            held = scene.held_at_nominal if scene is not None else []
            if used.fit_height:  # measured here, no longer held
                held = [text for text in held if not text.startswith(f"translation along {name} z")]
            run.artifact.scene[name] = ScenePoseRecord(
                pose=pose_value(T_world_base @ fit.T_base_bin, WORLD_FRAME, f"{name}_link"),
                fitness=fit.coverage,
                inlier_rmse_m=fit.rms_m,
                observability=fit.observability,
                provenance=Provenance(
                    source=client.source,
                    start_stamp_s=min(view.stamp_s for view in views),
                    end_stamp_s=max(view.stamp_s for view in views),
                    n_samples=int(sum(fit.n_points.values())),
                    sample_kind="rim edge points (hand camera) + joint states",
                    solver="hand-camera rim edges (blurred-edge model fits), robust ray-plane "
                    "fit of x, y, yaw"
                    + (", height" if used.fit_height else "")
                    + " (bin_views.fit_bin_pose); "
                    + ("roll, pitch" if used.fit_height else "height, roll, pitch")
                    + " from the registration",
                ),
                held_at_nominal=list(held),
            )
            if record is not None and record.intrinsics is not None and record.pose is not None:
                intervals = rim_intervals(
                    views,
                    found,
                    T_base_bin,
                    rim,
                    used,
                    fit,
                    run.camera_replicates.get(HAND.name, []),
                    T_palm_optical,
                    record.pose.translation_std_m,
                    record.pose.rotation_std_rad,
                    config.uncertainty,
                )
                refined_record = run.artifact.scene[name]
                refined_record.position_interval_95_m = intervals[0]
                refined_record.rotation_interval_95_rad = intervals[1]
            refined += 1
            std_x, std_y, std_yaw = fit.std_xy_yaw
            say(
                f"bins: {name}: moved {1000 * fit.correction_m:.1f} mm and "
                f"{np.degrees(yaw_change(T_base_bin, fit.T_base_bin)):+.2f} deg from the "
                f"registration, rms {1000 * fit.rms_m:.2f} mm over {sum(fit.n_points.values())} "
                f"edge points in {len(views)} views, std {1000 * std_x:.2f}/{1000 * std_y:.2f} mm "
                f"{np.degrees(std_yaw):.3f} deg"
                + (
                    f", height {1000 * fit.height_change_m:+.1f} +- "
                    f"{1000 * fit.height_std_m:.2f} mm"
                    if used.fit_height
                    else ""
                )
            )
    finally:
        move_arm(client, home, board_cfg, config.command_lead_s)
    if refined == 0 and failures:
        why = "; ".join(f"{name}: {message}" for name, message in failures.items())
        if unregistered or cfg.require_refinement:
            raise CalibrationError(
                "bins: no bin could be refined from the hand camera"
                + (f" and {', '.join(unregistered)} not registered" if unregistered else "")
                + f" (bin_views.require_refinement = {cfg.require_refinement}): {why}"
            )
        say(
            "bins: WARNING: no bin could be refined from the hand camera; every bin keeps its "
            "registered pose (depth registration, a few mm), the refusal recorded with it"
        )
