"""Belt surface speed from the head camera: sparse optical flow made metric by a homography.

Per frame pair: Shi-Tomasi corners in the belt region of the previous frame are tracked into
the current one with pyramidal Lucas-Kanade, checked by tracking back (forward-backward error),
mapped to the belt plane (metres) with the calibrated image -> belt homography, and reduced to a
robust displacement along belt x (median, then inliers within 3 MAD). Too few agreeing tracks or
an implausible speed give an invalid measurement with the reason, never a wild value.
"""

from __future__ import annotations

import math

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


class VisionSpeedEstimator:
    """Frame-to-frame belt speed from sparse optical flow.

    Args:
        config: Vision settings; ``image_to_belt_homography`` must be set.

    Raises:
        ValueError: If no homography is configured.

    """

    def __init__(self, config: VisionConfig) -> None:
        self.config = config
        self._homography = config.homography()
        self._previous: tuple[np.ndarray, float] | None = None
        self._mask: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the previous frame."""
        self._previous = None

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
        """Add a grey frame; returns the speed since the previous frame.

        Args:
            gray: 8-bit grey image (see :func:`to_gray`).
            stamp_s: Capture time, s.

        Returns:
            None for the first frame (or after a gap / out-of-order frame); otherwise a
            measurement stamped midway between the two frames, invalid with a reason when the
            tracks do not support an estimate.

        Raises:
            ValueError: If the image size does not match the homography's calibration.

        """
        self.check_size(gray.shape[1], gray.shape[0])
        previous, self._previous = self._previous, (gray, stamp_s)
        if previous is None:
            return None
        previous_gray, previous_stamp_s = previous
        dt_s = stamp_s - previous_stamp_s
        if dt_s <= 0.0 or dt_s > self.config.max_frame_gap_s or previous_gray.shape != gray.shape:
            return None
        return self._measure(previous_gray, gray, previous_stamp_s, dt_s)

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
        start_m = apply_homography(self._homography, corners.reshape(-1, 2)[good].astype(float))
        end_m = apply_homography(self._homography, forward.reshape(-1, 2)[good].astype(float))
        along_m = end_m[:, 0] - start_m[:, 0]
        across_m = end_m[:, 1] - start_m[:, 1]
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
        spread_m2 = float(np.var(along_m[inliers])) if count > 1 else 0.0
        variance_mps2 = max(spread_m2 / count / dt_s**2, config.min_variance_mps2)
        return SpeedMeasurement("vision", stamp_s, speed_mps, variance_mps2, True, "", count)
