import numpy as np
import pytest
from r2s2r_description.robot import ARM_JOINT_NAMES
from r2s2r_sim.backend import BackendError, ObjectInstance, SceneSnapshots
from r2s2r_sim.camera_model import (
    ImageWarp,
    Intrinsics,
    blur,
    distort_normalized,
    project_points,
    undistort_normalized,
)
from r2s2r_sim.mujoco_backend import MujocoBackend, camera_intrinsics
from r2s2r_sim.scene import PRIMITIVE_DETAIL
from r2s2r_world.world import WorldParams
from sim_support import MARKER_DIAMETER_M, add_marker


def marker_world(nominal: WorldParams) -> WorldParams:
    world = nominal.model_copy(deep=True)
    add_marker(world)
    head = world.cameras.head
    head.fx_px, head.fy_px, head.cx_px, head.cy_px = 125.0, 118.0, 66.3, 61.2
    head.distortion.k1, head.distortion.k2 = -0.08, 0.02
    head.distortion.p1, head.distortion.p2 = 0.001, -0.0008
    head.blur_sigma_px = 0.8
    hand = world.cameras.hand
    hand.fx_px, hand.fy_px, hand.cx_px, hand.cy_px = 88.0, 92.0, 61.0, 65.5
    hand.distortion.k1, hand.distortion.p2 = -0.1, 0.001
    return world


def marker_centroid(image: np.ndarray) -> np.ndarray:
    rgb = image.astype(float)
    weight = np.clip(np.minimum(rgb[..., 0], rgb[..., 2]) - rgb[..., 1], 0, None)
    weight[weight < 40] = 0.0
    assert weight.sum() > 0, "marker not visible"
    v, u = np.mgrid[0 : image.shape[0], 0 : image.shape[1]]
    return np.array([(u * weight).sum(), (v * weight).sum()]) / weight.sum()


@pytest.mark.parametrize(
    ("camera", "points_cam"),
    [
        ("head_camera", [(0.0, 0.0, 1.2), (0.38, -0.3, 1.3), (-0.4, -0.25, 1.2), (0.2, 0.1, 0.9)]),
        ("hand_camera", [(0.0, 0.0, 0.3), (0.09, 0.06, 0.25), (-0.1, 0.08, 0.3)]),
    ],
)
def test_rendered_point_lands_where_project_points_says(nominal_world, camera, points_cam) -> None:
    world = marker_world(nominal_world)
    params = world.cameras.head if camera == "head_camera" else world.cameras.hand
    backend = MujocoBackend()
    backend.reset(world, seed=0, objects=[ObjectInstance("marker_0", "marker")])
    optical = backend.body_pose(f"{camera}_optical_frame")
    for point in points_cam:
        world_point = optical[:3, :3] @ np.array(point) + optical[:3, 3]
        backend.spawn_object("marker_0", world_point)
        image = backend.render(camera)
        assert image.shape == (params.height_px, params.width_px, 3) and image.dtype == np.uint8
        expected = project_points(
            np.array([point]), camera_intrinsics(params), params.distortion.as_array()
        )[0]
        found = marker_centroid(image)
        assert np.linalg.norm(found - expected) < 1.0, (point, found, expected)
        depth = backend.render_depth(camera)
        u, v = np.round(expected).astype(int)
        assert depth.dtype == np.float32
        assert depth[v, u] == pytest.approx(point[2] - MARKER_DIAMETER_M / 2, abs=0.01)


def test_distortion_round_trip_and_projection() -> None:
    rng = np.random.default_rng(0)
    points = rng.uniform(-0.5, 0.5, size=(200, 2))
    coefficients = (-0.1, 0.03, 0.001, -0.002, 0.0)
    np.testing.assert_allclose(
        undistort_normalized(distort_normalized(points, coefficients), coefficients),
        points,
        atol=1e-9,
    )
    intrinsics = Intrinsics(128, 96, 100.0, 110.0, 60.0, 50.0)
    uv = project_points(np.array([[0.1, -0.2, 2.0]]), intrinsics)
    np.testing.assert_allclose(uv, [[65.0, 39.0]])
    with pytest.raises(ValueError, match="z > 0"):
        project_points(np.array([[0.0, 0.0, -1.0]]), intrinsics)


def test_warp_identity_for_nominal_camera_and_blur_spreads_energy() -> None:
    warp = ImageWarp(Intrinsics(64, 64, 50.0, 50.0, 31.5, 31.5))
    assert warp.identity and warp.render_focal_px == 50.0
    image = np.zeros((64, 64, 3), np.uint8)
    image[32, 32] = 255
    assert warp.apply(image) is image
    blurred = blur(image, 1.0)
    assert blurred[32, 32, 0] < 255 and blurred[32, 33, 0] > 0
    assert blur(image, 0.0) is image


@pytest.mark.parametrize("camera", ["head_camera", "hand_camera"])
def test_render_rgbd_is_render_and_render_depth(nominal_world, camera) -> None:
    """One render pass gives the RGB and depth arrays of the two renderers, bit for bit."""
    world = marker_world(nominal_world)
    backend = MujocoBackend()
    backend.reset(world, seed=0, objects=[ObjectInstance("marker_0", "marker")])
    optical = backend.body_pose(f"{camera}_optical_frame")
    backend.spawn_object("marker_0", optical[:3, :3] @ np.array([0.05, 0.02, 0.3]) + optical[:3, 3])
    rng = np.random.default_rng(3)
    home = backend.joint_positions()
    for _ in range(6):
        backend.data.qpos[backend._qadr] = home + rng.normal(0.0, 0.15, home.size)
        backend.step(5)
        rgb, depth = backend.render_rgbd(camera)
        expected_rgb, expected_depth = backend.render(camera), backend.render_depth(camera)
        assert rgb.dtype == np.uint8 and depth.dtype == np.float32
        np.testing.assert_array_equal(rgb, expected_rgb)
        np.testing.assert_array_equal(depth, expected_depth)
        assert np.count_nonzero(depth) > depth.size // 2


@pytest.mark.parametrize("camera", ["head_camera", "hand_camera"])
def test_coarser_primitives_draw_nearly_the_same_image(nominal_world, camera) -> None:
    """``primitive_detail`` changes only how round shapes are drawn: a few edge pixels."""
    frames = []
    for detail in (PRIMITIVE_DETAIL, (14, 8)):
        backend = MujocoBackend(primitive_detail=detail)
        backend.reset(nominal_world, seed=0)
        backend.step(50)
        assert (backend.model.vis.quality.numslices, backend.model.vis.quality.numstacks) == detail
        frames.append((backend.render(camera).astype(int), backend.joint_positions()))
        backend.close()
    (fine, fine_joints), (coarse, coarse_joints) = frames
    np.testing.assert_array_equal(fine_joints, coarse_joints)  # physics never reads it
    changed = np.abs(fine - coarse).max(axis=-1) > 0
    assert 0 < changed.mean() < 0.1  # the capsules' and cylinders' outlines
    assert np.abs(fine - coarse).mean() < 1.0


def test_a_shown_scene_snapshot_renders_its_instant_and_leaves_the_physics(nominal_world) -> None:
    """Renders of a snapshot shown later are the renders of its instant, array for array (the
    arm, a hand-held camera and an object all moved since); stepping on is unchanged."""
    world = marker_world(nominal_world)
    runs = []
    for show in (False, True):
        backend = MujocoBackend()
        assert isinstance(backend, SceneSnapshots)
        backend.reset(world, seed=0, objects=[ObjectInstance("marker_0", "marker")])
        optical = backend.body_pose("head_camera_optical_frame")
        backend.spawn_object(
            "marker_0", optical[:3, :3] @ np.array([0.05, 0.02, 0.9]) + optical[:3, 3]
        )
        home = backend.joint_positions()[: len(ARM_JOINT_NAMES)]
        backend.command_trajectory(ARM_JOINT_NAMES, [0.3], [home + 0.3])
        kept = []
        for _ in range(4):
            backend.step(40)  # the renders after mj_step draw the step's starting kinematics
            images = (*backend.render_rgbd("head_camera"), backend.render("hand_camera"))
            kept.append((backend.scene_snapshot(), images))
        if show:
            now = backend.scene_snapshot()
            for snapshot, images in kept:
                backend.show_scene_snapshot(snapshot)
                shown = (*backend.render_rgbd("head_camera"), backend.render("hand_camera"))
                for expected, image in zip(images, shown, strict=True):
                    np.testing.assert_array_equal(image, expected)
            assert not np.array_equal(kept[0][1][2], kept[-1][1][2])  # the hand camera moved
            backend.show_scene_snapshot(now)
        backend.step(40)
        runs.append(
            (backend.joint_positions(), backend.object_poses()["marker_0"].position_m,
             backend.render("hand_camera"))
        )  # fmt: skip
        backend.close()
    for plain, shown in zip(*runs, strict=True):
        np.testing.assert_array_equal(shown, plain)
    other = MujocoBackend(enable_rendering=False)
    other.reset(nominal_world, seed=0)
    with pytest.raises(BackendError, match="scene_snapshot"):
        other.show_scene_snapshot(kept[0][0])  # another model's
    with pytest.raises(BackendError, match="scene_snapshot"):
        other.show_scene_snapshot(object())


def _episode(backend: MujocoBackend, world: WorldParams, object_type: str) -> list[np.ndarray]:
    """A short episode: the object spawned in the head camera's view, the arm moving."""
    backend.reset(world, seed=0, objects=[ObjectInstance("object_0", object_type)])
    optical = backend.body_pose("head_camera_optical_frame")
    backend.spawn_object("object_0", optical[:3, :3] @ np.array([0.05, 0.02, 0.9]) + optical[:3, 3])
    home = backend.joint_positions()[: len(ARM_JOINT_NAMES)]
    backend.command_trajectory(ARM_JOINT_NAMES, [0.2], [home + 0.2])
    backend.step(60)
    rgb, depth = backend.render_rgbd("head_camera")
    return [rgb, depth, backend.render("hand_camera"), backend.joint_positions()]


def test_a_kept_scene_gives_what_a_new_build_gives(nominal_world) -> None:
    """Episodes switching between object sets reuse their compiled scenes (least recently
    used dropped beyond ``scene_cache_size``) and give what a backend built fresh gives."""
    world = marker_world(nominal_world)
    kept = MujocoBackend(scene_cache_size=2)
    runs = [(kind, _episode(kept, world, kind)) for kind in ("cube", "cylinder", "cube", "block")]
    for kind, arrays in runs:
        fresh = MujocoBackend(scene_cache_size=1)
        for got, expected in zip(arrays, _episode(fresh, world, kind), strict=True):
            np.testing.assert_array_equal(got, expected, err_msg=kind)
        fresh.close()
    kept.reset(world, seed=0, objects=[ObjectInstance("object_0", "cube")])
    cube_model = kept.model
    kept.reset(world, seed=0, objects=[ObjectInstance("object_0", "block")])
    kept.reset(world, seed=0, objects=[ObjectInstance("object_0", "cube")])
    assert kept.model is cube_model  # kept: not compiled again
    kept.reset(world, seed=0, objects=[ObjectInstance("object_0", "cylinder")])
    kept.reset(world, seed=0, objects=[ObjectInstance("object_0", "block")])
    kept.reset(world, seed=0, objects=[ObjectInstance("object_0", "cube")])
    assert kept.model is not cube_model  # dropped for the two used since
    kept.close()
    with pytest.raises(BackendError, match="scene_cache_size"):
        MujocoBackend(scene_cache_size=0)


def test_the_camera_sized_offscreen_buffer_draws_the_same_pixels(
    nominal_world, monkeypatch
) -> None:
    """Renderers draw into a buffer of the cameras' size (scene.build_model), not MuJoCo's
    640 x 480: the same RGB and depth, array for array."""
    import r2s2r_sim.mujoco_backend as mujoco_backend
    from r2s2r_sim.scene import build_model

    world = marker_world(nominal_world)
    sized = MujocoBackend()
    sized.reset(world, seed=0)
    assert (sized.model.vis.global_.offwidth, sized.model.vis.global_.offheight) == (128, 128)

    def default_buffer(*args, **kwargs):
        model = build_model(*args, **kwargs)
        model.vis.global_.offwidth, model.vis.global_.offheight = 640, 480
        return model

    monkeypatch.setattr(mujoco_backend, "build_model", default_buffer)
    default = MujocoBackend()
    for kind in ("cube", "cylinder"):
        for got, expected in zip(
            _episode(sized, world, kind), _episode(default, world, kind), strict=True
        ):
            np.testing.assert_array_equal(got, expected, err_msg=kind)
    assert default.model.vis.global_.offwidth == 640
    sized.close()
    default.close()
