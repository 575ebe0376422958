import numpy as np
import pytest
from r2s2r_calibration.blur import (
    PIXEL_BOX_VARIANCE_PX2,
    BlurConfig,
    estimate_blur,
    simulator_render_variance_px2,
)
from r2s2r_calibration.errors import BlurEstimationError
from r2s2r_calibration.geometry import look_at_pose
from r2s2r_calibration.intrinsics import CharucoBoardConfig, make_board
from r2s2r_calibration.synthetic import TEST_CAMERA_MATRIX as K_TRUE
from r2s2r_calibration.synthetic import TEST_DISTORTION as DIST_TRUE
from r2s2r_calibration.synthetic import TEST_IMAGE_SIZE as IMAGE_SIZE
from r2s2r_calibration.synthetic import render_board_view
from r2s2r_description.transforms import invert_transform as invert_pose

# Larger squares so that markers stay detectable and margins wide at strong blur.
BLUR_BOARD = make_board(
    CharucoBoardConfig(squares_x=7, squares_y=5, square_length_m=0.04, marker_length_m=0.03)
)
CENTRE = np.array([0.14, 0.10, 0.0])
POSES = [
    invert_pose(look_at_pose(CENTRE + offset, CENTRE, [0, -1, 0]))
    for offset in ([0.1, 0.05, -0.35], [-0.08, -0.04, -0.4])
]


@pytest.mark.parametrize("sigma_px", [0.8, 1.5, 2.5])
def test_blur_recovered_within_15_percent(sigma_px):
    images = [
        render_board_view(BLUR_BOARD, K_TRUE, DIST_TRUE, pose, IMAGE_SIZE, sigma_px, noise_std=2)
        for pose in POSES
    ]
    result = estimate_blur(BLUR_BOARD, images, POSES, K_TRUE, DIST_TRUE)
    assert abs(result.sigma_px / sigma_px - 1) < 0.15
    assert result.n_edges >= 24
    assert result.sigma_std_px < 0.1 * sigma_px


def test_board_too_small_for_blur_is_refused():
    far = [invert_pose(look_at_pose(CENTRE + np.array([0.0, 0.0, -3.0]), CENTRE, [0, -1, 0]))]
    image = render_board_view(BLUR_BOARD, K_TRUE, DIST_TRUE, far[0], IMAGE_SIZE, 1.0)
    with pytest.raises(BlurEstimationError, match="closer"):
        estimate_blur(BLUR_BOARD, [image], far, K_TRUE, DIST_TRUE)


def test_image_and_pose_counts_must_match():
    with pytest.raises(ValueError, match="one pose a view"):
        estimate_blur(BLUR_BOARD, [np.zeros((480, 640), np.uint8)], [], K_TRUE, DIST_TRUE)


def test_simulator_render_variance_follows_the_render_scale() -> None:
    ideal = np.array([[120.0, 0, 63.5], [0, 120.0, 63.5], [0, 0, 1]])
    # The ideal camera is rendered directly: only the pixel box.
    assert simulator_render_variance_px2(ideal, np.zeros(5), (128, 128)) == pytest.approx(
        PIXEL_BOX_VARIANCE_PX2
    )
    shifted = ideal.copy()
    shifted[0, 2] = 65.0
    # Resampled about 1:1 (render focal slightly shorter): pixel box + bilinear, 1/12 + 1/6.
    plain = simulator_render_variance_px2(shifted, np.zeros(5), (128, 128))
    assert plain == pytest.approx(0.25, rel=0.1)
    barrel = simulator_render_variance_px2(shifted, np.array([-0.1, 0, 0, 0, 0]), (128, 128))
    assert barrel > plain  # wider rays: coarser render pixels per camera pixel


def test_removed_variance_is_taken_off_each_edge() -> None:
    images = [
        render_board_view(BLUR_BOARD, K_TRUE, DIST_TRUE, pose, IMAGE_SIZE, 1.2, noise_std=2)
        for pose in POSES
    ]
    sensor = estimate_blur(BLUR_BOARD, images, POSES, K_TRUE, DIST_TRUE)
    less = estimate_blur(BLUR_BOARD, images, POSES, K_TRUE, DIST_TRUE, removed_variance_px2=0.5)
    expected = np.sqrt(sensor.sigma_px**2 + PIXEL_BOX_VARIANCE_PX2 - 0.5)
    assert less.sigma_px == pytest.approx(expected, rel=0.03)
    with pytest.raises(ValueError, match="removed_variance_px2"):
        estimate_blur(BLUR_BOARD, images, POSES, K_TRUE, DIST_TRUE, removed_variance_px2=-1.0)


def test_a_sharp_small_camera_is_not_refused_for_the_noise_of_removing_the_pixel():
    # A 128 px camera with 0.3 px of blur: what is left after removing the pixel's own spread
    # (1/12 px^2) from each edge's measured spread is noisier, relative to itself, the smaller
    # the blur. The edges are judged on what they measured (their spread agrees to ~10 %); on
    # the blur left over (25 % here) such a camera was refused.
    board = make_board(
        CharucoBoardConfig(squares_x=7, squares_y=5, square_length_m=0.04, marker_length_m=0.02)
    )
    camera = np.array([[90.0, 0.0, 63.5], [0.0, 90.0, 63.5], [0.0, 0.0, 1.0]])
    distortion = np.array([-0.08, 0.03, 0.0, 0.0, 0.0])
    centre = np.array([0.14, 0.10, 0.0])
    offsets = [
        [0.06, 0.04, -0.26],
        [-0.05, -0.03, -0.28],
        [0.0, 0.07, -0.25],
        [0.08, -0.02, -0.3],
        [-0.07, 0.05, -0.27],
        [0.03, -0.06, -0.29],
    ]
    poses = [invert_pose(look_at_pose(centre + np.array(o), centre, [0, -1, 0])) for o in offsets]
    images = [
        render_board_view(
            board, camera, distortion, pose, (128, 128), 0.3, noise_std=6.0, seed=20 + i
        )
        for i, pose in enumerate(poses)
    ]
    config = BlurConfig(min_pixels_per_edge=15)  # as the board steps use it
    result = estimate_blur(board, images, poses, camera, distortion, config)
    assert result.sigma_px == pytest.approx(0.3, rel=0.15)
    assert result.relative_spread < 0.15
    left = result.per_edge_sigma_px
    left_spread = 1.4826 * np.median(np.abs(left - np.median(left))) / np.median(left)
    assert left_spread > config.max_relative_spread  # the old criterion refused it


def test_batched_edge_fit_finds_the_reference_solvers_minimum() -> None:
    # Edges like a board view's: 40-300 pixels, margins 3-12 px, blur 0.3-2.5 px, grey noise
    # 0.5-4 levels, a few outlier pixels on some. The batched fit must land where one
    # scipy.optimize.least_squares call per edge (the reference, from the same start) does.
    from r2s2r_calibration.blur import _edge_model, _fit_edge_scipy, _fit_edges

    rng = np.random.default_rng(7)
    profiles, reference = [], []
    for k in range(120):
        margin = rng.uniform(3.0, 12.0)
        distance = rng.uniform(-0.9 * margin, 1.1 * margin, rng.integers(40, 300))
        truth = [
            rng.uniform(10, 80),
            rng.uniform(60, 200),
            rng.uniform(-1, 1),
            margin,
            rng.uniform(0.3, 2.5),
        ]
        values = _edge_model(np.array(truth), distance) + rng.normal(
            0, rng.uniform(0.5, 4), distance.size
        )
        if k % 10 == 0:
            values[:4] += 60.0  # specular pixels: the soft-L1 loss discounts them
        profiles.append((distance, values, margin))
        low, high = np.percentile(values, [5, 95])
        reference.append(
            _fit_edge_scipy(
                distance,
                values,
                np.array([low, high - low, 0.0, margin, 1.0]),
                np.array([-np.inf, 0.0, -3.0, 0.5 * margin, 0.05]),
                np.array([np.inf, np.inf, 3.0, 1.5 * margin, 8.0]),
            )
        )
    fitted = _fit_edges(profiles, 8.0)
    assert all(f is not None for f in fitted) and all(r is not None for r in reference)
    sigma = np.array([f[0] for f in fitted])  # type: ignore[index]
    sigma_ref = np.array([r[0] for r in reference])  # type: ignore[index]
    np.testing.assert_allclose(sigma, sigma_ref, rtol=1e-4)
    assert np.median(np.abs(sigma / sigma_ref - 1.0)) < 1e-6
    # No contrast: None, as before.
    flat = (profiles[0][0], np.full(profiles[0][0].size, 50.0), profiles[0][2])
    assert _fit_edges([flat], 8.0) == [None]
