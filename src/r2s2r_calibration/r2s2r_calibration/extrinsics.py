"""Camera extrinsics: a fixed camera from a board at known poses, and hand-eye calibration.

Conventions: ``T_a_b`` is the pose of frame ``b`` in frame ``a`` (4x4, m). Cameras are their
optical frames (z forward, x right, y down). Board observations are
:class:`~r2s2r_calibration.intrinsics.BoardDetection` objects (corners with board coordinates)
from an intrinsically calibrated camera.

Both solvers start from a closed-form estimate and refine by minimising the board corner
reprojection error over all views (scipy ``least_squares``), which is the error the camera
actually measures; they report the RMS in px and a 1-sigma uncertainty of the pose from the
Jacobian. Hand-eye uses the Park & Martin closed form (``AX = XB``), because OpenCV 5's Python
bindings do not expose ``cv2.calibrateHandEye``; the refinement makes the result independent of
the closed form's noise sensitivity.

Generic model shared by both hand-eye set-ups, with ``F_i = T_base_flange_i`` from forward
kinematics and ``C_i = T_camera_board_i``::

    C_i = inv(X) @ A_i @ Y
    eye-in-hand (camera on the flange, board fixed):  X = T_flange_camera, A_i = inv(F_i),
                                                      Y = T_base_board
    eye-to-hand (camera fixed, board on the flange):  X = T_base_camera,   A_i = F_i,
                                                      Y = T_flange_board
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import cv2
import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.transforms import invert_transform
from scipy.optimize import least_squares
from scipy.spatial.transform import Rotation

from r2s2r_calibration.errors import (
    DegenerateMotionError,
    ResidualTooLargeError,
    TooFewViewsError,
)
from r2s2r_calibration.geometry import (
    FloatArray,
    make_pose,
    pose_from_rvec_tvec,
    rvec_tvec_from_pose,
)
from r2s2r_calibration.intrinsics import BoardDetection, board_pose_in_camera


class ExtrinsicsConfig(ConfigModel):
    """Acceptance thresholds of the extrinsic calibrations."""

    min_views_static: int = Field(
        1, ge=1, le=1000, description="Board views needed for a fixed camera (known board)."
    )
    min_poses_hand_eye: int = Field(
        5, ge=3, le=1000, description="Robot poses (views) needed for hand-eye calibration."
    )
    min_rotation_spread_rad: float = Field(
        0.15,
        ge=0.0,
        le=3.2,
        description="Hand-eye: relative flange rotations must spread at least this much about "
        "a second axis (rad).",
    )
    max_rms_px: float = Field(
        1.0, gt=0.0, le=50.0, description="Refuse a result with a larger reprojection RMS (px)."
    )


@dataclass
class CameraPoseResult:
    """A fixed camera's pose in a parent frame.

    Attributes:
        T_parent_camera: Pose of the camera optical frame in the parent frame.
        rms_px: Reprojection RMS over all corners (px).
        per_view_rms_px: Reprojection RMS of each view (px).
        translation_std_m: 1-sigma translation uncertainty per axis (m).
        rotation_std_rad: 1-sigma rotation uncertainty per axis (rad).
        n_views: Number of views used.
        n_points: Number of corners used.

    """

    T_parent_camera: FloatArray
    rms_px: float
    per_view_rms_px: FloatArray
    translation_std_m: FloatArray
    rotation_std_rad: FloatArray
    n_views: int
    n_points: int


@dataclass
class HandEyeResult:
    """Hand-eye calibration result (see the module docstring for X and Y).

    Attributes:
        X: ``T_flange_camera`` (eye-in-hand) or ``T_base_camera`` (eye-to-hand).
        Y: ``T_base_board`` (eye-in-hand) or ``T_flange_board`` (eye-to-hand).
        eye_in_hand: Which set-up was solved.
        rms_px: Reprojection RMS over all corners (px).
        per_view_rms_px: Reprojection RMS of each view (px).
        translation_std_m: 1-sigma uncertainty of X's translation per axis (m).
        rotation_std_rad: 1-sigma uncertainty of X's rotation per axis (rad).
        rotation_spread_rad: Second-axis spread of the flange rotations (rad), the excitation.
        n_views: Number of views used.
        n_points: Number of corners used.
        covariance_x: (6, 6) covariance of X's parameters (rotation vector, translation, in
            the parent frame), with their correlations: a camera's pointing and position errors
            are correlated, so that what it sees far from the board extrapolates them.

    """

    X: FloatArray
    Y: FloatArray
    eye_in_hand: bool
    rms_px: float
    per_view_rms_px: FloatArray
    translation_std_m: FloatArray
    rotation_std_rad: FloatArray
    rotation_spread_rad: float
    n_views: int
    n_points: int
    covariance_x: FloatArray | None = None


def _pose_from_params(params: FloatArray) -> FloatArray:
    return pose_from_rvec_tvec(params[:3], params[3:6])


def _params_from_pose(pose: FloatArray) -> FloatArray:
    rvec, tvec = rvec_tvec_from_pose(pose)
    return np.concatenate([rvec, tvec])


def pose_from_params(params: FloatArray) -> FloatArray:
    """Return the pose of (rotation vector, translation) parameters (as in ``covariance_x``)."""
    return _pose_from_params(np.asarray(params, dtype=float))


def params_from_pose(pose: FloatArray) -> FloatArray:
    """Return the (rotation vector, translation) parameters of a pose."""
    return _params_from_pose(np.asarray(pose, dtype=float))


def _mean_pose(poses: list[FloatArray]) -> FloatArray:
    rotation = Rotation.from_matrix(np.array([p[:3, :3] for p in poses])).mean().as_matrix()
    return make_pose(rotation, np.mean([p[:3, 3] for p in poses], axis=0))


def _reprojection(
    T_camera_board: FloatArray,
    detection: BoardDetection,
    camera_matrix: FloatArray,
    distortion: FloatArray,
) -> FloatArray:
    rvec, tvec = rvec_tvec_from_pose(T_camera_board)
    projected, _ = cv2.projectPoints(
        detection.object_points_m, rvec, tvec, camera_matrix, distortion
    )
    return np.asarray(projected.reshape(-1, 2) - detection.image_points_px).ravel()


def _covariance(jacobian: FloatArray, residual: FloatArray, n_params: int) -> FloatArray:
    """Gauss-Newton parameter covariance of a least-squares fit."""
    dof = max(residual.size - n_params, 1)
    variance = float(residual @ residual) / dof
    information = jacobian.T @ jacobian
    return np.asarray(np.linalg.pinv(information) * variance)


def _pose_std(jacobian: FloatArray, residual: FloatArray, n_params: int) -> FloatArray:
    """1-sigma parameter std from a least-squares Jacobian (Gauss-Newton covariance)."""
    covariance = _covariance(jacobian, residual, n_params)
    return np.asarray(np.sqrt(np.clip(np.diag(covariance), 0.0, None)))


def _per_view_rms(residual: FloatArray, counts: list[int]) -> FloatArray:
    rms = []
    start = 0
    for count in counts:
        chunk = residual[start : start + 2 * count]
        rms.append(np.sqrt(np.mean(chunk**2) * 2.0))
        start += 2 * count
    return np.asarray(rms)


def calibrate_static_camera(
    T_parent_board: list[FloatArray],
    detections: list[BoardDetection],
    camera_matrix: FloatArray,
    distortion: FloatArray,
    config: ExtrinsicsConfig | None = None,
) -> CameraPoseResult:
    """Pose of a fixed camera from views of a board at known poses in the parent frame.

    Use it for the head camera in ``base_link`` with the board on a known fixture, or on the
    flange with a known mount (then ``T_parent_board = T_base_flange @ T_flange_board``).

    Args:
        T_parent_board: Known board pose of each view in the parent frame.
        detections: Board detections, one per view.
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        config: Thresholds; defaults to :class:`ExtrinsicsConfig`.

    Returns:
        ``T_parent_camera`` with its residual and uncertainty.

    Raises:
        ValueError: If the two lists differ in length.
        TooFewViewsError: If there are fewer than ``min_views_static`` views.
        ResidualTooLargeError: If the reprojection RMS exceeds ``max_rms_px``.

    """
    cfg = config or ExtrinsicsConfig()
    if len(T_parent_board) != len(detections):
        raise ValueError(
            f"{len(T_parent_board)} board poses but {len(detections)} detections; expected one "
            "known board pose per view"
        )
    if len(detections) < cfg.min_views_static:
        raise TooFewViewsError(
            f"{len(detections)} board views (need {cfg.min_views_static}); capture more views"
        )
    K = np.asarray(camera_matrix, dtype=float)
    dist = np.asarray(distortion, dtype=float).reshape(-1)
    initial = _mean_pose(
        [
            T_board @ invert_transform(board_pose_in_camera(detection, K, dist)[0])
            for T_board, detection in zip(T_parent_board, detections, strict=True)
        ]
    )

    def residual(params: FloatArray) -> FloatArray:
        T_camera_parent = invert_transform(_pose_from_params(params))
        return np.concatenate(
            [
                _reprojection(T_camera_parent @ T_board, detection, K, dist)
                for T_board, detection in zip(T_parent_board, detections, strict=True)
            ]
        )

    solution = least_squares(residual, _params_from_pose(initial), method="lm", x_scale="jac")
    counts = [len(d.charuco_ids) for d in detections]
    rms = float(np.sqrt(np.mean(solution.fun**2) * 2.0))
    std = _pose_std(solution.jac, solution.fun, 6)
    if rms > cfg.max_rms_px:
        raise ResidualTooLargeError(
            f"camera pose reprojection RMS {rms:.3f} px exceeds max_rms_px = {cfg.max_rms_px}; "
            "check the known board poses (frame, units) and the intrinsics"
        )
    return CameraPoseResult(
        T_parent_camera=_pose_from_params(solution.x),
        rms_px=rms,
        per_view_rms_px=_per_view_rms(solution.fun, counts),
        translation_std_m=std[3:6],
        rotation_std_rad=std[:3],
        n_views=len(detections),
        n_points=int(sum(counts)),
    )


def rotation_spread_rad(poses: list[FloatArray]) -> float:
    """Second-axis spread of the relative rotations between all pairs of poses (rad).

    The square root of the second-largest eigenvalue of the mean outer product of the relative
    rotation vectors: zero when every motion turns about one axis (hand-eye is then
    degenerate), large when the motions turn about two or more axes.
    """
    vectors = [
        Rotation.from_matrix(poses[i][:3, :3] @ poses[j][:3, :3].T).as_rotvec()
        for i, j in combinations(range(len(poses)), 2)
    ]
    if not vectors:
        return 0.0
    stacked = np.asarray(vectors)
    eigenvalues = np.linalg.eigvalsh(stacked.T @ stacked / len(stacked))
    return float(np.sqrt(max(eigenvalues[-2], 0.0)))


def _park_martin(A: list[FloatArray], C: list[FloatArray]) -> FloatArray:
    """Closed-form X of ``A_ij X = X B_ij`` with A_ij = A_i inv(A_j), B_ij = C_i inv(C_j)."""
    alphas, betas, pairs = [], [], []
    for i, j in combinations(range(len(A)), 2):
        A_ij = A[i] @ invert_transform(A[j])
        B_ij = C[i] @ invert_transform(C[j])
        alpha = Rotation.from_matrix(A_ij[:3, :3]).as_rotvec()
        beta = Rotation.from_matrix(B_ij[:3, :3]).as_rotvec()
        if np.linalg.norm(alpha) < 1e-3:
            continue
        alphas.append(alpha)
        betas.append(beta)
        pairs.append((A_ij, B_ij))
    # R_X = argmin sum |alpha - R beta|^2 (Kabsch on rotation axes scaled by angle).
    cross = np.asarray(alphas).T @ np.asarray(betas)
    u, _, vt = np.linalg.svd(cross)
    sign = np.sign(np.linalg.det(u @ vt))
    rotation = u @ np.diag([1.0, 1.0, sign]) @ vt
    lhs = np.vstack([A_ij[:3, :3] - np.eye(3) for A_ij, _ in pairs])
    rhs = np.concatenate([rotation @ B_ij[:3, 3] - A_ij[:3, 3] for A_ij, B_ij in pairs])
    translation = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    return make_pose(rotation, translation)


def calibrate_hand_eye(
    T_base_flange: list[FloatArray],
    detections: list[BoardDetection],
    camera_matrix: FloatArray,
    distortion: FloatArray,
    eye_in_hand: bool = True,
    config: ExtrinsicsConfig | None = None,
) -> HandEyeResult:
    """Hand-eye calibration from robot poses (forward kinematics) and board views.

    Args:
        T_base_flange: Flange pose of each view in ``base_link`` (from ``/joint_states`` + FK).
        detections: Board detections, one per view.
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        eye_in_hand: True for a camera on the flange looking at a fixed board, False for a
            fixed camera looking at a board carried by the flange.
        config: Thresholds; defaults to :class:`ExtrinsicsConfig`.

    Returns:
        X and Y (module docstring) with residuals and uncertainty.

    Raises:
        ValueError: If the two lists differ in length.
        TooFewViewsError: If there are fewer than ``min_poses_hand_eye`` views.
        DegenerateMotionError: If the flange rotations do not turn about two axes.
        ResidualTooLargeError: If the reprojection RMS exceeds ``max_rms_px``.

    """
    cfg = config or ExtrinsicsConfig()
    if len(T_base_flange) != len(detections):
        raise ValueError(
            f"{len(T_base_flange)} flange poses but {len(detections)} detections; expected one "
            "flange pose per view"
        )
    if len(detections) < cfg.min_poses_hand_eye:
        raise TooFewViewsError(
            f"{len(detections)} robot poses with the board detected (need "
            f"{cfg.min_poses_hand_eye}); add poses that keep the board in view"
        )
    spread = rotation_spread_rad(T_base_flange)
    if spread < cfg.min_rotation_spread_rad:
        raise DegenerateMotionError(
            f"flange rotations spread {np.degrees(spread):.1f} deg about a second axis (need "
            f">= {np.degrees(cfg.min_rotation_spread_rad):.1f} deg); add poses rotated about "
            "at least two different axes"
        )
    K = np.asarray(camera_matrix, dtype=float)
    dist = np.asarray(distortion, dtype=float).reshape(-1)
    A = [invert_transform(F) if eye_in_hand else np.asarray(F, float) for F in T_base_flange]
    C = [board_pose_in_camera(detection, K, dist)[0] for detection in detections]
    X0 = _park_martin(A, C)
    Y0 = _mean_pose([invert_transform(A_i) @ X0 @ C_i for A_i, C_i in zip(A, C, strict=True)])

    def residual(params: FloatArray) -> FloatArray:
        X_inv = invert_transform(_pose_from_params(params[:6]))
        Y = _pose_from_params(params[6:])
        return np.concatenate(
            [
                _reprojection(X_inv @ A_i @ Y, detection, K, dist)
                for A_i, detection in zip(A, detections, strict=True)
            ]
        )

    start = np.concatenate([_params_from_pose(X0), _params_from_pose(Y0)])
    solution = least_squares(residual, start, method="lm", x_scale="jac")
    counts = [len(d.charuco_ids) for d in detections]
    rms = float(np.sqrt(np.mean(solution.fun**2) * 2.0))
    covariance = _covariance(solution.jac, solution.fun, 12)
    std = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    if rms > cfg.max_rms_px:
        raise ResidualTooLargeError(
            f"hand-eye reprojection RMS {rms:.3f} px exceeds max_rms_px = {cfg.max_rms_px}; "
            "check that the flange poses and images are time-aligned and the board is rigid"
        )
    return HandEyeResult(
        X=_pose_from_params(solution.x[:6]),
        Y=_pose_from_params(solution.x[6:]),
        eye_in_hand=eye_in_hand,
        rms_px=rms,
        per_view_rms_px=_per_view_rms(solution.fun, counts),
        translation_std_m=std[3:6],
        rotation_std_rad=std[:3],
        rotation_spread_rad=spread,
        n_views=len(detections),
        n_points=int(sum(counts)),
        covariance_x=covariance[:6, :6],
    )
