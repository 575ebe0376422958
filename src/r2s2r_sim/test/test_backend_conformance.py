"""Conformance of every simulator backend to the :class:`SimBackend` protocol.

Each case runs once per backend kind of :data:`r2s2r_sim.backend_config.BACKEND_KINDS`, built
through :func:`make_backend` as configuration selects it. MuJoCo runs here; Isaac Sim runs
where ``isaacsim`` imports on an RTX GPU and is otherwise collected and skipped with the reason
computed by :func:`isaac_unavailable_reason` (import attempt + GPU check). Tolerances are per
backend: MuJoCo is bit-exact where it can be; PhysX/RTX get physical tolerances.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from r2s2r_description.robot import (
    ALL_JOINT_NAMES,
    ARM_JOINT_NAMES,
    HAND_JOINT_NAMES,
    HOME_POSITIONS,
)
from r2s2r_sim.backend import BackendError, ObjectInstance, SimBackend
from r2s2r_sim.backend_config import (
    BACKEND_KINDS,
    ClosableSimBackend,
    SimBackendConfig,
    make_backend,
)
from r2s2r_sim.camera_model import Intrinsics, project_points
from r2s2r_sim.controllers import TrajectoryError
from r2s2r_sim.isaac_backend import isaac_unavailable_reason
from r2s2r_world.world import WorldParams, load_world
from sim_support import (
    MARKER_DIAMETER_M,
    NOMINAL,
    add_marker,
    cylinder_grasp_waypoints,
    whole_hand,
)

OBJECTS = (ObjectInstance("object_0", "cube"), ObjectInstance("marker_0", "marker"))


@dataclass(frozen=True)
class Tolerances:
    """How closely a backend must match the protocol's promises."""

    repeat_atol: float  # same seed, same commands: same trajectory
    joint_rad: float  # a held joint target after settling
    pixel_px: float  # a known point's image position
    depth_m: float  # depth at that point
    belt_speed_rel: float  # object speed on the belt vs the configured speed
    contact_force_rel: float  # normal force of an object at rest vs its weight


TOLERANCES = {
    "mujoco": Tolerances(0.0, 0.02, 1.0, 0.01, 0.03, 0.1),
    "isaac": Tolerances(1e-5, 0.02, 1.5, 0.01, 0.05, 0.2),
}


def _kind_params() -> list[object]:
    params: list[object] = []
    for kind in BACKEND_KINDS:
        reason = isaac_unavailable_reason() if kind == "isaac" else None
        marks = [pytest.mark.skipif(reason is not None, reason=f"isaac: {reason}")]
        params.append(pytest.param(kind, marks=marks, id=kind))
    return params


def conformance_world() -> WorldParams:
    """The nominal world with a magenta marker sphere type and a brighter ambient light."""
    world = load_world(NOMINAL)
    add_marker(world)
    return world


@pytest.fixture(scope="module", params=_kind_params())
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def backend(kind: str) -> Iterator[ClosableSimBackend]:
    built = make_backend(SimBackendConfig(kind=kind))  # type: ignore[arg-type]
    yield built
    built.close()
    shutdown = getattr(built, "shutdown", None)  # Isaac Sim: end the Kit app
    if shutdown is not None:
        shutdown()


@pytest.fixture
def world() -> WorldParams:
    return conformance_world()


def belt_point(world: WorldParams, x_m: float, height_m: float) -> np.ndarray:
    """A point on the belt's centre line, ``height_m`` above its surface (``world``)."""
    pose = world.belt.pose.to_pose().matrix()
    return (pose @ np.array([x_m, 0.0, height_m, 1.0]))[:3]


def snapshot(backend: SimBackend) -> np.ndarray:
    """Joints, object states, time and belt travel as one vector."""
    parts = [backend.joint_positions(), backend.joint_velocities()]
    for pose in backend.object_poses().values():
        parts += [pose.position_m, pose.quat_wxyz, pose.linear_velocity_mps]
    parts.append(np.array([backend.time_s, backend.belt_travel_m]))
    return np.concatenate(parts)


def scripted_episode(backend: SimBackend, world: WorldParams, seed: int) -> np.ndarray:
    """Reset, spawn a cube on the belt, move the arm and the hand; return the final snapshot."""
    backend.reset(world, seed, OBJECTS)
    backend.spawn_object("object_0", belt_point(world, -0.3, 0.026))
    home = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
    backend.command_trajectory(ARM_JOINT_NAMES, [0.4, 0.8], np.array([home + 0.1, home - 0.05]))
    backend.command_trajectory(HAND_JOINT_NAMES, [0.3], [[0.3] * len(HAND_JOINT_NAMES)])
    backend.step(500)
    return snapshot(backend)


def test_implements_the_protocol(backend: ClosableSimBackend, world: WorldParams) -> None:
    backend.reset(world, 0, OBJECTS)  # properties raise BackendError before the first reset
    assert isinstance(backend, SimBackend)
    assert callable(backend.close)


def test_reset_is_deterministic_per_seed(
    backend: SimBackend, world: WorldParams, kind: str
) -> None:
    first = scripted_episode(backend, world, seed=5)
    again = scripted_episode(backend, world, seed=5)
    np.testing.assert_allclose(again, first, rtol=0.0, atol=TOLERANCES[kind].repeat_atol)
    assert backend.time_s == pytest.approx(500 * world.physics.timestep_s)


def test_reset_puts_the_robot_home_and_objects_parked(
    backend: SimBackend, world: WorldParams
) -> None:
    scripted_episode(backend, world, seed=1)
    backend.reset(world, 2, OBJECTS)
    home = np.array([HOME_POSITIONS[n] for n in ALL_JOINT_NAMES])
    np.testing.assert_allclose(backend.joint_positions(), home, atol=1e-9)
    np.testing.assert_allclose(backend.joint_velocities(), 0.0, atol=1e-9)
    assert backend.time_s == 0.0 and backend.belt_travel_m == 0.0
    poses = backend.object_poses()
    assert set(poses) == {o.name for o in OBJECTS}
    assert not any(p.active for p in poses.values())
    assert all(p.position_m[2] < 0.0 for p in poses.values())  # under the floor


def test_step_advances_time_by_the_physics_timestep(
    backend: SimBackend, world: WorldParams
) -> None:
    backend.reset(world, 0, OBJECTS)
    dt = world.physics.timestep_s
    backend.step(0)
    assert backend.time_s == 0.0
    backend.step(1)
    assert backend.time_s == pytest.approx(dt, rel=1e-12)
    backend.step(37)  # not a multiple of the control period
    assert backend.time_s == pytest.approx(38 * dt, rel=1e-9)


@pytest.mark.parametrize("group", ["arm", "hand"])
def test_joint_targets_round_trip(
    backend: SimBackend, world: WorldParams, kind: str, group: str
) -> None:
    backend.reset(world, 0, OBJECTS)
    names = ARM_JOINT_NAMES if group == "arm" else HAND_JOINT_NAMES
    start = backend.joint_positions()
    index = [ALL_JOINT_NAMES.index(n) for n in names]
    target = start[index] + np.linspace(0.05, 0.25, len(names))
    backend.set_joint_targets(names, target.tolist())
    backend.step(round(1.5 / world.physics.timestep_s))
    measured = backend.joint_positions()
    np.testing.assert_allclose(measured[index], target, atol=TOLERANCES[kind].joint_rad)
    others = [i for i in range(len(ALL_JOINT_NAMES)) if i not in index]
    np.testing.assert_allclose(measured[others], start[others], atol=TOLERANCES[kind].joint_rad)
    assert np.abs(backend.joint_velocities()).max() < 0.05  # settled


def test_bad_names_raise(backend: SimBackend, world: WorldParams) -> None:
    backend.reset(world, 0, OBJECTS)
    with pytest.raises(TrajectoryError, match="joint_names"):
        backend.set_joint_targets(["no_such_joint"], [0.0])
    with pytest.raises(BackendError, match="unknown camera"):
        backend.render("no_camera")
    with pytest.raises(BackendError, match="unknown body"):
        backend.body_pose("no_such_link")
    with pytest.raises(BackendError, match="unknown object"):
        backend.spawn_object("object_9", (0.0, 0.0, 1.0))


def test_camera_extrinsics_match_the_world(backend: SimBackend, world: WorldParams) -> None:
    backend.reset(world, 0, OBJECTS)
    head = backend.body_pose("head_camera_link")
    np.testing.assert_allclose(head, world.cameras.head.pose.to_pose().matrix(), atol=1e-6)
    palm = backend.body_pose("palm_link")
    hand_in_palm = np.linalg.inv(palm) @ backend.body_pose("hand_camera_link")
    np.testing.assert_allclose(hand_in_palm, world.cameras.hand.pose.to_pose().matrix(), atol=1e-5)
    for camera in ("head_camera", "hand_camera"):  # optical frame: z forward, x right, y down
        link = backend.body_pose(f"{camera}_link")
        optical = backend.body_pose(f"{camera}_optical_frame")
        np.testing.assert_allclose(optical[:3, 2], link[:3, 0], atol=1e-6)
        np.testing.assert_allclose(optical[:3, 0], -link[:3, 1], atol=1e-6)


@pytest.mark.parametrize(
    ("camera", "point_cam"),
    [
        ("head_camera", (0.0, 0.0, 1.1)),
        ("head_camera", (0.3, -0.2, 1.2)),
        ("hand_camera", (0.05, -0.04, 0.3)),
    ],
)
def test_known_point_projects_where_expected(
    backend: SimBackend, world: WorldParams, kind: str, camera: str, point_cam: tuple[float, ...]
) -> None:
    backend.reset(world, 0, OBJECTS)
    params = world.cameras.head if camera == "head_camera" else world.cameras.hand
    optical = backend.body_pose(f"{camera}_optical_frame")
    backend.spawn_object("marker_0", optical[:3, :3] @ np.array(point_cam) + optical[:3, 3])
    image = backend.render(camera)
    rgb = image.astype(float)
    weight = np.clip(np.minimum(rgb[..., 0], rgb[..., 2]) - rgb[..., 1], 0, None)
    weight[weight < 40] = 0.0
    assert weight.sum() > 0, "marker not visible"
    v, u = np.mgrid[0 : image.shape[0], 0 : image.shape[1]]
    found = np.array([(u * weight).sum(), (v * weight).sum()]) / weight.sum()
    intrinsics = Intrinsics(
        params.width_px, params.height_px, params.fx_px, params.fy_px, params.cx_px, params.cy_px
    )
    expected = project_points(np.array([point_cam]), intrinsics, params.distortion.as_array())[0]
    assert np.linalg.norm(found - expected) < TOLERANCES[kind].pixel_px, (found, expected)
    depth = backend.render_depth(camera)
    col, row = np.round(expected).astype(int)
    assert depth[row, col] == pytest.approx(
        point_cam[2] - MARKER_DIAMETER_M / 2, abs=TOLERANCES[kind].depth_m
    )


@pytest.mark.parametrize("camera", ["head_camera", "hand_camera"])
def test_image_shapes_dtypes_and_ranges(
    backend: SimBackend, world: WorldParams, camera: str
) -> None:
    backend.reset(world, 0, OBJECTS)
    params = world.cameras.head if camera == "head_camera" else world.cameras.hand
    rgb = backend.render(camera)
    assert rgb.shape == (params.height_px, params.width_px, 3) and rgb.dtype == np.uint8
    assert rgb.std() > 5.0  # a scene, not a blank frame
    depth = backend.render_depth(camera)
    assert depth.shape == (params.height_px, params.width_px) and depth.dtype == np.float32
    assert np.isfinite(depth).all()
    assert depth.min() >= 0.0 and depth.max() <= params.depth_far_m
    assert (depth > 0.0).mean() > 0.5  # most pixels see the cell within range


def test_objects_ride_the_belt_at_the_configured_speed(
    backend: SimBackend, world: WorldParams, kind: str
) -> None:
    speed = 0.12
    world.belt.speed_mps = speed
    backend.reset(world, 0, OBJECTS)
    backend.spawn_object("object_0", belt_point(world, -0.5, 0.026))
    poses = backend.object_poses()
    assert poses["object_0"].active and not poses["marker_0"].active
    dt = world.physics.timestep_s
    backend.step(round(1.0 / dt))  # land and catch up with the belt
    belt_x = world.belt.pose.to_pose().matrix()[:3, 0]
    start = backend.object_poses()["object_0"].position_m
    travel_before = backend.belt_travel_m
    backend.step(round(1.0 / dt))
    pose = backend.object_poses()["object_0"]
    moved = float((pose.position_m - start) @ belt_x)
    assert moved == pytest.approx(speed * 1.0, rel=TOLERANCES[kind].belt_speed_rel)
    assert float(pose.linear_velocity_mps @ belt_x) == pytest.approx(
        speed, rel=TOLERANCES[kind].belt_speed_rel
    )
    assert backend.belt_travel_m - travel_before == pytest.approx(speed * 1.0, rel=1e-9)
    backend.set_belt_speed(0.0)
    backend.step(round(0.5 / dt))
    assert np.linalg.norm(backend.object_poses()["object_0"].linear_velocity_mps) < 0.01


def test_contacts_carry_an_object_resting_on_the_belt(
    backend: SimBackend, world: WorldParams, kind: str
) -> None:
    world.belt.speed_mps = 0.0
    backend.reset(world, 0, OBJECTS)
    backend.spawn_object("object_0", belt_point(world, 0.0, 0.026))
    backend.step(round(0.5 / world.physics.timestep_s))
    on_belt = [c for c in backend.contacts() if {c.body1, c.body2} == {"belt_link", "object_0"}]
    assert on_belt
    weight_n = world.objects["cube"].mass_kg * 9.81
    total = sum(c.normal_force_n for c in on_belt)
    assert total == pytest.approx(weight_n, rel=TOLERANCES[kind].contact_force_rel)
    top = belt_point(world, 0.0, 0.0)
    for contact in on_belt:
        assert abs(contact.position_m[2] - top[2]) < 0.005  # on the belt's surface


def test_grasp_is_seen_in_the_contacts(backend: SimBackend, world: WorldParams) -> None:
    world.belt.speed_mps = 0.0
    cylinder = (ObjectInstance("object_0", "cylinder"),)
    backend.reset(world, 0, cylinder)
    height = world.objects["cylinder"].size_m[2]
    backend.spawn_object("object_0", belt_point(world, 0.0, height / 2 + 0.001))
    backend.step(150)
    obj = backend.object_poses()["object_0"].position_m
    above, at, lifted = cylinder_grasp_waypoints(world, obj, height)
    backend.command_trajectory(ARM_JOINT_NAMES, [1.5, 3.0], np.array([above, at]))
    backend.command_trajectory(HAND_JOINT_NAMES, [1.0], [whole_hand(-0.35)])
    backend.step(1700)
    backend.command_trajectory(HAND_JOINT_NAMES, [0.6], [whole_hand(1.0)])
    backend.step(400)
    backend.command_trajectory(ARM_JOINT_NAMES, [1.5], np.array([lifted]))
    backend.step(1000)
    held = backend.object_poses()["object_0"]
    assert held.position_m[2] > obj[2] + 0.17
    touching = {
        (c.body1 if c.body2 == "object_0" else c.body2)
        for c in backend.contacts()
        if "object_0" in (c.body1, c.body2)
    }
    assert any(b.startswith("thumb") for b in touching)
    assert any(b.startswith(("index", "middle", "ring")) for b in touching)
    assert "belt_link" not in touching


def test_state_round_trip(backend: SimBackend, world: WorldParams, kind: str) -> None:
    scripted_episode(backend, world, seed=3)
    state = backend.get_state()
    home = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
    backend.command_trajectory(ARM_JOINT_NAMES, [0.3], np.array([home + 0.08]))
    backend.step(300)
    first = snapshot(backend)
    backend.step(100)  # wander off
    backend.set_state(state)
    backend.command_trajectory(ARM_JOINT_NAMES, [0.3], np.array([home + 0.08]))
    backend.step(300)
    tolerance = max(TOLERANCES[kind].repeat_atol, 1e-3 if kind == "isaac" else 0.0)
    np.testing.assert_allclose(snapshot(backend), first, rtol=0.0, atol=tolerance)


def test_close_then_reuse(backend: ClosableSimBackend, world: WorldParams, kind: str) -> None:
    before = scripted_episode(backend, world, seed=7)
    image_before = backend.render("head_camera")
    backend.close()
    after = scripted_episode(backend, world, seed=7)  # reset rebuilds what close freed
    np.testing.assert_allclose(after, before, rtol=0.0, atol=TOLERANCES[kind].repeat_atol)
    image_after = backend.render("head_camera")
    assert image_after.shape == image_before.shape
    assert np.abs(image_after.astype(int) - image_before.astype(int)).mean() < 1.0
