"""The one angle-wrapping and transform-inversion home equals, bit for bit, what it replaced.

Each ``_old_*`` function is a verbatim copy of a helper that lived elsewhere before issue 35
(the belt encoder's ``wrap_to_pi``, the tracker's ``wrap_angle`` and ``invert_transform``, the
twin family's ``_wrap_rad``, the demonstrator's and MimicGen's ``wrap_angle``, calibration's
``invert_pose``); the new functions must give the same bits on edge values and random ones.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from r2s2r_description.transforms import (
    invert_transform,
    make_transform,
    rpy_to_matrix,
    wrap_angle,
)


def _old_encoder_wrap_to_pi(angle_rad: float) -> float:
    return (angle_rad + math.pi) % (2.0 * math.pi) - math.pi


def _old_tracker_wrap_angle(angle_rad: float, period_rad: float = 2.0 * np.pi) -> float:
    return float((angle_rad + period_rad / 2.0) % period_rad - period_rad / 2.0)


def _old_twin_family_wrap_rad(angle: float) -> float:
    return float((angle + math.pi) % (2.0 * math.pi) - math.pi)


def _old_atan2_wrap_angle(angle_rad: float) -> float:
    return math.atan2(math.sin(angle_rad), math.cos(angle_rad))


def _old_tracker_invert_transform(transform: np.ndarray) -> np.ndarray:
    inverse = np.eye(4)
    rotation = transform[:3, :3]
    inverse[:3, :3] = rotation.T
    inverse[:3, 3] = -rotation.T @ transform[:3, 3]
    return inverse


def _old_calibration_invert_pose(pose: np.ndarray) -> np.ndarray:
    matrix = np.asarray(pose, dtype=float)
    rotation = matrix[:3, :3]
    result = np.eye(4)
    result[:3, :3] = np.asarray(rotation.T, dtype=float).reshape(3, 3)
    result[:3, 3] = np.asarray(-rotation.T @ matrix[:3, 3], dtype=float).reshape(3)
    return result


def _edge_angles() -> list[float]:
    """Multiples of pi/4 up to +-4 pi, their neighbouring floats, zeros, large and random."""
    values = [0.0, -0.0, 1e-300, -1e-300, 1e6 + 0.5, -1e6 - 0.5, 123.456, -98.765]
    for k in range(-16, 17):
        centre = k * math.pi / 4.0
        values += [centre, math.nextafter(centre, math.inf), math.nextafter(centre, -math.inf)]
    values += [math.pi, -math.pi, 2.0 * math.pi, -2.0 * math.pi, 3.0 * math.pi, -3.0 * math.pi]
    values += list(np.random.default_rng(35).uniform(-50.0, 50.0, 2000))
    return [float(v) for v in values]


def _bits(value: float) -> bytes:
    return np.float64(value).tobytes()


def test_default_wrap_is_the_floor_modulo_of_the_encoder_tracker_and_twin_family() -> None:
    for angle in _edge_angles():
        new = wrap_angle(angle)
        assert _bits(new) == _bits(_old_encoder_wrap_to_pi(angle)), angle
        assert _bits(new) == _bits(_old_tracker_wrap_angle(angle)), angle
        assert _bits(new) == _bits(_old_twin_family_wrap_rad(angle)), angle
        # numpy scalars (the tracker's yaw) give the same bits as Python floats
        assert _bits(wrap_angle(np.float64(angle))) == _bits(new), angle
    for period in (math.pi / 2.0, math.pi, 2.0 * math.pi, 0.7):
        for angle in _edge_angles():
            old = _old_tracker_wrap_angle(angle, period)
            assert _bits(wrap_angle(angle, period)) == _bits(old), (angle, period)


def test_upper_closed_wrap_is_the_atan2_of_the_demonstrator_and_mimicgen() -> None:
    for angle in _edge_angles():
        expected = _old_atan2_wrap_angle(angle)
        assert _bits(wrap_angle(angle, upper_closed=True)) == _bits(expected), angle


def test_the_two_conventions_at_pi() -> None:
    assert wrap_angle(math.pi) == -math.pi
    assert wrap_angle(-math.pi) == -math.pi
    assert wrap_angle(math.pi, upper_closed=True) == math.pi
    assert wrap_angle(-math.pi, upper_closed=True) == -math.pi
    assert wrap_angle(3.0 * math.pi / 4.0, math.pi / 2.0) == pytest.approx(-math.pi / 4.0)
    with pytest.raises(ValueError, match="upper_closed"):
        wrap_angle(1.0, math.pi, upper_closed=True)


def test_invert_transform_equals_both_old_inversions() -> None:
    rng = np.random.default_rng(35)
    transforms = [np.eye(4), make_transform([0.0, 0.0, 0.0], rpy_to_matrix([math.pi, 0.0, 0.0]))]
    for _ in range(200):
        rpy = rng.uniform(-math.pi, math.pi, 3)
        transforms.append(make_transform(rng.uniform(-3.0, 3.0, 3), rpy_to_matrix(rpy)))
    for transform in transforms:
        new = invert_transform(transform)
        assert new.dtype == np.float64
        assert new.tobytes() == _old_tracker_invert_transform(transform).tobytes()
        assert new.tobytes() == _old_calibration_invert_pose(transform).tobytes()
        # array-likes, as calibration passed them
        assert invert_transform(transform.tolist()).tobytes() == new.tobytes()
        np.testing.assert_allclose(new @ transform, np.eye(4), atol=1e-12)
