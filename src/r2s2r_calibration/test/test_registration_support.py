"""Bins standing on a table: known directions held, the table left out of the bin's fit."""

import numpy as np
import pytest
from pydantic import ValidationError
from r2s2r_calibration.geometry import look_at_pose, pose_from_xyz_rpy
from r2s2r_calibration.registration.elements import BoxPrimitive, PoseAxis, SceneElement
from r2s2r_calibration.registration.register import RegistrationConfig, register_scene_elements
from r2s2r_calibration.synthetic import render_depth

# A coarse depth camera 2 m away and 1 m above, like the cell's 128 px head camera.
K_DEPTH = np.array([[120.0, 0.0, 63.5], [0.0, 120.0, 63.5], [0.0, 0.0, 1.0]])
SIZE = (128, 128)
T_BASE_CAMERA = look_at_pose([1.7, 0.1, 1.0], [0.0, 0.0, 0.05], [0, 0, 1])
CONFIG = RegistrationConfig(min_points=60, icp_distances_m=[0.04, 0.02, 0.01])
TABLE = SceneElement(
    name="table",
    boxes=[BoxPrimitive(size_m=(1.2, 1.2, 0.05), xyz_m=(0.0, 0.0, -0.025))],
    xyz_m=(0.0, 0.0, 0.0),
)


def bin_on_table(held: list[PoseAxis], on_support: bool) -> SceneElement:
    """The cell's bin (24 cm inside, 1 cm walls, 12 cm high), its frame on the table top."""
    inner, wall, height = 0.24, 0.01, 0.12
    outer = inner + 2 * wall
    return SceneElement(
        name="bin_1",
        boxes=[
            BoxPrimitive(size_m=(outer, outer, wall), xyz_m=(0.0, 0.0, wall / 2)),
            BoxPrimitive(size_m=(wall, outer, height), xyz_m=((outer - wall) / 2, 0.0, 0.06)),
            BoxPrimitive(size_m=(wall, outer, height), xyz_m=(-(outer - wall) / 2, 0.0, 0.06)),
            BoxPrimitive(size_m=(inner, wall, height), xyz_m=(0.0, (outer - wall) / 2, 0.06)),
            BoxPrimitive(size_m=(inner, wall, height), xyz_m=(0.0, -(outer - wall) / 2, 0.06)),
        ],
        xyz_m=(0.0, 0.0, 0.0),
        held=held,
        on_support=on_support,
    )


def local_error(estimate: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Translation (m) and rotation vector (rad) of the estimate in the true element frame."""
    from scipy.spatial.transform import Rotation

    translation = truth[:3, :3].T @ (estimate[:3, 3] - truth[:3, 3])
    rotation = Rotation.from_matrix(truth[:3, :3].T @ estimate[:3, :3]).as_rotvec()
    return translation, rotation


@pytest.fixture(scope="module")
def scene() -> tuple[np.ndarray, np.ndarray]:
    """Depth of the bin on the table, placed 6 mm / -4 mm / 1.1 deg off nominal."""
    truth = pose_from_xyz_rpy((0.006, -0.004, 0.0), (0.0, 0.0, 0.02))
    element = bin_on_table([], False)
    depth = render_depth(
        [(TABLE, TABLE.nominal_pose()), (element, truth)], K_DEPTH, SIZE, T_BASE_CAMERA, 0.001
    )
    return truth, depth


def test_known_directions_stay_at_nominal_and_are_reported(scene: tuple) -> None:
    truth, depth = scene
    element = bin_on_table(["rx", "ry", "tz"], True)
    outcome = register_scene_elements(depth, K_DEPTH, T_BASE_CAMERA, [element], CONFIG)
    result = outcome.registered["bin_1"]
    translation, rotation = local_error(result.T_base_element, truth)
    # Height, roll and pitch are exactly the nominal (the table top's), not fitted.
    assert result.T_base_element[2, 3] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(result.T_base_element[2, :3], [0.0, 0.0, 1.0], atol=1e-12)
    assert np.linalg.norm(translation[:2]) < 0.002, translation
    assert abs(np.degrees(rotation[2])) < 0.3, np.degrees(rotation)
    assert result.held_at_nominal == [
        "rotation about bin_1 x (known)",
        "rotation about bin_1 y (known)",
        "translation along bin_1 z (known)",
    ]


def test_the_table_next_to_the_walls_is_left_out(scene: tuple) -> None:
    truth, depth = scene
    errors = {}
    for on_support in (False, True):
        element = bin_on_table(["rx", "ry", "tz"], on_support)
        outcome = register_scene_elements(depth, K_DEPTH, T_BASE_CAMERA, [element], CONFIG)
        translation, _ = local_error(outcome.registered["bin_1"].T_base_element, truth)
        errors[on_support] = float(np.linalg.norm(translation[:2]))
    assert errors[True] <= errors[False] + 1e-4, errors


def test_holding_every_direction_is_rejected() -> None:
    with pytest.raises(ValidationError, match="holds every pose direction"):
        bin_on_table(["rx", "ry", "rz", "tx", "ty", "tz"], True)
