"""Degeneracy-aware registration: a long belt whose ends are out of view, refusals per element."""

import numpy as np
import pytest
from r2s2r_calibration.errors import RegistrationError
from r2s2r_calibration.geometry import look_at_pose, pose_from_xyz_rpy
from r2s2r_calibration.registration.elements import BoxPrimitive, PoseAxis, SceneElement
from r2s2r_calibration.registration.register import (
    register_element,
    register_scene,
    register_scene_elements,
)
from r2s2r_calibration.synthetic import render_depth

K_DEPTH = np.array([[200.0, 0.0, 160.0], [0.0, 200.0, 120.0], [0.0, 0.0, 1.0]])
SIZE = (320, 240)
# Looking down at the belt's middle from its -y side: its ends (x = +-1.5 m) are out of view.
T_BASE_CAMERA = look_at_pose([0.0, -0.6, 0.7], [0.0, 0.0, 0.0], [0, 0, 1])


def long_belt(unobservable_ok: list[PoseAxis] | None = None) -> SceneElement:
    """A 3 m belt (surface on a frame) along x, on a floor that is not modelled."""
    return SceneElement(
        name="belt",
        boxes=[
            BoxPrimitive(size_m=(3.0, 0.3, 0.04), xyz_m=(0.0, 0.0, -0.02)),
            BoxPrimitive(size_m=(2.9, 0.34, 0.3), xyz_m=(0.0, 0.0, -0.19)),
        ],
        xyz_m=(0.0, 0.0, 0.0),
        unobservable_ok=["tx"] if unobservable_ok is None else unobservable_ok,
    )


def small_bin(name: str, xyz: tuple[float, float, float]) -> SceneElement:
    """An open box next to the belt."""
    wall, size = 0.008, 0.2
    return SceneElement(
        name=name,
        boxes=[
            BoxPrimitive(size_m=(size, size, wall), xyz_m=(0.0, 0.0, wall / 2)),
            BoxPrimitive(size_m=(wall, size, 0.1), xyz_m=((size - wall) / 2, 0.0, 0.05)),
            BoxPrimitive(size_m=(wall, size, 0.1), xyz_m=(-(size - wall) / 2, 0.0, 0.05)),
            BoxPrimitive(size_m=(size, wall, 0.1), xyz_m=(0.0, (size - wall) / 2, 0.05)),
            BoxPrimitive(size_m=(size, wall, 0.1), xyz_m=(0.0, -(size - wall) / 2, 0.05)),
        ],
        xyz_m=xyz,
    )


def local_error(estimate: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, float]:
    """Translation error in the true element frame (m) and rotation error (deg)."""
    translation = truth[:3, :3].T @ (estimate[:3, 3] - truth[:3, 3])
    cos = np.clip((np.trace(estimate[:3, :3].T @ truth[:3, :3]) - 1) / 2, -1, 1)
    return translation, float(np.degrees(np.arccos(cos)))


@pytest.fixture(scope="module")
def belt_scene() -> tuple[SceneElement, np.ndarray, np.ndarray]:
    belt = long_belt()
    offset = pose_from_xyz_rpy((0.012, -0.008, 0.005), (0.004, -0.003, 0.012))
    truth = belt.nominal_pose() @ offset
    depth = render_depth([(belt, truth)], K_DEPTH, SIZE, T_BASE_CAMERA, 0.0005)
    return belt, truth, depth


def test_belt_travel_axis_is_held_at_nominal_and_reported(belt_scene: tuple) -> None:
    belt, truth, depth = belt_scene
    result = register_scene(depth, K_DEPTH, T_BASE_CAMERA, [belt])["belt"]
    error, rotation_deg = local_error(result.T_base_element, truth)
    assert abs(error[1]) < 0.001 and abs(error[2]) < 0.001, error
    assert rotation_deg < 0.1
    assert result.held_at_nominal == ["translation along belt x"]
    # Along travel the registered belt stays where the nominal one is (12 mm from the truth).
    nominal_x = (belt.nominal_pose()[:3, 3] - truth[:3, 3]) @ truth[:3, 0]
    assert error[0] == pytest.approx(nominal_x, abs=0.001)
    assert abs(nominal_x) > 0.01
    assert result.observability > 1e-3


def test_belt_without_the_allowance_is_refused(belt_scene: tuple) -> None:
    _, _, depth = belt_scene
    with pytest.raises(RegistrationError, match="translation along belt x"):
        register_scene(depth, K_DEPTH, T_BASE_CAMERA, [long_belt([])])


def test_a_bin_seen_as_one_plane_is_refused_even_with_the_belt_allowance() -> None:
    # Straight down into a bin larger than the view: only its floor (one plane) is seen.
    bin_ = small_bin("bin_0", (0.0, 0.0, 0.0)).model_copy(update={"unobservable_ok": ["tx"]})
    camera = look_at_pose([0.0, 0.0, 0.12], [0.0, 0.0, 0.0], [1, 0, 0])
    depth = render_depth([(bin_, bin_.nominal_pose())], K_DEPTH, SIZE, camera, 0.0005)
    points = _points(depth, camera)
    with pytest.raises(RegistrationError, match="only a plane is visible") as error:
        register_element(points, bin_, camera_position_base_m=camera[:3, 3])
    assert "allowed: tx" in str(error.value)


def _points(depth: np.ndarray, camera: np.ndarray) -> np.ndarray:
    from r2s2r_calibration.registration.depth import depth_to_points

    points = depth_to_points(depth, K_DEPTH)
    return points @ camera[:3, :3].T + camera[:3, 3]


def test_a_failing_element_does_not_stop_the_others(belt_scene: tuple) -> None:
    belt, truth, _ = belt_scene
    bin_ = small_bin("bin_0", (0.25, -0.45, -0.34))
    bin_truth = bin_.nominal_pose() @ pose_from_xyz_rpy((0.006, -0.004, 0.0), (0.0, 0.0, 0.02))
    depth = render_depth([(belt, truth), (bin_, bin_truth)], K_DEPTH, SIZE, T_BASE_CAMERA, 0.0005)
    missing = small_bin("bin_1", (3.0, 3.0, 0.0))
    elements = [belt, missing, bin_]
    outcome = register_scene_elements(depth, K_DEPTH, T_BASE_CAMERA, elements)
    assert sorted(outcome.registered) == ["belt", "bin_0"]
    assert list(outcome.failures) == ["bin_1"]
    assert "observed points near 'bin_1'" in outcome.failures["bin_1"]
    error, rotation_deg = local_error(outcome.registered["bin_0"].T_base_element, bin_truth)
    assert np.linalg.norm(error) < 0.002 and rotation_deg < 0.3
    with pytest.raises(RegistrationError, match=r"refused 1 of 3 elements \(bin_1\)"):
        register_scene(depth, K_DEPTH, T_BASE_CAMERA, elements)
