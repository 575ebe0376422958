"""95 % intervals of the grounded quantities: what each step's data say, and what they miss.

Every interval the artifact reports combines three parts, as independent Gaussian errors:

1. the fit's own standard error (its Jacobian and residual);
2. a **delete-a-group jackknife through the chain**: the board views of each camera are split
   into ``jackknife_groups`` groups, the intrinsics are calibrated again without each group,
   and everything computed from a camera (its mount, the scene seen by it) is computed again
   with each of those calibrations. The spread of the replicates is the uncertainty a camera
   calibration propagates downstream, with its correlations (principal point against
   tangential distortion, focal length against distortion), and it also sees errors that vary
   from view to view (corner bias on blurred, tilted boards), which the fit's standard error
   does not;
3. a model-error floor per quantity (:class:`UncertaintyConfig`): what no statistic of one
   run can reveal because it is common to all its data (e.g. how the depth image samples a
   surface). Each floor states its reason. They were set on development twins (family seeds
   100-139: with the floors at zero, the smallest floor that put 95 % of the true errors in
   their intervals, rounded up), never on the seeds the benchmark evaluates (0-19).

Nothing here imports rclpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import Field
from r2s2r_common.config import ConfigModel
from r2s2r_description.transforms import invert_transform
from scipy.spatial.transform import Rotation

from r2s2r_calibration.geometry import FloatArray

Z_95 = 1.959963984540054
"""Two-sided 95 % quantile of the standard normal distribution."""


@dataclass
class CameraReplicate:
    """One jackknife replicate of a camera's calibration.

    Attributes:
        camera_matrix: 3x3 K (px).
        distortion: (k1, k2, p1, p2, k3).
        T_parent_optical: The camera's mount solved with this K (``T_base_optical`` of the
            head camera, ``T_palm_optical`` of the hand camera), once the extrinsics ran.

    """

    camera_matrix: FloatArray
    distortion: FloatArray
    T_parent_optical: FloatArray | None = None


class UncertaintyConfig(ConfigModel):
    """How the reported 95 % intervals are built (see the module docstring)."""

    jackknife_groups: int = Field(
        6,
        ge=0,
        le=50,
        description="View groups of the delete-a-group jackknife of each camera calibration "
        "(0: no jackknife; the intervals then hold only the fits' errors and the floors).",
    )
    focal_rel_floor: float = Field(
        0.0006,
        ge=0.0,
        le=0.1,
        description="Focal length (relative): chessboard corners of squares a few pixels wide "
        "are located with a bias common to all views (cornerSubPix's window meets the "
        "neighbouring squares), which scales the board and so the focal length.",
    )
    principal_point_floor_px: float = Field(
        0.05,
        ge=0.0,
        le=10.0,
        description="Principal point (px): the same corner bias, off-centre.",
    )
    blur_rel_floor: float = Field(
        0.035,
        ge=0.0,
        le=1.0,
        description="Blur sigma (relative): the edge-spread model (Gaussian optics, square "
        "pixel, the simulator's render spread removed) is an approximation of how an image is "
        "formed, good to a few percent (development twins: +2.5-3 %, the same on every edge).",
    )
    camera_translation_floor_m: float = Field(
        0.0004,
        ge=0.0,
        le=0.1,
        description="Camera mount translation (m per axis): the board's print and mounting "
        "(a tenth of a millimetre) and corner bias.",
    )
    camera_rotation_floor_rad: float = Field(
        0.0006,
        ge=0.0,
        le=0.1,
        description="Camera mount rotation (rad per axis): corner bias common to the views, "
        "and board print scale.",
    )
    belt_position_floor_m: float = Field(
        0.0005,
        ge=0.0,
        le=0.1,
        description="Belt position across its travel and in height (m per axis): the head "
        "depth image samples the belt surface with a ray up to half a pixel off the one it is "
        "assigned to, a sawtooth of a few millimetres whose average over the seen belt is not "
        "zero.",
    )
    belt_rotation_floor_rad: float = Field(
        0.001,
        ge=0.0,
        le=0.1,
        description="Belt rotation (rad per axis): the same depth sawtooth over the belt's "
        "visible length.",
    )
    bin_position_floor_m: float = Field(
        0.0004,
        ge=0.0,
        le=0.1,
        description="Bin position (m per axis) from the rim views: the edge model's residual "
        "bias (rendered pixels against a blurred step).",
    )
    bin_rotation_floor_rad: float = Field(
        0.0007,
        ge=0.0,
        le=0.1,
        description="Bin yaw (rad): the same residual edge bias over the rim's length.",
    )
    depth_bin_position_floor_m: float = Field(
        0.0025,
        ge=0.0,
        le=0.1,
        description="A bin placed by the head depth registration only (its rim views refused): "
        "with the true head camera that registration is 2-3 mm off (128 px depth at 2-3 m).",
    )
    depth_bin_rotation_floor_rad: float = Field(
        0.01,
        ge=0.0,
        le=0.2,
        description="...and 0.5-0.6 deg off in yaw.",
    )
    held_height_std_m: float = Field(
        0.002,
        ge=0.0,
        le=0.1,
        description="A bin whose height is held at the table's nominal height: the robot "
        "base's mounting height against the table (pedestal, floor flatness) is a few mm.",
    )
    gain_rel_floor: float = Field(
        0.003,
        ge=0.0,
        le=1.0,
        description="Servo gains (relative): the fit window and the logged state's rounding "
        "leave a few tenths of a percent between the model and the response.",
    )
    latency_floor_s: float = Field(
        0.00005,
        ge=0.0,
        le=0.1,
        description="Command latency (s): a step sampled every 2 ms locates a delay to a few "
        "hundredths of a millisecond.",
    )
    belt_speed_rel_floor: float = Field(
        0.007,
        ge=0.0,
        le=1.0,
        description="Belt surface speed and roller radius (relative): the object's top face is "
        "located in head depth pixels of ~2 cm, whose registration to the camera (each pixel's "
        "depth taken from a ray up to half a pixel away) and whose top-face sample change "
        "along the belt; development twins: up to 1.4 %.",
    )


def interval_95(*sigmas: float) -> float:
    """Half-width of the 95 % interval of a sum of independent Gaussian errors (1-sigma each)."""
    return Z_95 * math.sqrt(sum(float(s) ** 2 for s in sigmas))


def radius_95(covariance: FloatArray) -> float:
    """95 % quantile of the length of a zero-mean Gaussian vector with this covariance.

    Computed from a fixed set of standard normal samples (deterministic, accurate to ~1 %).
    """
    cov = np.atleast_2d(np.asarray(covariance, dtype=float))
    eigenvalues = np.clip(np.linalg.eigvalsh(0.5 * (cov + cov.T)), 0.0, None)
    samples = np.random.default_rng(0).standard_normal((20000, eigenvalues.size))
    lengths = np.sqrt(samples**2 @ eigenvalues)
    return float(np.quantile(lengths, 0.95))


def jackknife_covariance(replicates: Sequence[Sequence[float]] | FloatArray) -> FloatArray:
    """Delete-a-group jackknife covariance of K replicate estimates (K, n): (K-1)/K sum dd^T."""
    values = np.asarray(replicates, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    k = values.shape[0]
    if k < 2:
        return np.zeros((values.shape[1], values.shape[1]))
    deviation = values - values.mean(axis=0)
    return (k - 1) / k * (deviation.T @ deviation)  # type: ignore[no-any-return]


def pose_deviation(T_reference: FloatArray, T: FloatArray) -> FloatArray:
    """(6,) deviation of ``T`` from ``T_reference``: translation, then rotation vector.

    Both are expressed in the reference's own frame (``inv(T_reference) @ T``).
    """
    delta = invert_transform(np.asarray(T_reference, dtype=float)) @ np.asarray(T, dtype=float)
    rotvec = Rotation.from_matrix(delta[:3, :3]).as_rotvec()
    return np.concatenate([delta[:3, 3], rotvec])


def carried_covariance(
    T: FloatArray,
    X: FloatArray,
    covariance_x: FloatArray,
    pose_from_params: Callable[[FloatArray], FloatArray],
    params_from_pose: Callable[[FloatArray], FloatArray],
) -> FloatArray:
    """Covariance of ``T``'s error when it moves rigidly with an uncertain frame ``X``.

    ``T`` is seen through ``X`` (e.g. a scene element through a camera's mount): with ``X``
    off by a small ``dx`` of its parameters, ``T`` would be at ``X(dx) inv(X) T``. The map from
    ``dx`` to :func:`pose_deviation` is differentiated numerically and ``covariance_x``, with
    its correlations, carried through it.
    """
    params = params_from_pose(X)
    X_inverse = invert_transform(X)
    jacobian = np.zeros((6, params.size))
    step = 1e-6
    for j in range(params.size):
        moved = pose_from_params(params + step * np.eye(params.size)[j])
        jacobian[:, j] = pose_deviation(T, moved @ X_inverse @ T) / step
    return jacobian @ np.asarray(covariance_x, dtype=float) @ jacobian.T  # type: ignore[no-any-return]


def pose_intervals(
    T_estimate: FloatArray,
    replicates: Sequence[FloatArray],
    translation_std_m: Sequence[float] | FloatArray,
    rotation_std_rad: Sequence[float] | FloatArray,
    translation_floor_m: float,
    rotation_floor_rad: float,
    translation_axes: Sequence[int] = (0, 1, 2),
    rotation_axes: Sequence[int] = (0, 1, 2),
    extra_covariance: FloatArray | None = None,
) -> tuple[float, float]:
    """95 % bounds on a pose's position error and rotation angle error.

    Args:
        T_estimate: The estimate.
        replicates: Jackknife replicates of the same pose (may be empty).
        translation_std_m: The fit's 1-sigma per axis of the estimate's own frame (m).
        rotation_std_rad: The fit's 1-sigma per axis (rad).
        translation_floor_m: Model-error floor per translation axis (m).
        rotation_floor_rad: Model-error floor per rotation axis (rad).
        translation_axes: Axes (of the estimate's frame) the position error is measured on.
        rotation_axes: Rotation axes the error angle is measured about.
        extra_covariance: Another (6, 6) error covariance of the pose (translation, rotation
            vector in the estimate's frame), e.g. carried over from an upstream fit.

    Returns:
        ``(position_95_m, rotation_95_rad)``.

    """
    t_axes, r_axes = list(translation_axes), [3 + a for a in rotation_axes]
    cov = np.zeros((6, 6))
    if len(replicates) >= 2:
        cov = jackknife_covariance(np.array([pose_deviation(T_estimate, T) for T in replicates]))
    fit = np.concatenate(
        [np.asarray(translation_std_m, float) ** 2, np.asarray(rotation_std_rad, float) ** 2]
    )
    floors = np.array([translation_floor_m] * 3 + [rotation_floor_rad] * 3) ** 2
    cov = cov + np.diag(fit + floors)
    if extra_covariance is not None:
        cov = cov + np.asarray(extra_covariance, dtype=float)
    return radius_95(cov[np.ix_(t_axes, t_axes)]), radius_95(cov[np.ix_(r_axes, r_axes)])
