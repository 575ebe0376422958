"""Vision geometry from a camera model and the belt pose (what the node gets from tf)."""

from __future__ import annotations

import numpy as np
import pytest
from r2s2r_belt.config import VisionConfig
from r2s2r_belt.synthetic import SyntheticBeltCamera
from r2s2r_belt.vision_geometry import image_to_belt_homography, vision_config_from_camera


def test_homography_from_pose_matches_the_camera() -> None:
    camera = SyntheticBeltCamera(width_px=320, height_px=240, focal_px=300.0)
    homography = image_to_belt_homography(camera.camera_matrix, camera.camera_from_belt())
    np.testing.assert_allclose(homography, camera.image_to_belt_homography(), atol=1e-9)


def test_config_has_roi_of_the_belt_and_the_camera_model() -> None:
    camera = SyntheticBeltCamera(width_px=320, height_px=240, focal_px=300.0)
    base = VisionConfig(geometry_from_tf=True, belt_length_m=0.4, belt_width_m=0.3)
    config = vision_config_from_camera(
        base,
        camera.camera_matrix,
        [0.01, 0.0, 0.0, 0.0, 0.0],
        (320, 240),
        camera.camera_from_belt(),
    )
    assert config.enabled and config.image_width_px == 320
    x_min, y_min, x_max, y_max = config.roi_px
    assert 0 <= x_min < x_max <= 320 and 0 <= y_min < y_max <= 240
    # The belt centre projects inside the ROI; the ROI is smaller than the image (0.4 m belt).
    centre = camera.belt_to_image_homography() @ np.array([0.0, 0.0, 1.0])
    u, v = centre[:2] / centre[2]
    assert x_min <= u <= x_max and y_min <= v <= y_max
    assert (x_max - x_min) * (y_max - y_min) < 320 * 240
    assert config.distortion[0] == 0.01 and config.intrinsics() is not None


def test_edge_on_belt_and_belt_outside_the_image_are_refused() -> None:
    K = np.array([[300.0, 0.0, 160.0], [0.0, 300.0, 120.0], [0.0, 0.0, 1.0]])
    edge_on = np.eye(4)
    edge_on[:3, :3] = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
    with pytest.raises(ValueError, match="edge-on"):
        image_to_belt_homography(K, edge_on)
    far_aside = np.eye(4)
    far_aside[:3, 3] = (50.0, 0.0, 1.0)  # belt plane facing the camera, 50 m to the side
    with pytest.raises(ValueError, match="outside the 320x240 image"):
        vision_config_from_camera(VisionConfig(geometry_from_tf=True), K, [], (320, 240), far_aside)
