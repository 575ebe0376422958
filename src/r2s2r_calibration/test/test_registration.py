import numpy as np
import pytest
from r2s2r_calibration.errors import DepthImageError, RegistrationError
from r2s2r_calibration.geometry import look_at_pose, pose_error, pose_from_xyz_rpy
from r2s2r_calibration.registration.depth import depth_to_points
from r2s2r_calibration.registration.register import RegistrationConfig, register_scene
from r2s2r_calibration.synthetic import cell_elements, render_depth

K_DEPTH = np.array([[250.0, 0.0, 160.0], [0.0, 250.0, 120.0], [0.0, 0.0, 1.0]])
SIZE = (320, 240)
T_BASE_CAMERA = look_at_pose([-0.3, 0.55, 0.9], [0.45, 0.0, 0.0], [0, 0, 1])


@pytest.fixture(scope="module")
def scene():
    rng = np.random.default_rng(0)
    elements = cell_elements(2)
    truth = {}
    for element in elements:
        offset = pose_from_xyz_rpy(
            rng.uniform(-0.015, 0.015, 3) * [1, 1, 0.3], rng.uniform(-0.03, 0.03, 3) * [0.2, 0.2, 1]
        )
        truth[element.name] = element.nominal_pose() @ offset
    depth = render_depth(
        [(e, truth[e.name]) for e in elements], K_DEPTH, SIZE, T_BASE_CAMERA, 0.001
    )
    return elements, truth, depth


def test_registration_recovers_every_element(scene):
    elements, truth, depth = scene
    results = register_scene(depth, K_DEPTH, T_BASE_CAMERA, elements)
    for element in elements:
        result = results[element.name]
        translation_error, rotation_error = pose_error(result.T_base_element, truth[element.name])
        nominal_error, _ = pose_error(element.nominal_pose(), truth[element.name])
        assert translation_error < 0.003, element.name
        assert np.degrees(rotation_error) < 0.5, element.name
        assert nominal_error > 3 * translation_error
        assert result.fitness > 0.9
        assert result.inlier_rmse_m < 0.003
        correction_applied = result.T_correction @ element.nominal_pose()
        assert np.allclose(correction_applied, result.T_base_element)


def test_only_a_plane_visible_is_unobservable(scene):
    elements, truth, _ = scene
    # Looking straight down at the middle of the table: no edges or sides in view.
    camera = look_at_pose([0.45, -0.1, 0.35], [0.45, -0.1, 0.0], [1, 0, 0])
    table = elements[0]
    depth = render_depth([(table, truth["table"])], K_DEPTH, SIZE, camera, 0.001)
    with pytest.raises(RegistrationError, match="only a plane is visible"):
        register_scene(depth, K_DEPTH, camera, [table])


def test_wrong_geometry_gives_low_fitness(scene):
    elements, _, depth = scene
    wrong_bin = elements[2].model_copy(deep=True)
    wrong_bin.boxes = [
        b.model_copy(update={"size_m": (0.03, 0.03, 0.2)}) for b in wrong_bin.boxes[:1]
    ]
    with pytest.raises(RegistrationError, match=r"fitness|points"):
        register_scene(depth, K_DEPTH, T_BASE_CAMERA, [elements[0], wrong_bin])


def test_depth_dtype_and_content_errors():
    with pytest.raises(DepthImageError, match="16UC1 millimetres"):
        depth_to_points(np.full((240, 320), 900, np.uint16), K_DEPTH)
    with pytest.raises(DepthImageError, match="single-channel"):
        depth_to_points(np.ones((240, 320, 3), np.float32), K_DEPTH)
    with pytest.raises(DepthImageError, match="no valid values"):
        depth_to_points(np.full((240, 320), np.nan, np.float32), K_DEPTH)
    with pytest.raises(DepthImageError, match="no valid values"):
        depth_to_points(np.zeros((240, 320), np.float32), K_DEPTH)
    with pytest.raises(DepthImageError, match="another image size"):
        depth_to_points(np.ones((100, 100), np.float32), K_DEPTH)


def test_depth_to_points_back_projects_exactly():
    depth = np.full((240, 320), 2.0, np.float32)
    depth[0, 0] = np.nan
    points = depth_to_points(depth, K_DEPTH)
    assert points.shape == (240 * 320 - 1, 3)
    # Pixel (319, 239) at 2 m.
    assert np.allclose(points[-1], [(319 - 160) / 250 * 2, (239 - 120) / 250 * 2, 2.0])


def test_too_few_points_is_refused(scene):
    elements, _, depth = scene
    far_bin = elements[3].model_copy(update={"xyz_m": (3.0, 3.0, 0.0)})
    with pytest.raises(RegistrationError, match="observed points near 'bin_1'"):
        register_scene(depth, K_DEPTH, T_BASE_CAMERA, [far_bin], RegistrationConfig())
