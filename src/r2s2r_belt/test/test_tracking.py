"""Tests of the ROS-free object tracker: geometry helpers, pairing, and twin-rendered frames.

Twin frames: the twin's hidden world (config/twin/default.yaml) is rendered as "reality"; the
tracker gets either the NOMINAL camera_info + /tf_static (what the pipeline knows before world
grounding) or the twin's TRUE camera parameters (what grounding would give). Simulator truth is
used only in the assertions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from r2s2r_belt.perception import catalogue_from_world, scene_geometry_from_world
from r2s2r_belt.tracking.catalogue import Catalogue
from r2s2r_belt.tracking.config import CatalogueConfig, ObjectTrackerConfig, TrackingConfig
from r2s2r_belt.tracking.detection import Detection, FrameError, SceneGeometry, height_plane
from r2s2r_belt.tracking.evaluation import (
    Placement,
    TwinScene,
)
from r2s2r_belt.tracking.pipeline import ObjectTrackerCore
from r2s2r_belt.tracking.sync import StampSynchronizer
from r2s2r_belt.tracking.tf_tree import TransformLookupError, TransformTree
from r2s2r_belt.tracking.tracker import BeltTracker
from r2s2r_common.camera_model import CameraModel
from r2s2r_common.config import load_config
from r2s2r_description.transforms import make_transform, matrix_to_quat, quat_to_matrix
from r2s2r_world.world import WorldParams, apply_shift, load_world

REPO = Path(__file__).resolve().parents[3]
NOMINAL = REPO / "config" / "world" / "nominal.yaml"
TWIN = REPO / "config" / "twin" / "default.yaml"
TYPES = ("cube", "cylinder", "block", "sphere")


@pytest.fixture(scope="module")
def nominal() -> WorldParams:
    return load_world(NOMINAL)


@pytest.fixture(scope="module")
def twin() -> WorldParams:
    return load_world(TWIN)


@pytest.fixture(scope="module")
def scene(twin: WorldParams) -> Iterator[TwinScene]:
    twin_scene = TwinScene(twin)
    yield twin_scene
    twin_scene.backend.close()


def make_core(nominal: WorldParams, anchor: bool) -> ObjectTrackerCore:
    config = ObjectTrackerConfig(catalogue=catalogue_from_world(nominal).to_config())
    config.detection.anchor_to_belt_plane = anchor
    return ObjectTrackerCore(config)


# -- configuration and helpers --------------------------------------------------------------------
def test_parameter_file_catalogue_is_the_nominal_catalogue() -> None:
    config = load_config(
        ObjectTrackerConfig, REPO / "config" / "nodes" / "object_tracker.yaml", "object_tracker"
    )
    assert Catalogue.from_config(config.catalogue) == Catalogue.from_world_yaml(NOMINAL)
    assert ObjectTrackerConfig().catalogue == config.catalogue


def test_bad_catalogue_is_refused_with_the_field() -> None:
    with pytest.raises(ValueError, match=r"catalogue\.sizes_m has 3 values"):
        CatalogueConfig(names=["a", "b"], shapes=["box", "box"], sizes_m=[0.1] * 3, rgb=[0.5] * 6)
    with pytest.raises(ValueError, match="'cone'"):
        CatalogueConfig(names=["a"], shapes=["cone"], sizes_m=[0.1] * 3, rgb=[0.5] * 3)


def test_transform_tree_chains_through_a_common_parent() -> None:
    rng = np.random.default_rng(0)

    def random_transform() -> np.ndarray:
        quat = rng.normal(size=4)
        return make_transform(rng.normal(size=3), quat_to_matrix(quat))

    world_base, world_cam, cam_optical = random_transform(), random_transform(), random_transform()
    tree = TransformTree()
    for parent, child, transform in (
        ("world", "base_link", world_base),
        ("world", "head_camera_link", world_cam),
        ("head_camera_link", "head_camera_optical_frame", cam_optical),
    ):
        quat = matrix_to_quat(transform[:3, :3])
        tree.set_transform_quat(parent, child, transform[:3, 3], quat)
    expected = np.linalg.inv(world_base) @ world_cam @ cam_optical
    np.testing.assert_allclose(
        tree.lookup("base_link", "head_camera_optical_frame"), expected, atol=1e-12
    )
    np.testing.assert_allclose(
        tree.lookup("head_camera_optical_frame", "base_link"), np.linalg.inv(expected), atol=1e-12
    )
    tree.set_transform("elsewhere", "island", np.eye(4))
    with pytest.raises(TransformLookupError, match="not connected"):
        tree.lookup("base_link", "island")
    with pytest.raises(TransformLookupError, match="'nowhere' not in the transform tree"):
        tree.lookup("base_link", "nowhere")


def test_pixel_rays_invert_opencv_projection() -> None:
    camera = CameraModel.from_intrinsics(
        128, 96, 122.9, 122.6, 65.2, 48.3, (-0.06, 0.02, 8e-4, -5e-4, 0)
    )
    rays = camera.pixel_rays()
    points = np.concatenate([rays.reshape(-1, 2), np.ones((rays.size // 2, 1))], axis=1) * 1.3
    pixels, _ = cv2.projectPoints(
        points, np.zeros(3), np.zeros(3), camera.camera_matrix, camera.distortion
    )
    u, v = np.meshgrid(np.arange(128.0), np.arange(96.0))
    np.testing.assert_allclose(
        pixels.reshape(-1, 2), np.stack([u.ravel(), v.ravel()], 1), atol=1e-6
    )


def test_synchronizer_pairs_by_stamp_and_drops_stale() -> None:
    sync: StampSynchronizer[str, str] = StampSynchronizer(tolerance_s=0.01)
    assert sync.add_first(1.0, "rgb1") is None
    assert sync.add_first(1.1, "rgb2") is None
    pair = sync.add_second(1.105, "depth2")
    assert pair is not None and (pair.first, pair.second, pair.stamp_s) == ("rgb2", "depth2", 1.1)
    assert sync.dropped == 1  # rgb1 never got its depth
    assert sync.add_second(1.3, "depth3") is None
    assert sync.add_first(1.25, "rgb-late") is None  # 50 ms apart: no pair
    pair = sync.add_first(1.3, "rgb3")
    assert pair is not None and pair.second == "depth3"


# -- twin-rendered frames -------------------------------------------------------------------------
def _detect_each_type(
    scene: TwinScene, geometry: SceneGeometry, core: ObjectTrackerCore
) -> list[tuple[str, str | None, float]]:
    """(true type, detected type, position error m) for each type at three belt positions."""
    results = []
    for index, type_name in enumerate(TYPES):
        for belt_x_m, belt_y_m in ((-0.45, 0.06), (0.0, -0.07), (0.4, 0.0)):
            scene.start([Placement(type_name, belt_x_m, belt_y_m, 0.4 + index)], 0.1)
            scene.step_s(0.2)
            frame = scene.frame()
            detections = core.detector.detect(frame.rgb, frame.depth_m, geometry).detections
            assert len(detections) <= 1
            truth = frame.truth[0]
            if detections:
                error = float(np.linalg.norm(detections[0].position_m - truth.position_m))
                results.append((type_name, detections[0].type_name, error))
            else:
                results.append((type_name, None, math.inf))
    return results


def test_true_camera_parameters_reach_5_mm(
    scene: TwinScene, twin: WorldParams, nominal: WorldParams
) -> None:
    # What world grounding would publish: the twin's true intrinsics, distortion and mounts.
    results = _detect_each_type(scene, scene_geometry_from_world(twin), make_core(nominal, False))
    assert all(true == found for true, found, _ in results), results
    errors_mm = np.array([e for _, _, e in results]) * 1000.0
    assert float(np.median(errors_mm)) <= 5.0, errors_mm
    assert float(np.max(errors_mm)) <= 9.0, errors_mm


def test_nominal_camera_knowledge_is_biased_but_bounded(
    scene: TwinScene, twin: WorldParams, nominal: WorldParams
) -> None:
    # Before grounding the pipeline only has the datasheet intrinsics and CAD mounts; the twin's
    # camera is ~1 deg and a few mm off, and its focal length 2.4 % longer, so positions carry
    # a bias of 1-4 cm that grows along the belt. Types must still be right.
    results = _detect_each_type(scene, scene_geometry_from_world(nominal), make_core(nominal, True))
    assert all(true == found for true, found, _ in results), results
    errors_mm = np.array([e for _, _, e in results]) * 1000.0
    assert 5.0 < float(np.median(errors_mm)) <= 40.0, errors_mm
    assert float(np.max(errors_mm)) <= 60.0, errors_mm


def test_types_hold_under_the_lighting_shift(nominal: WorldParams, twin: WorldParams) -> None:
    dim = TwinScene(apply_shift(twin, "lighting"))
    try:
        results = _detect_each_type(dim, scene_geometry_from_world(twin), make_core(nominal, False))
    finally:
        dim.backend.close()
    assert all(true == found for true, found, _ in results), results
    assert float(np.median([e for _, _, e in results])) <= 0.005


def test_track_id_stable_while_riding_the_belt(
    scene: TwinScene, twin: WorldParams, nominal: WorldParams
) -> None:
    geometry = scene_geometry_from_world(twin)
    core = make_core(nominal, False)
    speed = twin.belt.speed_mps
    scene.start([Placement("block", -0.5, 0.03, 0.8)], speed)
    ids, errors = set(), []
    for step in range(30):
        scene.step_s(0.1)
        frame = scene.frame()
        output = core.process(frame.rgb, frame.depth_m, frame.stamp_s, geometry, speed)
        if step == 0:
            assert output.tracks == []  # one detection is not yet a confirmed track
            continue
        assert len(output.tracks) == 1
        track = output.tracks[0]
        ids.add(track.track_id)
        assert track.type_name == "block"
        errors.append(float(np.linalg.norm(track.position_m - frame.truth[0].position_m)))
        travel_direction = geometry.base_from_belt[:3, 0]
        assert float(track.velocity_mps @ travel_direction) == pytest.approx(speed, abs=0.01)
    assert len(ids) == 1
    assert float(np.median(errors)) <= 0.005


def test_two_objects_keep_their_own_ids(
    scene: TwinScene, twin: WorldParams, nominal: WorldParams
) -> None:
    geometry = scene_geometry_from_world(twin)
    core = make_core(nominal, False)
    scene.start([Placement("cube", -0.3, 0.07, 0.2), Placement("cylinder", -0.25, -0.07, 0.0)], 0.1)
    history: dict[int, set[str]] = {}
    for _ in range(15):
        scene.step_s(0.1)
        frame = scene.frame()
        output = core.process(frame.rgb, frame.depth_m, frame.stamp_s, geometry, 0.1)
        truth = {t.type_name: t.position_m for t in frame.truth}
        for track in output.tracks:
            history.setdefault(track.track_id, set()).add(track.type_name)
            assert np.linalg.norm(track.position_m - truth[track.type_name]) < 0.008
    assert sorted(history) == [1, 2]
    assert sorted(next(iter(t)) for t in history.values()) == ["cube", "cylinder"]


def test_frame_of_the_wrong_size_is_refused(twin: WorldParams, nominal: WorldParams) -> None:
    core = make_core(nominal, False)
    geometry = scene_geometry_from_world(twin)
    with pytest.raises(FrameError, match="expected the camera_info size"):
        core.process(np.zeros((64, 64, 3), np.uint8), np.zeros((64, 64), np.float32), 0.0, geometry)


# -- tracker on synthetic detections --------------------------------------------------------------
def _detection(type_name: str, position_m: np.ndarray) -> Detection:
    return Detection(type_name, position_m, 0.0, np.eye(3), 0.1, {}, True, 20, (0.0, 0.0))


def test_track_coasts_with_the_belt_through_an_occlusion() -> None:
    tracker = BeltTracker(TrackingConfig(min_hits=2, max_coast_s=1.0))
    belt_velocity = np.array([0.0, 0.1, 0.0])
    start = np.array([0.5, -0.4, 0.07])
    for step in range(20):
        stamp_s = 0.1 * step
        occluded = 5 <= step < 12  # 0.7 s without detections (hand over the object)
        position = start + belt_velocity * stamp_s
        detections = [] if occluded else [_detection("cube", position)]
        tracks = tracker.update(detections, stamp_s, belt_velocity)
        if step >= 1:
            assert [t.track_id for t in tracks] == [1]
            assert np.linalg.norm(tracks[0].position_m - position) < 0.002
            assert tracks[0].detected is not occluded
    tracks = tracker.update([], 3.0, belt_velocity)  # 1.1 s after the last detection
    assert tracks == [] and tracker.deleted == 1


def test_crossing_types_are_associated_by_distance_and_type() -> None:
    tracker = BeltTracker(TrackingConfig(min_hits=1, gate_m=0.06))
    a, b = np.array([0.5, 0.0, 0.07]), np.array([0.5, 0.04, 0.07])
    tracker.update([_detection("cube", a), _detection("block", b)], 0.0)
    # Next frame: each moved 2 cm towards the other; nearest-neighbour alone would swap them.
    tracks = tracker.update(
        [
            _detection("block", b - np.array([0, 0.02, 0])),
            _detection("cube", a + np.array([0, 0.025, 0])),
        ],
        0.1,
    )
    by_id = {t.track_id: t.type_name for t in tracks}
    assert by_id == {1: "cube", 2: "block"}


def test_height_plane_is_the_least_squares_plane() -> None:
    rng = np.random.default_rng(5)
    xy = rng.uniform(-0.4, 0.4, (5000, 2))
    z = 0.02 * xy[:, 0] - 0.01 * xy[:, 1] + 0.003 + rng.normal(0.0, 0.001, 5000)
    points = np.column_stack([xy, z])
    design = np.column_stack([xy, np.ones(len(z))])
    expected = np.linalg.lstsq(design, z, rcond=None)[0]
    np.testing.assert_allclose(height_plane(points), expected, rtol=0.0, atol=1e-12)
    # Points on one line span no plane: the minimum-norm least-squares answer.
    line = np.column_stack([xy[:, 0], 2.0 * xy[:, 0], z])
    expected_line = np.linalg.lstsq(np.column_stack([line[:, :2], np.ones(len(z))]), z, rcond=None)
    np.testing.assert_allclose(height_plane(line), expected_line[0], atol=1e-12)
