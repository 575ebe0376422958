"""Unit tests of the moving-frame segment transform and retiming (known geometry, no simulator)."""

import math

import numpy as np
import pytest
from r2s2r_datagen.mimicgen.geometry import (
    MovingFrame,
    equivalent_yaw,
    fit_linear_motion,
    interpolate_poses,
    relative_poses,
    retimed_start_s,
    symmetry_period_rad,
    transform_segment,
    yaw_of_matrix,
    yaw_phase_in,
    yaw_pose,
)

BELT = np.array([0.0, -1.0, 0.0])  # belt travel direction in base_link (nominal cell)
GRASP_S = 2.0
OFFSET = np.array([0.01, -0.005, 0.06])  # palm relative to the object at the grasp (object frame)
PALM_YAW = 0.3  # palm yaw relative to the object's yaw at the grasp


def source_segment(frame: MovingFrame, duration_s: float = 3.0, dt_s: float = 0.1):
    """A reach that ends on the moving object: far at t0, on the object from GRASP_S on."""
    times = frame.start_s + np.arange(0.0, duration_s + 1e-9, dt_s)
    start = np.array([-0.25, 0.05, 0.45])
    poses = []
    for t in times:
        tau = t - frame.start_s
        s = min(tau / GRASP_S, 1.0)
        s = s**3 * (10 - 15 * s + 6 * s**2)
        on_object = frame.matrix(t) @ yaw_pose(OFFSET, PALM_YAW)
        position = start + (on_object[:3, 3] - start) * s
        poses.append(yaw_pose(position, yaw_of_matrix(on_object)))
    return times, np.stack(poses)


@pytest.fixture
def frames():
    source = MovingFrame(10.0, np.array([-0.55, 0.20, 0.025]), 0.4, BELT * 0.105)
    target = MovingFrame(3.0, np.array([-0.60, 0.31, 0.028]), 1.1, BELT * 0.13)
    return source, target


def test_transformed_segment_lands_on_the_moved_object(frames):
    source, target = frames
    times, poses = source_segment(source)
    new_times, new_poses = transform_segment(poses, times, source, target)
    np.testing.assert_allclose(new_times - target.start_s, times - source.start_s)
    for t, pose in zip(new_times, new_poses, strict=True):
        if t - target.start_s < GRASP_S - 1e-9:
            continue
        # On the NEW object (at its new speed) with the same relative pose as in the source.
        expected = target.matrix(t) @ yaw_pose(OFFSET, PALM_YAW)
        np.testing.assert_allclose(pose, expected, atol=1e-9)
    # Relative velocity zero after the grasp: the palm moves with the new belt speed.
    after = new_times - target.start_s >= GRASP_S
    velocity = np.diff(new_poses[after][:, :3, 3], axis=0) / 0.1
    np.testing.assert_allclose(velocity, np.tile(BELT * 0.13, (velocity.shape[0], 1)), atol=1e-9)


def test_static_frames_miss_by_the_speed_difference(frames):
    """MimicGen's pose read once (both frames static): the source object's travel, carried
    into the new frame, replaces the new object's travel: miss = ‖Rz(Δψ) v_src t − v_new t‖."""
    source, target = frames
    times, poses = source_segment(source)
    _, static_poses = transform_segment(poses, times, source.static(), target.static())
    grasp = round(GRASP_S / 0.1)
    object_at_grasp = target.matrix(target.start_s + GRASP_S)
    relative = np.linalg.inv(object_at_grasp) @ static_poses[grasp]
    miss = float(np.linalg.norm(relative[:3, 3] - OFFSET))
    rotation = yaw_pose(np.zeros(3), target.yaw_rad - source.yaw_rad)[:3, :3]
    expected = np.linalg.norm(rotation @ source.velocity_mps - target.velocity_mps) * GRASP_S
    assert miss == pytest.approx(expected, abs=1e-9)
    assert miss > 0.05  # more than a cube's width: a missed grasp


def test_yaw_phase_in_keeps_the_grasp_and_the_far_end(frames):
    source, target = frames
    times, poses = source_segment(source)
    relative = relative_poses(poses, times, source)
    weights = yaw_phase_in(relative[:, :3, 3], near_m=0.12)
    assert weights[0] == 0.0 and np.all(np.diff(weights) >= 0.0)
    new_times, new_poses = transform_segment(poses, times, source, target, weights)
    # The far end is only translated (by the frames' offset), not swung about the object.
    translation = target.origin_m - source.origin_m
    np.testing.assert_allclose(new_poses[0][:3, 3], poses[0][:3, 3] + translation, atol=1e-9)
    for t, pose in zip(new_times, new_poses, strict=True):
        if t - target.start_s >= GRASP_S - 1e-9:
            np.testing.assert_allclose(
                pose, target.matrix(t) @ yaw_pose(OFFSET, PALM_YAW), atol=1e-9
            )


def test_retimed_start_puts_the_new_object_where_the_source_one_was():
    # Source object at along = 0.10 m at its segment start; new object at along = -0.20 m now.
    start = retimed_start_s(0.10, -0.20, now_s=1.5, speed_mps=0.12)
    assert start == pytest.approx(1.5 + 0.30 / 0.12)
    with pytest.raises(ValueError, match="speed_mps"):
        retimed_start_s(0.1, 0.0, 0.0, 0.0)


def test_equivalent_yaw_uses_the_object_symmetry():
    cube = symmetry_period_rad("box", (0.05, 0.05, 0.05))
    block = symmetry_period_rad("box", (0.04, 0.07, 0.045))
    assert cube == pytest.approx(math.pi / 2) and block == pytest.approx(math.pi)
    assert symmetry_period_rad("cylinder", (0.05, 0.05, 0.07)) == 0.0
    assert equivalent_yaw(2.0, 0.3, cube) == pytest.approx(2.0 - math.pi / 2)
    assert equivalent_yaw(2.0, 0.3, block) == pytest.approx(2.0 - math.pi)
    assert equivalent_yaw(2.0, 0.3, 0.0) == pytest.approx(0.3)


def test_fit_linear_motion_recovers_the_belt_velocity():
    rng = np.random.default_rng(3)
    times = np.arange(0.0, 3.0, 0.1)
    truth = np.array([-0.55, 0.3, 0.025]) + np.outer(times - 1.0, BELT * 0.11)
    position, velocity = fit_linear_motion(times, truth + rng.normal(0, 0.002, truth.shape), 1.0)
    np.testing.assert_allclose(velocity, BELT * 0.11, atol=0.003)
    np.testing.assert_allclose(position, [-0.55, 0.3, 0.025], atol=0.002)


def test_interpolate_poses_ends_and_midpoint():
    a, b = yaw_pose([0, 0, 0], 0.0), yaw_pose([1.0, 2.0, 0.0], 1.0)
    out = interpolate_poses(a, b, np.array([0.0, 0.5, 1.0]))
    np.testing.assert_allclose(out[0], a, atol=1e-12)
    np.testing.assert_allclose(out[2], b, atol=1e-12)
    assert yaw_of_matrix(out[1]) == pytest.approx(0.5)
    np.testing.assert_allclose(out[1][:3, 3], [0.5, 1.0, 0.0])
