"""CellPerception: the belt_speed and object_tracker processing without ROS, as the nodes run it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from r2s2r_belt.perception import (
    CellPerception,
    PerceptionConfig,
    load_belt_speed_config,
    load_tracker_config,
    scene_geometry_from_world,
)
from r2s2r_belt.tracking.evaluation import Placement, TwinScene
from r2s2r_belt.tracking.pipeline import ObjectTrackerCore
from r2s2r_recorder.config import ConversionConfig
from r2s2r_world.world import load_world

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "config"


def perception_config(knowledge: str = "world/nominal.yaml") -> PerceptionConfig:
    return PerceptionConfig(
        belt=load_belt_speed_config(CONFIG / "nodes" / "belt_speed.yaml"),
        tracker=load_tracker_config(CONFIG / "nodes" / "object_tracker.yaml"),
        geometry=scene_geometry_from_world(load_world(CONFIG / knowledge)),
    )


def test_belt_speed_follows_the_encoder_with_the_configured_radius() -> None:
    config = perception_config()
    perception = CellPerception(config)
    assert perception.belt_speed(0.0) is None  # nothing measured: no made-up value
    radius = config.belt.encoder.roller_radius_m
    true_radius = radius * 1.02  # a worn roller: the estimate is 2 % low, as on the cell
    for k in range(200):
        time_s = 0.01 * k
        perception.add_encoder(time_s, 0.12 * time_s / true_radius)
    speed = perception.belt_speed(2.0)
    assert speed is not None and speed.valid and "encoder" in speed.sources
    assert speed.speed_mps == pytest.approx(0.12 / 1.02, rel=1e-3)


def test_tracks_are_the_tracker_cores_own_on_the_same_frames() -> None:
    twin = load_world(CONFIG / "twin" / "default.yaml")
    config = perception_config()
    perception = CellPerception(config)
    core = ObjectTrackerCore(config.tracker)
    scene = TwinScene(twin)
    try:
        scene.start([Placement("block", -0.3, 0.02, 0.4)], twin.belt.speed_mps)
        seen = 0
        for k in range(8):
            scene.step_s(0.1)
            frame = scene.frame()
            for j in range(10):
                time_s = frame.stamp_s - 0.1 + 0.01 * (j + 1)
                perception.add_encoder(time_s, twin.belt.speed_mps * time_s / 0.03)
            tracks = perception.add_head_frame(frame.stamp_s, frame.rgb, frame.depth_m)
            speed = perception.belt_speed(frame.stamp_s)
            expected = core.process(
                frame.rgb,
                frame.depth_m,
                frame.stamp_s,
                config.geometry,
                None if speed is None else speed.speed_mps,
            )
            assert tracks is not None and len(tracks) == len(expected.tracks), k
            for view, snapshot in zip(tracks, expected.tracks, strict=True):
                assert view.type_name == snapshot.type_name
                np.testing.assert_allclose(view.position_m, snapshot.position_m)
            seen += len(tracks)
        assert seen > 0
        truth = scene.frame().truth[0]
        assert tracks[0].type_name == "block"
        assert np.linalg.norm(tracks[0].position_m - truth.position_m) < 0.05
        assert perception.add_head_frame(1.0, frame.rgb, None) is None  # no depth: no tracks
    finally:
        scene.backend.close()


def test_every_consumer_lists_the_trackers_catalogue() -> None:
    tracker = load_tracker_config(CONFIG / "nodes" / "object_tracker.yaml")
    names = list(tracker.catalogue.names)
    assert ConversionConfig().object_track_types == names
    import yaml

    node = yaml.safe_load((CONFIG / "nodes" / "policy_inference.yaml").read_text())
    assert node["policy_inference"]["ros__parameters"]["object_track_types"] == names


def test_cell_knowledge_sets_what_a_grounded_cell_runs_with() -> None:
    from r2s2r_belt.perception import CellKnowledge
    from r2s2r_belt.perception import perception_config as cell_perception_config

    artifact = REPO / "tests" / "data" / "grounding_default_twin.yaml"
    nominal = CellKnowledge.ungrounded()
    grounded = CellKnowledge.from_artifact(artifact)
    assert not nominal.grounded and grounded.grounded
    before = cell_perception_config(nominal)
    after = cell_perception_config(grounded)
    # Before grounding: the node files as shipped (datasheet radius, belt-plane anchoring).
    assert (
        before.belt.encoder.roller_radius_m
        == load_belt_speed_config(CONFIG / "nodes" / "belt_speed.yaml").encoder.roller_radius_m
    )
    assert before.tracker.detection.anchor_to_belt_plane
    # Grounded: the artifact's radius and camera, extrinsics trusted (no anchoring).
    twin = load_world(CONFIG / "twin" / "default.yaml")
    assert after.belt.encoder.roller_radius_m == pytest.approx(twin.belt.roller_radius_m, rel=0.01)
    assert after.belt.encoder.roller_radius_m != before.belt.encoder.roller_radius_m
    assert not after.tracker.detection.anchor_to_belt_plane
    fx_true = twin.cameras.head.fx_px
    assert after.geometry.camera.camera_matrix[0, 0] == pytest.approx(fx_true, rel=0.01)
    assert before.geometry.camera.camera_matrix[0, 0] == pytest.approx(120.0)
    # A simulator's own world: exact, with the grounded settings.
    exact = cell_perception_config(CellKnowledge.exact(twin))
    assert exact.belt.encoder.roller_radius_m == twin.belt.roller_radius_m
    assert not exact.tracker.detection.anchor_to_belt_plane
