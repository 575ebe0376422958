"""Belt speed model: encoder scale (effective roller radius) from encoder rate vs. seen speed.

The encoder measures the roller angle; the belt surface moves ``v = r_eff * omega``. The camera
measures the surface speed independently by tracking a marker or object through the belt
homography (image -> belt plane, metres). Pairs ``(omega_i, v_i)`` at several belt speeds give
``r_eff`` by least squares through the origin; the residual is reported and a fit whose
relative residual exceeds a threshold is refused (slip, wrong homography, or bad tracking).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from pydantic import Field
from r2s2r_common.config import ConfigModel

from r2s2r_calibration.errors import DegenerateMotionError, ResidualTooLargeError
from r2s2r_calibration.geometry import FloatArray


class BeltModelConfig(ConfigModel):
    """Acceptance thresholds of the belt speed model."""

    min_samples: int = Field(2, ge=1, le=100000, description="(rate, speed) pairs required.")
    min_rate_rad_s: float = Field(
        0.05, gt=0.0, le=1000.0, description="Samples with a slower encoder rate are not used."
    )
    max_relative_residual: float = Field(
        0.02,
        gt=0.0,
        le=1.0,
        description="Refuse when RMS speed residual / mean speed exceeds this.",
    )
    min_track_points: int = Field(5, ge=2, le=100000, description="Track samples required.")
    min_travel_m: float = Field(
        0.15, gt=0.0, le=10.0, description="Track travel along the belt required (m)."
    )
    max_track_residual_m: float = Field(
        0.006,
        gt=0.0,
        le=0.1,
        description="Refuse a track whose RMS position residual about x = r * angle exceeds this "
        "(m; about half the belt-plane footprint of a head depth pixel: 12 mm at 128 px).",
    )
    max_radius_rel_std: float = Field(
        0.005, gt=0.0, le=1.0, description="Refuse when the radius' relative 1-sigma exceeds this."
    )
    outlier_sigmas: float = Field(
        3.0, gt=1.0, le=100.0, description="Track points this many robust sigmas off are dropped."
    )


@dataclass
class BeltModelResult:
    """Fitted belt speed model.

    Attributes:
        roller_radius_m: Effective roller radius: surface speed per encoder rate (m/rad).
        roller_radius_std_m: 1-sigma uncertainty of the radius (m).
        residual_rms_mps: RMS of ``v - r * omega`` (m/s).
        relative_residual: ``residual_rms_mps`` / mean |v|.
        n_samples: Pairs used.

    """

    roller_radius_m: float
    roller_radius_std_m: float
    residual_rms_mps: float
    relative_residual: float
    n_samples: int

    def surface_speed_mps(self, encoder_rate_rad_s: float) -> float:
        """Surface speed (m/s) for an encoder rate (rad/s)."""
        return self.roller_radius_m * encoder_rate_rad_s


def image_to_belt_homography(
    camera_matrix: npt.ArrayLike, T_camera_belt: npt.ArrayLike
) -> FloatArray:
    """Homography from undistorted pixels to belt-plane coordinates (m, belt x/y, z = 0).

    Args:
        camera_matrix: 3x3 K (px).
        T_camera_belt: ``belt_link`` in the camera optical frame (belt surface is z = 0).

    """
    K = np.asarray(camera_matrix, dtype=float)
    T = np.asarray(T_camera_belt, dtype=float)
    belt_to_image = K @ np.column_stack([T[:3, 0], T[:3, 1], T[:3, 3]])
    homography = np.linalg.inv(belt_to_image)
    return np.asarray(homography / homography[2, 2])


def surface_speed_from_track(
    pixels_px: npt.ArrayLike,
    stamps_s: npt.ArrayLike,
    homography: FloatArray,
    camera_matrix: npt.ArrayLike | None = None,
    distortion: npt.ArrayLike | None = None,
    config: BeltModelConfig | None = None,
) -> tuple[float, float]:
    """Belt surface speed along belt x from a tracked point (marker/object) in the image.

    Args:
        pixels_px: (N, 2) image positions of the tracked point (distorted, as detected).
        stamps_s: (N,) capture times (s).
        homography: From :func:`image_to_belt_homography` (undistorted px -> belt m).
        camera_matrix: K, needed with ``distortion`` to undistort the track.
        distortion: (k1, k2, p1, p2, k3); None when the track is already undistorted.
        config: Thresholds; defaults to :class:`BeltModelConfig`.

    Returns:
        (speed along belt x in m/s, RMS residual of the constant-speed fit in m).

    Raises:
        ValueError: On mismatched lengths.
        DegenerateMotionError: Too few samples or no time span.

    """
    cfg = config or BeltModelConfig()
    points = np.asarray(pixels_px, dtype=float).reshape(-1, 2)
    stamps = np.asarray(stamps_s, dtype=float).reshape(-1)
    if len(points) != len(stamps):
        raise ValueError(f"{len(points)} track points but {len(stamps)} stamps; expected equal")
    if len(points) < cfg.min_track_points or np.ptp(stamps) <= 0:
        raise DegenerateMotionError(
            f"track has {len(points)} samples over {np.ptp(stamps) if len(stamps) else 0:.3f} s "
            f"(need {cfg.min_track_points} over a positive time span); track the marker longer"
        )
    if distortion is not None:
        if camera_matrix is None:
            raise ValueError("distortion given without camera_matrix; pass both or neither")
        K = np.asarray(camera_matrix, dtype=float)
        points = cv2.undistortPoints(
            points.reshape(-1, 1, 2), K, np.asarray(distortion, dtype=float), P=K
        ).reshape(-1, 2)
    belt = cv2.perspectiveTransform(points.reshape(-1, 1, 2), homography).reshape(-1, 2)
    design = np.column_stack([stamps - stamps.mean(), np.ones_like(stamps)])
    coefficients, *_ = np.linalg.lstsq(design, belt[:, 0], rcond=None)
    residual = belt[:, 0] - design @ coefficients
    return float(coefficients[0]), float(np.sqrt(np.mean(residual**2)))


def fit_belt_model(
    encoder_rates_rad_s: npt.ArrayLike,
    surface_speeds_mps: npt.ArrayLike,
    config: BeltModelConfig | None = None,
) -> BeltModelResult:
    """Fit ``v = r_eff * omega`` through the origin.

    Args:
        encoder_rates_rad_s: Encoder angular rates (rad/s).
        surface_speeds_mps: Surface speeds seen by the camera at the same times (m/s).
        config: Thresholds; defaults to :class:`BeltModelConfig`.

    Returns:
        The model with its residual.

    Raises:
        ValueError: On mismatched lengths or non-finite values.
        DegenerateMotionError: Too few samples with the belt moving.
        ResidualTooLargeError: The relative residual exceeds ``max_relative_residual``.

    """
    cfg = config or BeltModelConfig()
    rates = np.asarray(encoder_rates_rad_s, dtype=float).reshape(-1)
    speeds = np.asarray(surface_speeds_mps, dtype=float).reshape(-1)
    if len(rates) != len(speeds):
        raise ValueError(f"{len(rates)} encoder rates but {len(speeds)} speeds; expected equal")
    if not (np.all(np.isfinite(rates)) and np.all(np.isfinite(speeds))):
        raise ValueError("encoder rates and speeds must be finite (no NaN/inf)")
    moving = np.abs(rates) >= cfg.min_rate_rad_s
    if np.count_nonzero(moving) < cfg.min_samples:
        raise DegenerateMotionError(
            f"{np.count_nonzero(moving)} samples with the belt moving (|rate| >= "
            f"{cfg.min_rate_rad_s} rad/s; need {cfg.min_samples}); run the belt and record "
            "encoder and camera together"
        )
    rates, speeds = rates[moving], speeds[moving]
    radius = float(rates @ speeds / (rates @ rates))
    residual = speeds - radius * rates
    rms = float(np.sqrt(np.mean(residual**2)))
    relative = rms / max(float(np.mean(np.abs(speeds))), 1e-12)
    dof = max(len(rates) - 1, 1)
    radius_std = float(np.sqrt(float(residual @ residual) / dof / float(rates @ rates)))
    if relative > cfg.max_relative_residual:
        raise ResidualTooLargeError(
            f"belt speed residual {relative:.1%} of the speed exceeds max_relative_residual = "
            f"{cfg.max_relative_residual:.1%}; the belt may slip on the roller or the "
            "camera track is poor (check the belt homography)"
        )
    return BeltModelResult(
        roller_radius_m=radius,
        roller_radius_std_m=radius_std,
        residual_rms_mps=rms,
        relative_residual=relative,
        n_samples=len(rates),
    )


@dataclass
class BeltTrackFit:
    """Roller radius and surface speed from one object tracked along the belt.

    Attributes:
        model: Radius and its uncertainty; ``residual_rms_mps`` is the 1-sigma of the surface
            speed that the position residual implies over the track's duration.
        speed_mps: Surface speed: slope of the position along the belt over time (m/s).
        position_residual_m: RMS residual of ``x = r * angle + c`` (m).
        n_used: Track points used (outliers dropped).
        travel_m: Distance the object travelled along the belt (m).

    """

    model: BeltModelResult
    speed_mps: float
    position_residual_m: float
    n_used: int
    travel_m: float


def fit_belt_track(
    stamps_s: npt.ArrayLike,
    along_belt_m: npt.ArrayLike,
    encoder_stamps_s: npt.ArrayLike,
    encoder_angles_rad: npt.ArrayLike,
    config: BeltModelConfig | None = None,
) -> BeltTrackFit:
    """Fit ``x = r * angle + c``: a tracked object's position against the unwrapped roller angle.

    Every track point is used against the encoder angle interpolated at its stamp, so the
    radius comes from the whole travel (not from noisy per-window speeds) and stays right when
    the belt speed varies during the track. Points more than ``outlier_sigmas`` robust sigmas
    off the first fit are dropped (a mis-segmented frame) and the fit is repeated.

    Args:
        stamps_s: (N,) track stamps (s).
        along_belt_m: (N,) object position along belt x (m).
        encoder_stamps_s: (M,) encoder stamps (s), spanning the track.
        encoder_angles_rad: (M,) unwrapped roller angles (rad).
        config: Thresholds; defaults to :class:`BeltModelConfig`.

    Returns:
        The fit.

    Raises:
        ValueError: Mismatched lengths or non-finite values.
        DegenerateMotionError: Too few points, too little travel, or encoder samples that do
            not span the track.
        ResidualTooLargeError: Position residual or radius uncertainty above its threshold.

    """
    cfg = config or BeltModelConfig()
    t = np.asarray(stamps_s, dtype=float).reshape(-1)
    x = np.asarray(along_belt_m, dtype=float).reshape(-1)
    et = np.asarray(encoder_stamps_s, dtype=float).reshape(-1)
    ea = np.asarray(encoder_angles_rad, dtype=float).reshape(-1)
    if len(t) != len(x) or len(et) != len(ea):
        raise ValueError(
            f"{len(t)} stamps for {len(x)} positions and {len(et)} encoder stamps for "
            f"{len(ea)} angles; expected equal pairs"
        )
    if not all(np.all(np.isfinite(v)) for v in (t, x, et, ea)):
        raise ValueError("track and encoder samples must be finite (no NaN/inf)")
    if len(t) < cfg.min_track_points:
        raise DegenerateMotionError(
            f"the object was tracked in {len(t)} frames (need {cfg.min_track_points}); track "
            "it longer or check that it is in the camera's view"
        )
    if len(et) < 2 or et.min() > t.min() or et.max() < t.max():
        raise DegenerateMotionError(
            "the encoder samples do not span the track; record /belt/encoder during the whole track"
        )
    order = np.argsort(et)
    angle = np.interp(t, et[order], ea[order])
    travel = float(np.ptp(x))
    if travel < cfg.min_travel_m:
        raise DegenerateMotionError(
            f"the object travelled {travel:.3f} m along the belt while tracked (need "
            f"{cfg.min_travel_m} m); run the belt and track longer"
        )
    keep = np.ones(len(t), dtype=bool)
    for _ in range(2):
        design = np.column_stack([angle[keep], np.ones(int(keep.sum()))])
        coefficients, *_ = np.linalg.lstsq(design, x[keep], rcond=None)
        residual_all = x - (coefficients[0] * angle + coefficients[1])
        sigma = 1.4826 * float(
            np.median(np.abs(residual_all[keep] - np.median(residual_all[keep])))
        )
        keep = np.abs(residual_all) <= cfg.outlier_sigmas * max(sigma, 1e-4)
        if keep.sum() < cfg.min_track_points:
            raise DegenerateMotionError(
                f"{int(keep.sum())} of {len(t)} track points agree with a constant radius; "
                "the track is too noisy (check the segmentation of the object)"
            )
    design = np.column_stack([angle[keep], np.ones(int(keep.sum()))])
    coefficients, *_ = np.linalg.lstsq(design, x[keep], rcond=None)
    residual = x[keep] - design @ coefficients
    dof = max(int(keep.sum()) - 2, 1)
    sigma2 = float(residual @ residual) / dof
    covariance = sigma2 * np.linalg.inv(design.T @ design)
    radius = float(coefficients[0])
    radius_std = float(np.sqrt(covariance[0, 0]))
    rms = float(np.sqrt(np.mean(residual**2)))
    speed = float(np.polyfit(t[keep], x[keep], 1)[0])
    duration = float(np.ptp(t[keep]))
    rate = float(np.polyfit(t[keep], angle[keep], 1)[0])
    if rms > cfg.max_track_residual_m:
        raise ResidualTooLargeError(
            f"belt track residual {1000 * rms:.1f} mm about x = r * angle exceeds "
            f"max_track_residual_m = {1000 * cfg.max_track_residual_m:.1f} mm; the belt may "
            "slip on the roller or the object track is poor (check the belt pose and the camera)"
        )
    if abs(radius) < 1e-9 or radius_std / abs(radius) > cfg.max_radius_rel_std:
        raise ResidualTooLargeError(
            f"roller radius {1000 * radius:.2f} +- {1000 * radius_std:.2f} mm: relative "
            f"uncertainty above max_radius_rel_std = {cfg.max_radius_rel_std:.1%}; track the "
            "object over a longer travel"
        )
    # 1-sigma of the speed: a line fit through N points spread evenly over the duration.
    speed_rms = rms * np.sqrt(12.0 / int(keep.sum())) / max(duration, 1e-9)
    model = BeltModelResult(
        roller_radius_m=radius,
        roller_radius_std_m=radius_std,
        residual_rms_mps=float(speed_rms),
        relative_residual=float(speed_rms / max(abs(rate * radius), 1e-12)),
        n_samples=int(keep.sum()),
    )
    return BeltTrackFit(model, speed, rms, int(keep.sum()), travel)
