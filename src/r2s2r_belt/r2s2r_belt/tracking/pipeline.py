"""One call per frame: detect objects on the belt and update the tracks (no ROS)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from r2s2r_belt.tracking.catalogue import Catalogue
from r2s2r_belt.tracking.config import ObjectTrackerConfig
from r2s2r_belt.tracking.detection import FrameResult, ObjectDetector, SceneGeometry
from r2s2r_belt.tracking.tracker import BeltTracker, TrackSnapshot


@dataclass(frozen=True)
class TrackerOutput:
    """Result of one frame.

    Attributes:
        stamp_s: Capture time of the frame.
        tracks: Confirmed tracks at ``stamp_s`` in the base frame.
        frame: Detections and belt-plane fit of the frame.
        processing_time_s: Wall time spent on the frame.

    """

    stamp_s: float
    tracks: list[TrackSnapshot]
    frame: FrameResult
    processing_time_s: float


class ObjectTrackerCore:
    """Detector + tracker with the node's configuration.

    Args:
        config: The node's typed configuration (catalogue, detection, tracking).

    """

    def __init__(self, config: ObjectTrackerConfig) -> None:
        self.config = config
        self.catalogue = Catalogue.from_config(config.catalogue)
        self.detector = ObjectDetector(config.detection, self.catalogue)
        self.tracker = BeltTracker(config.tracking, config.detection.belt_length_m)

    def process(
        self,
        rgb: NDArray[np.uint8],
        depth_m: NDArray[np.float32],
        stamp_s: float,
        geometry: SceneGeometry,
        belt_speed_mps: float | None = None,
    ) -> TrackerOutput:
        """Detect and track in one synchronised RGB + depth frame.

        Args:
            rgb: H x W x 3 uint8 RGB.
            depth_m: H x W float32 registered depth, metres.
            stamp_s: Capture time, s (monotonic over calls).
            geometry: Camera model and frames (camera_info + /tf_static).
            belt_speed_mps: Belt surface speed along ``belt_link`` x, or None if unknown.

        Returns:
            The tracks and what the frame gave.

        Raises:
            r2s2r_belt.tracking.detection.FrameError: If the images do not fit the camera.

        """
        start = time.perf_counter()
        frame = self.detector.detect(rgb, depth_m, geometry)
        belt_velocity = (
            None
            if belt_speed_mps is None
            else float(belt_speed_mps) * geometry.base_from_belt[:3, 0]
        )
        tracks = self.tracker.update(
            frame.detections, stamp_s, belt_velocity, geometry.base_from_belt
        )
        return TrackerOutput(stamp_s, tracks, frame, time.perf_counter() - start)
