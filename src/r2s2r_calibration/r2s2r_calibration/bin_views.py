"""Bin poses from hand-camera views of their rims (x, y and yaw to a millimetre / 0.1 deg).

The head depth camera sees each bin from 2-3 m through ~150 depth pixels: enough to find it
within a few mm and ~0.5 deg, which is what the registration step gives. The robot can do better
by looking: it moves the hand camera ``camera_height_m`` above each bin, looking straight down,
once per entry of ``rolls_rad`` (two opposite camera rolls by default, so that a hand-eye
translation error shifts the two views in opposite directions and cancels in the fit). From
above, the outer edge of a bin's rim is a sharp boundary between the bin's colour and the table's;
:func:`rim_edge_points` finds it to a fraction of a pixel along profiles across the predicted
edges, and :func:`fit_bin_pose` intersects the edge rays with the rim's plane and fits x, y and
yaw so that the points lie on the rim's outer rectangle. Height, roll and pitch stay as the
registration left them (a bin stands on the table).

Everything comes from images, ``/joint_states`` (through the nominal arm kinematics) and the
calibrated hand camera (intrinsics and hand-eye from the board steps); the description gives the
bin's shape.

On hardware: the arm moves between the views as in the board steps (joint-space moves at
``board_steps.move_s``, nominal IK), so the space above the bins must be clear of people and
objects, and the bins empty (an object inside does not disturb the rim edges, one on the rim
does).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_sim.kinematics import IkError, PalmIk
from r2s2r_sim.world import WorldParams
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from r2s2r_calibration.artifact import Provenance, ScenePoseRecord, pose_value
from r2s2r_calibration.bin_config import BinViewsConfig
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.geometry import FloatArray, invert_pose, look_at_pose
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig, ProgressFn
from r2s2r_calibration.registration import element_bounds
from r2s2r_calibration.step_support import (
    T_LINK_OPTICAL,
    camera_intrinsics,
    move_arm,
    scene_elements,
)

EDGE_NAMES = ("+x", "-x", "+y", "-y")
"""The rim's outer edges, by the bin-frame side they lie on."""


@dataclass(frozen=True)
class RimGeometry:
    """A bin's rim in its own frame: outer rectangle ``|x| <= half_x``, ``|y| <= half_y``.

    Attributes:
        centre_xy_m: Rectangle centre in the bin frame (m).
        half_x_m: Half the outer size along bin x (m).
        half_y_m: Half the outer size along bin y (m).
        height_m: Rim (wall top) height above the bin frame's origin (m).

    """

    centre_xy_m: tuple[float, float]
    half_x_m: float
    half_y_m: float
    height_m: float

    @classmethod
    def from_bounds(cls, lower: FloatArray, upper: FloatArray) -> RimGeometry:
        """Rim of an element whose boxes span ``lower``..``upper`` (bin frame, m)."""
        centre = 0.5 * (np.asarray(lower) + np.asarray(upper))
        half = 0.5 * (np.asarray(upper) - np.asarray(lower))
        return cls((float(centre[0]), float(centre[1])), float(half[0]), float(half[1]),
                   float(upper[2]))  # fmt: skip

    def edge_points(self, edge: str, fraction: float, count: int) -> FloatArray:
        """``count`` points (bin frame) spread over the central ``fraction`` of an edge."""
        cx, cy = self.centre_xy_m
        s = np.linspace(-0.5 * fraction, 0.5 * fraction, count)
        z = np.full(count, self.height_m)
        if edge in ("+x", "-x"):
            x = cx + (self.half_x_m if edge == "+x" else -self.half_x_m)
            return np.column_stack([np.full(count, x), cy + 2.0 * self.half_y_m * s, z])
        y = cy + (self.half_y_m if edge == "+y" else -self.half_y_m)
        return np.column_stack([cx + 2.0 * self.half_x_m * s, np.full(count, y), z])


@dataclass
class RimView:
    """One hand-camera image of a bin.

    Attributes:
        image: RGB image (H, W, 3) uint8.
        camera_matrix: 3x3 K of the hand camera (px).
        distortion: (k1, k2, p1, p2, k3).
        T_base_optical: Hand camera optical frame in ``base_link`` when the image was taken.
        stamp_s: Image stamp (s).

    """

    image: npt.NDArray[np.uint8]
    camera_matrix: FloatArray
    distortion: FloatArray
    T_base_optical: FloatArray
    stamp_s: float


@dataclass
class RimEdges:
    """Sub-pixel rim edge points found in one view.

    Attributes:
        pixels: (N, 2) edge points (px, distorted image).
        edges: (N,) index into :data:`EDGE_NAMES` of the edge each point lies on.
        profiles: Profiles tried.

    """

    pixels: FloatArray
    edges: npt.NDArray[np.int_]
    profiles: int


@dataclass
class BinFit:
    """Refined bin pose.

    Attributes:
        T_base_bin: Bin pose in ``base_link`` (x, y, yaw refined; the rest as given).
        rms_m: In-plane RMS distance of the edge points to the rim (m).
        n_points: Edge points used, per edge name.
        coverage: Fraction of profiles that found an edge.
        std_xy_yaw: 1-sigma of x, y (m) and yaw (rad) from the fit's Jacobian.
        correction_m: Distance moved from the initial pose (m).
        observability: Weakest / strongest eigenvalue of the fit's information (yaw scaled by
            the rim size).

    """

    T_base_bin: FloatArray
    rms_m: float
    n_points: dict[str, int]
    coverage: float
    std_xy_yaw: tuple[float, float, float]
    correction_m: float
    observability: float


def view_poses(T_world_bin: FloatArray, rim: RimGeometry, cfg: BinViewsConfig) -> list[FloatArray]:
    """``T_world_optical`` of each view: straight down at the rim's centre, one per roll."""
    centre = T_world_bin @ np.array([*rim.centre_xy_m, rim.height_m, 1.0])
    eye = centre[:3] + np.array([0.0, 0.0, cfg.camera_height_m])
    yaw = float(np.arctan2(T_world_bin[1, 0], T_world_bin[0, 0]))
    return [
        look_at_pose(eye, centre[:3], [np.cos(yaw + roll), np.sin(yaw + roll), 0.0])
        for roll in cfg.rolls_rad
    ]


def _signal(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """Bin-vs-table signal: green minus red (0..1).

    It is linear in the pixel colours, so a blurred edge crosses halfway between the plateaus
    where the edge is.
    """
    rgb = image.astype(np.float32) / 255.0
    return np.ascontiguousarray(rgb[..., 1] - rgb[..., 0])


def rim_edge_points(view: RimView, T_base_bin: FloatArray, rim: RimGeometry,
                    cfg: BinViewsConfig) -> RimEdges:  # fmt: skip
    """Find the rim's outer edges in one view, along profiles across the predicted edges.

    Each profile runs from inside the rim (bin colour) to outside (table) through the edge
    predicted from ``T_base_bin``; the edge is where the signal crosses halfway between the two
    levels: the rim top just inside (its brightest sample within ``inside_px``) and the table
    just outside (``outside_from_px``..``outside_to_px``), found by linear interpolation.
    Profiles without a clear step (``min_contrast``) or that leave the image give no point.
    """
    signal = _signal(view.image)
    height, width = signal.shape
    T_optical_bin = invert_pose(view.T_base_optical) @ T_base_bin
    rvec = cv2.Rodrigues(T_optical_bin[:3, :3])[0]
    tvec = T_optical_bin[:3, 3]
    offsets = np.arange(
        -cfg.profile_half_length_px, cfg.profile_half_length_px + 1e-9, cfg.profile_step_px
    )
    inner = max(1, round(cfg.inside_px / cfg.profile_step_px))
    outer_from = max(1, round(cfg.outside_from_px / cfg.profile_step_px))
    outer_to = max(outer_from + 1, round(cfg.outside_to_px / cfg.profile_step_px))
    pixels, edges = [], []
    tried = 0
    centre_local = np.array([*rim.centre_xy_m, rim.height_m])
    for index, edge in enumerate(EDGE_NAMES):
        local = rim.edge_points(edge, cfg.edge_fraction, cfg.profiles_per_edge)
        outward = local.copy()
        direction = np.sign(local[0] - centre_local) * (np.array([1, 0, 0]) if "x" in edge else
                                                        np.array([0, 1, 0]))  # fmt: skip
        outward += 0.005 * direction
        both = np.vstack([local, outward])
        projected = cv2.projectPoints(both, rvec, tvec, view.camera_matrix, view.distortion)[0]
        projected = projected.reshape(-1, 2)
        on_edge, beyond = projected[: len(local)], projected[len(local) :]
        for point, out in zip(on_edge, beyond, strict=True):
            tried += 1
            normal = out - point
            norm = float(np.linalg.norm(normal))
            if norm < 1e-9:
                continue
            normal /= norm
            samples = point[None, :] + offsets[:, None] * normal[None, :]
            if (
                samples.min() < 1.0
                or samples[:, 0].max() > width - 2.0
                or samples[:, 1].max() > height - 2.0
            ):
                continue
            values = cv2.remap(
                signal,
                samples[:, 0].astype(np.float32).reshape(1, -1),
                samples[:, 1].astype(np.float32).reshape(1, -1),
                cv2.INTER_LINEAR,
            ).reshape(-1)
            # Outside: the table just past the predicted edge (a neighbouring bin may come
            # further out). Inside: the rim's top, the first bright bin colour met walking in
            # from the table (the inner wall beyond the rim may be in shade, and the floor
            # further in makes a second, inner edge that must not be taken).
            centre_index = len(offsets) // 2
            outside = float(np.median(values[centre_index + outer_from : centre_index + outer_to]))
            k = centre_index + outer_from
            lowest = max(0, centre_index - inner)
            while k > lowest and values[k] < outside + cfg.min_contrast:
                k -= 1
            while k > lowest and values[k - 1] > values[k]:
                k -= 1
            inside = float(values[k])
            if inside - outside < cfg.min_contrast:
                continue
            half = 0.5 * (inside + outside)
            tail = values[k:]
            below = np.nonzero((tail[:-1] >= half) & (tail[1:] < half))[0]
            if below.size == 0:
                continue
            k += int(below[0])
            fraction = (values[k] - half) / (values[k] - values[k + 1])
            offset = offsets[k] + fraction * cfg.profile_step_px
            if abs(offset) > cfg.profile_half_length_px - cfg.outside_to_px:
                continue  # the edge is too far from the prediction to trust the plateaus
            pixels.append(point + offset * normal)
            edges.append(index)
    return RimEdges(
        np.asarray(pixels, dtype=float).reshape(-1, 2), np.asarray(edges, dtype=int), tried
    )


def _rays_base(view: RimView, pixels: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Ray origins and unit directions in ``base_link`` through distorted pixels."""
    normalised = cv2.undistortPoints(
        pixels.reshape(-1, 1, 2).astype(np.float64), view.camera_matrix, view.distortion
    ).reshape(-1, 2)
    rays = np.column_stack([normalised, np.ones(len(normalised))]).astype(float)
    directions = rays / np.linalg.norm(rays, axis=1, keepdims=True)
    R, t = view.T_base_optical[:3, :3], view.T_base_optical[:3, 3]
    return np.tile(t, (len(directions), 1)), directions @ R.T


def _with_xy_yaw(T_base_bin: FloatArray, params: FloatArray) -> FloatArray:
    """``T_base_bin`` moved by (dx, dy) in base_link and turned by dyaw about its own z."""
    T = T_base_bin.copy()
    T[:3, :3] = T_base_bin[:3, :3] @ Rotation.from_rotvec([0.0, 0.0, params[2]]).as_matrix()
    T[:2, 3] += params[:2]
    return T


def fit_bin_pose(views: list[RimView], found: list[RimEdges], T_base_bin: FloatArray,
                 rim: RimGeometry, cfg: BinViewsConfig) -> BinFit:  # fmt: skip
    """Fit the bin's x, y and yaw to the rim edge points of every view.

    Each edge point's ray is intersected with the rim's plane (at the bin's current height and
    tilt); the residual is the intersection's distance from its edge line, in the rim plane.

    Raises:
        CalibrationError: Too few points on an edge, an RMS above ``max_rms_m`` or a
            correction above ``max_correction_m``.

    """
    origins, directions, edge_index = [], [], []
    for view, edges in zip(views, found, strict=True):
        if len(edges.pixels) == 0:
            continue
        o, d = _rays_base(view, edges.pixels)
        origins.append(o)
        directions.append(d)
        edge_index.append(edges.edges)
    counts = {name: 0 for name in EDGE_NAMES}
    if edge_index:
        stacked = np.concatenate(edge_index)
        counts = {name: int(np.sum(stacked == k)) for k, name in enumerate(EDGE_NAMES)}
    short = [f"{name} {n}" for name, n in counts.items() if n < cfg.min_points_per_edge]
    if short:
        raise CalibrationError(
            f"rim edges found on too few profiles ({', '.join(short)}; need "
            f"{cfg.min_points_per_edge} per edge): the rim is not fully in view, or the bin is "
            "far from where the registration put it; check the hand camera calibration"
        )
    ray_origins, ray_directions = np.vstack(origins), np.vstack(directions)
    E = np.concatenate(edge_index)
    axis = np.where(E < 2, 0, 1)
    sign = np.where(E % 2 == 0, 1.0, -1.0)
    half = np.where(axis == 0, rim.half_x_m, rim.half_y_m)
    centre = np.asarray(rim.centre_xy_m)[axis]

    def residuals(params: FloatArray) -> FloatArray:
        T = _with_xy_yaw(T_base_bin, params)
        normal, point = T[:3, 2], T[:3, :3] @ np.array([0.0, 0.0, rim.height_m]) + T[:3, 3]
        lam = ((point - ray_origins) @ normal) / (ray_directions @ normal)
        hits = ray_origins + lam[:, None] * ray_directions
        local = (hits - T[:3, 3]) @ T[:3, :3]
        return np.asarray(sign * (local[np.arange(len(local)), axis] - centre) - half)

    keep = np.ones(len(E), dtype=bool)
    params = np.zeros(3)
    for _ in range(4):  # robust fit, then drop points far off the rim (a mis-detected edge)
        result = least_squares(
            lambda p, kept=keep: residuals(p)[kept],
            params,
            loss="soft_l1",
            f_scale=cfg.residual_scale_m,
            x_scale=[1e-3, 1e-3, 1e-2],
        )
        params = result.x
        everything = np.abs(residuals(params))
        scale = max(1.4826 * float(np.median(everything[keep])), 0.1 * cfg.residual_scale_m)
        new_keep = everything < cfg.outlier_sigmas * scale
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    final = residuals(result.x)[keep]
    rms = float(np.sqrt(np.mean(final**2)))
    T_fit = _with_xy_yaw(T_base_bin, result.x)
    correction = float(np.linalg.norm(result.x[:2]))
    if rms > cfg.max_rms_m:
        raise CalibrationError(
            f"rim fit RMS {1000 * rms:.2f} mm exceeds max_rms_m = {cfg.max_rms_m}: the edges "
            "found do not form the rim's rectangle (another object in view, or a wrong bin size "
            "in the description)"
        )
    if correction > cfg.max_correction_m:
        raise CalibrationError(
            f"the rim fit moves the bin {1000 * correction:.1f} mm from the registration (more "
            f"than max_correction_m = {cfg.max_correction_m}); the views may show another bin"
        )
    jacobian = result.jac
    try:
        covariance = np.linalg.inv(jacobian.T @ jacobian) * rms**2
        std = tuple(float(v) for v in np.sqrt(np.clip(np.diag(covariance), 0.0, None)))
    except np.linalg.LinAlgError:
        std = (float("inf"),) * 3
    tried = sum(edges.profiles for edges in found)
    return BinFit(
        T_base_bin=T_fit,
        rms_m=rms,
        n_points=counts,
        coverage=float(np.count_nonzero(keep) / max(tried, 1)),
        std_xy_yaw=std,  # type: ignore[arg-type]
        correction_m=correction,
        observability=_observability(jacobian, rim),
    )


def _observability(jacobian: FloatArray, rim: RimGeometry) -> float:
    """Weakest / strongest eigenvalue of the fit's information, yaw scaled to the rim size."""
    scaled = jacobian * np.array([1.0, 1.0, 1.0 / max(rim.half_x_m, rim.half_y_m)])
    eigenvalues = np.linalg.eigvalsh(scaled.T @ scaled)
    return float(eigenvalues[0] / eigenvalues[-1]) if eigenvalues[-1] > 0.0 else 0.0


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
    registered pose; the step fails only when no bin could be refined.

    Raises:
        CalibrationError: Every bin was refused.

    """
    cfg = config.bin_views
    board_cfg = config.board_steps
    layout = nominal.layout()
    camera, note = camera_intrinsics(client, run.artifact, "hand")
    K, D = camera.camera_matrix, camera.distortion
    if note:
        say(f"bins: {note}")
    record = run.artifact.cameras.get("hand")
    if record is not None and record.pose is not None:
        T_palm_link = record.pose.pose.matrix()
    else:
        T_palm_link = layout.hand_camera_pose.matrix()
        say("bins: hand camera mount from the description (uncalibrated)")
    T_palm_optical = T_palm_link @ T_LINK_OPTICAL
    T_world_base = client.frame_pose("base_link")
    T_base_world = invert_pose(T_world_base)
    T_base_world_kinematics = invert_pose(nominal.robot.base_pose.to_pose().matrix())
    ik = PalmIk(layout, "hand_camera_optical_frame")
    fk = PalmIk(layout, "palm_link")
    home = np.asarray(client.joint_positions(), dtype=float)[: len(ARM_JOINT_NAMES)]
    elements = scene_elements(nominal, list(nominal.bins))
    failures: dict[str, str] = {}
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
            rim = RimGeometry.from_bounds(*element_bounds(element))
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
                    "hand_camera", client.now_s() + board_cfg.frame_delay_s
                )
                T_base_palm = T_base_world_kinematics @ fk.forward(measured)
                views.append(RimView(image, K, D, T_base_palm @ T_palm_optical, stamp))
            try:
                if not views:
                    raise CalibrationError("no view of it was reachable")
                found = [rim_edge_points(view, T_base_bin, rim, cfg) for view in views]
                fit = fit_bin_pose(views, found, T_base_bin, rim, cfg)
            except CalibrationError as error:
                failures[name] = str(error)
                say(f"bins: {name}: refused, keeping the registered pose: {error}")
                continue
            held = scene.held_at_nominal if scene is not None else []
            run.artifact.scene[name] = ScenePoseRecord(
                pose=pose_value(T_world_base @ fit.T_base_bin, "world", f"{name}_link"),
                fitness=fit.coverage,
                inlier_rmse_m=fit.rms_m,
                observability=fit.observability,
                provenance=Provenance(
                    source=client.source,
                    start_stamp_s=min(view.stamp_s for view in views),
                    end_stamp_s=max(view.stamp_s for view in views),
                    n_samples=int(sum(fit.n_points.values())),
                    sample_kind="rim edge points (hand camera) + joint states",
                    solver="hand-camera rim edges, robust ray-plane fit of x, y, yaw "
                    "(bin_views.fit_bin_pose); height, roll, pitch from the registration",
                ),
                held_at_nominal=list(held),
            )
            refined += 1
            std_x, std_y, std_yaw = fit.std_xy_yaw
            say(
                f"bins: {name}: moved {1000 * fit.correction_m:.1f} mm and "
                f"{np.degrees(_yaw_change(T_base_bin, fit.T_base_bin)):+.2f} deg from the "
                f"registration, rms {1000 * fit.rms_m:.2f} mm over {sum(fit.n_points.values())} "
                f"edge points in {len(views)} views, std {1000 * std_x:.2f}/{1000 * std_y:.2f} mm "
                f"{np.degrees(std_yaw):.3f} deg"
            )
    finally:
        move_arm(client, home, board_cfg, config.command_lead_s)
    if refined == 0:
        raise CalibrationError(
            "bins: no bin could be refined from the hand camera (registered poses kept): "
            + "; ".join(f"{name}: {message}" for name, message in failures.items())
        )


def _yaw_change(T_from: FloatArray, T_to: FloatArray) -> float:
    relative = T_from[:3, :3].T @ T_to[:3, :3]
    return float(np.arctan2(relative[1, 0], relative[0, 0]))
