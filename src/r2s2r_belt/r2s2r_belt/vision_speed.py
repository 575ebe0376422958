"""Belt surface speed from the head camera: sparse optical flow made metric by a homography.

Per frame: Shi-Tomasi corners in the belt region of a REFERENCE frame are tracked into the current
one with pyramidal Lucas-Kanade, checked by tracking back (forward-backward error), undistorted
(when the camera's K and distortion are configured), mapped to the belt plane (metres) with the
calibrated image -> belt homography, and reduced to a robust displacement along belt x (median,
then inliers within 3 MAD). The reference is the newest frame of a short history that is old
enough for the expected displacement to reach ``min_baseline_px`` (a slow belt moves ~1 px per
frame, where flow between consecutive frames is poorly conditioned), at most ``max_baseline_s``
back; the measurement is stamped midway between the two frames. Features on items above the belt
surface move faster in the image than the surface (parallax); ``tracked_height_m`` corrects for
their typical height. Too few agreeing tracks or an implausible speed give an invalid measurement
with the reason, never a wild value.
"""

from __future__ import annotations

import math
from collections import deque

import cv2
import numpy as np

from r2s2r_belt.config import VisionConfig
from r2s2r_belt.estimates import SpeedMeasurement


def to_gray(image: np.ndarray, encoding: str) -> np.ndarray:
    """Convert an rgb8/bgr8/mono8 image to 8-bit grey.

    Raises:
        ValueError: For other encodings.

    """
    if encoding == "mono8":
        return image
    if encoding == "rgb8":
        return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    if encoding == "bgr8":
        return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    raise ValueError(f"encoding = {encoding!r}: vision speed needs rgb8, bgr8 or mono8")


def apply_homography(homography: np.ndarray, points_px: np.ndarray) -> np.ndarray:
    """Map (N, 2) image points through a 3x3 homography; returns (N, 2)."""
    ones = np.ones((points_px.shape[0], 1))
    mapped = np.hstack([points_px, ones]) @ homography.T
    return mapped[:, :2] / mapped[:, 2:3]


def camera_height_above_plane_m(homography: np.ndarray, camera_matrix: np.ndarray) -> float:
    """Distance of the camera centre from the plane of an image -> plane homography.

    ``inv(homography) = s * K [r1 r2 t]`` (plane z = 0); with K known, the scale comes from the
    unit column ``r1`` and the camera centre is ``-R^T t``.

    Args:
        homography: 3x3, undistorted image px -> plane m (z = 0).
        camera_matrix: The 3x3 K the homography was computed with.

    Returns:
        The camera's distance from the plane (m), positive.

    Raises:
        ValueError: If the homography and K are not consistent with a camera looking at a plane.

    """
    columns = np.linalg.solve(camera_matrix, np.linalg.inv(homography))
    norms = np.linalg.norm(columns[:, :2], axis=0)
    if not np.all(norms > 0.0) or abs(norms[0] / norms[1] - 1.0) > 0.05:
        raise ValueError(
            f"homography and camera_matrix disagree (plane axes scaled {norms[0]:.4g} vs "
            f"{norms[1]:.4g}; expected equal): use the K the homography was computed with"
        )
    scale = float(np.mean(norms)) * (1.0 if columns[2, 2] > 0.0 else -1.0)  # plane in front
    r1, r2, t = columns[:, 0] / scale, columns[:, 1] / scale, columns[:, 2] / scale
    rotation = np.column_stack([r1, r2, np.cross(r1, r2)])
    return abs(float((-rotation.T @ t)[2]))


class VisionSpeedEstimator:
    """Belt speed from sparse optical flow over an adaptive frame baseline.

    Args:
        config: Vision settings; ``image_to_belt_homography`` must be set.

    Raises:
        ValueError: If no homography is configured, or K and the homography disagree.

    """

    def __init__(self, config: VisionConfig) -> None:
        self.config = config
        self._homography = config.homography()
        self._camera_matrix = config.intrinsics()
        self._distortion = np.asarray(config.distortion, dtype=float) if config.distortion else None
        self._parallax_scale = 1.0
        if config.tracked_height_m > 0.0:
            assert self._camera_matrix is not None  # the config validator ensures it
            height_m = camera_height_above_plane_m(self._homography, self._camera_matrix)
            if config.tracked_height_m >= 0.5 * height_m:
                raise ValueError(
                    f"vision.tracked_height_m = {config.tracked_height_m} m is not small against "
                    f"the camera's {height_m:.3f} m above the belt: expected a few cm"
                )
            # A point at height h moves (H - h) / H as far as its ray's belt-plane intersection.
            self._parallax_scale = 1.0 - config.tracked_height_m / height_m
        self._history: deque[tuple[np.ndarray, float]] = deque()
        self._pixels_per_s: float | None = None  # image motion at the last valid measurement
        self._mask: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the frame history (the scene jumped)."""
        self._history.clear()
        self._pixels_per_s = None

    def check_size(self, width_px: int, height_px: int) -> None:
        """Ensure the image size matches the homography's calibration.

        Raises:
            ValueError: Naming both sizes.

        """
        expected = (self.config.image_width_px, self.config.image_height_px)
        if expected != (0, 0) and expected != (width_px, height_px):
            raise ValueError(
                f"image is {width_px}x{height_px} px, the belt homography is for "
                f"{expected[0]}x{expected[1]} px (vision.image_width_px/height_px)"
            )

    def _roi_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        if self._mask is None or self._mask.shape != shape[:2]:
            mask = np.zeros(shape[:2], np.uint8)
            if self.config.roi_px:
                x_min, y_min, x_max, y_max = self.config.roi_px
                mask[max(y_min, 0) : y_max, max(x_min, 0) : x_max] = 255
            else:
                mask[:] = 255
            self._mask = mask
        return self._mask

    def update(self, gray: np.ndarray, stamp_s: float) -> SpeedMeasurement | None:
        """Add a grey frame; returns the speed between a reference frame and this one.

        Args:
            gray: 8-bit grey image (see :func:`to_gray`).
            stamp_s: Capture time, s.

        Returns:
            None for the first frame (or after a gap / out-of-order frame / size change);
            otherwise a measurement stamped midway between the reference frame and this one,
            invalid with a reason when the tracks do not support an estimate.

        Raises:
            ValueError: If the image size does not match the homography's calibration.

        """
        self.check_size(gray.shape[1], gray.shape[0])
        if self._history:
            last_gray, last_stamp_s = self._history[-1]
            gap_s = stamp_s - last_stamp_s
            if gap_s <= 0.0 or gap_s > self.config.max_frame_gap_s or last_gray.shape != gray.shape:
                self.reset()
        self._history.append((gray, stamp_s))
        while stamp_s - self._history[0][1] > self.config.max_baseline_s + 1e-9:
            self._history.popleft()
        if len(self._history) < 2:
            return None
        reference_gray, reference_stamp_s = self._reference(stamp_s)
        measurement = self._measure(
            reference_gray, gray, reference_stamp_s, stamp_s - reference_stamp_s
        )
        if measurement.valid:
            # The motion just measured may call for an older reference (first frames, or the
            # belt slowed down): measure again over the longer baseline rather than report a
            # poorly conditioned estimate.
            older_gray, older_stamp_s = self._reference(stamp_s)
            if older_stamp_s < reference_stamp_s:
                measurement = self._measure(
                    older_gray, gray, older_stamp_s, stamp_s - older_stamp_s
                )
        return measurement

    def _reference(self, stamp_s: float) -> tuple[np.ndarray, float]:
        """Return the newest earlier frame old enough for ``min_baseline_px`` of expected motion.

        Without a speed yet: the previous frame; when no frame is old enough: the oldest one.
        """
        frames = list(self._history)[:-1]
        if self._pixels_per_s is None:
            return frames[-1]
        wanted_s = self.config.min_baseline_px / max(self._pixels_per_s, 1e-9)
        for frame in reversed(frames):
            if stamp_s - frame[1] >= wanted_s - 1e-9:
                return frame
        return frames[0]

    def image_to_belt(self, points_px: np.ndarray) -> np.ndarray:
        """Undistort (when configured) and map (N, 2) image points to the belt plane, m."""
        if self._distortion is not None and self._camera_matrix is not None:
            points_px = cv2.undistortPoints(
                points_px.reshape(-1, 1, 2),
                self._camera_matrix,
                self._distortion,
                P=self._camera_matrix,
            ).reshape(-1, 2)
        return apply_homography(self._homography, points_px.astype(float))

    def _invalid(self, stamp_s: float, reason: str, count: int = 0) -> SpeedMeasurement:
        return SpeedMeasurement("vision", stamp_s, 0.0, math.inf, False, reason, count)

    def _measure(
        self, previous: np.ndarray, current: np.ndarray, previous_stamp_s: float, dt_s: float
    ) -> SpeedMeasurement:
        config = self.config
        stamp_s = previous_stamp_s + 0.5 * dt_s
        corners = cv2.goodFeaturesToTrack(
            previous,
            maxCorners=config.max_features,
            qualityLevel=config.feature_quality,
            minDistance=config.min_feature_distance_px,
            mask=self._roi_mask(previous.shape),
            blockSize=7,
        )
        if corners is None or len(corners) < config.min_features:
            found = 0 if corners is None else len(corners)
            return self._invalid(
                stamp_s, f"too few features: {found} < {config.min_features}", found
            )
        window = (config.flow_window_px, config.flow_window_px)
        criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.001)
        forward, status_f, _ = cv2.calcOpticalFlowPyrLK(  # type: ignore[call-overload]
            previous,
            current,
            corners,
            None,
            winSize=window,
            maxLevel=config.pyramid_levels,
            criteria=criteria,
        )
        backward, status_b, _ = cv2.calcOpticalFlowPyrLK(  # type: ignore[call-overload]
            current,
            previous,
            forward,
            None,
            winSize=window,
            maxLevel=config.pyramid_levels,
            criteria=criteria,
        )
        round_trip_px = np.linalg.norm((backward - corners).reshape(-1, 2), axis=1)
        good = (
            (status_f.ravel() == 1)
            & (status_b.ravel() == 1)
            & (round_trip_px < config.max_forward_backward_error_px)
        )
        if int(good.sum()) < config.min_features:
            return self._invalid(
                stamp_s,
                f"too few tracked features: {int(good.sum())} < {config.min_features}",
                int(good.sum()),
            )
        start_px = corners.reshape(-1, 2)[good].astype(float)
        end_px = forward.reshape(-1, 2)[good].astype(float)
        start_m, end_m = self.image_to_belt(start_px), self.image_to_belt(end_px)
        along_m = (end_m[:, 0] - start_m[:, 0]) * self._parallax_scale
        across_m = (end_m[:, 1] - start_m[:, 1]) * self._parallax_scale
        median_along_m = float(np.median(along_m))
        mad_m = 1.4826 * float(np.median(np.abs(along_m - median_along_m)))
        # A floor on the band keeps exact (noise-free) agreement from rejecting everything.
        band_m = max(3.0 * mad_m, 1e-5)
        inliers = (np.abs(along_m - median_along_m) <= band_m) & (
            np.abs(across_m - np.median(across_m)) <= config.max_cross_track_m
        )
        count = int(inliers.sum())
        if count < config.min_features:
            return self._invalid(
                stamp_s, f"too few agreeing tracks: {count} < {config.min_features}", count
            )
        displacement_m = float(np.mean(along_m[inliers]))
        speed_mps = displacement_m / dt_s
        if abs(speed_mps) > config.max_speed_mps:
            return self._invalid(
                stamp_s,
                f"speed {speed_mps:.3f} m/s beyond max_speed_mps {config.max_speed_mps}",
                count,
            )
        flow_px = np.linalg.norm(end_px[inliers] - start_px[inliers], axis=1)
        self._pixels_per_s = float(np.median(flow_px)) / dt_s
        spread_m2 = float(np.var(along_m[inliers])) if count > 1 else 0.0
        variance_mps2 = max(spread_m2 / count / dt_s**2, config.min_variance_mps2)
        return SpeedMeasurement("vision", stamp_s, speed_mps, variance_mps2, True, "", count)
