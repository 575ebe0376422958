import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_calibration.artifact import (
    BeltRecord,
    CameraPoseRecord,
    CameraRecord,
    ControllerRecord,
    DistortionValue,
    GroundingArtifact,
    IntrinsicsRecord,
    JointControllerRecord,
    Provenance,
    camera_link_pose,
    format_residual_table,
    load_artifact,
    pose_value,
    save_artifact,
    scene_record,
)
from r2s2r_calibration.errors import ArtifactError
from r2s2r_calibration.geometry import look_at_pose, pose_from_xyz_rpy
from r2s2r_calibration.registration.register import ElementRegistration

PROV = Provenance(source="live", n_samples=16, sample_kind="views", solver="test")
REPO = Path(__file__).resolve().parents[3]


def make_artifact() -> GroundingArtifact:
    T_world_optical = look_at_pose([0.3, 0.0, 1.6], [0.0, 0.0, 0.75], [0, 0, 1])
    registration = ElementRegistration(
        name="bin_1",
        T_base_element=pose_from_xyz_rpy([-0.4, 0.01, 0.0], [0, 0, 0.02]),
        T_correction=np.eye(4),
        fitness=0.98,
        inlier_rmse_m=0.0012,
        observability=0.02,
        n_points=900,
    )
    T_world_base = pose_from_xyz_rpy([0.0, 0.0, 0.75], [0, 0, 0])
    return GroundingArtifact(
        cameras={
            "head": CameraRecord(
                intrinsics=IntrinsicsRecord(
                    width_px=640,
                    height_px=480,
                    fx_px=521.0,
                    fy_px=519.0,
                    cx_px=321.5,
                    cy_px=242.0,
                    distortion=DistortionValue(k1=-0.1, k2=0.05, p1=0.0, p2=0.0, k3=0.0),
                    std_px=(0.2, 0.2, 0.3, 0.3),
                    reprojection_rms_px=0.07,
                    provenance=PROV,
                ),
                pose=CameraPoseRecord(
                    pose=pose_value(camera_link_pose(T_world_optical), "world", "head_camera_link"),
                    reprojection_rms_px=0.2,
                    translation_std_m=(0.001, 0.001, 0.001),
                    rotation_std_rad=(0.001, 0.001, 0.001),
                    provenance=PROV,
                ),
            )
        },
        scene={"bin_1": scene_record(registration, T_world_base, PROV)},
        belt=BeltRecord(
            roller_radius_m=0.0252,
            roller_radius_std_m=0.0001,
            speed_mps=0.101,
            residual_rms_mps=0.0003,
            relative_residual=0.003,
            provenance=PROV,
        ),
        controller=ControllerRecord(
            gains={
                "shoulder_pan_joint": JointControllerRecord(
                    kp=400.0, kd=20.0, residual_rms_rad=0.001, provenance=PROV
                )
            },
            latency_s=0.012,
        ),
    )


def test_world_overrides_mirror_world_params_names():
    overrides = make_artifact().world_overrides
    head = overrides["cameras"]["head"]
    assert head["fx_px"] == 521.0 and head["distortion"]["k1"] == -0.1
    assert set(head["pose"]) == {"xyz_m", "rpy_rad"}
    assert np.allclose(head["pose"]["xyz_m"], [0.3, 0.0, 1.6])
    # Camera link x axis is the viewing direction: from (0.3, 0, 1.6) down towards (0, 0, 0.75).
    _, pitch, yaw = head["pose"]["rpy_rad"]
    assert pitch > 0.5 and abs(abs(yaw) - math.pi) < 1e-6
    assert np.allclose(overrides["bins"]["bin_1"]["pose"]["xyz_m"], [-0.4, 0.01, 0.75])
    assert overrides["belt"] == {"roller_radius_m": 0.0252, "speed_mps": 0.101}
    assert overrides["controller"] == {
        "gains": {"shoulder_pan_joint": {"kp": 400.0, "kd": 20.0}},
        "latency_s": 0.012,
    }


def test_round_trip_and_table(tmp_path):
    artifact = make_artifact()
    path = tmp_path / "grounding.yaml"
    save_artifact(artifact, path)
    loaded = load_artifact(path)
    assert loaded == artifact
    table = format_residual_table(loaded)
    assert "cameras.head.fx_px/fy_px" in table and "scene.bin_1.pose" in table
    assert "16 views from live" in table


def test_hand_edited_overrides_are_refused(tmp_path):
    path = tmp_path / "grounding.yaml"
    save_artifact(make_artifact(), path)
    data = yaml.safe_load(path.read_text())
    data["world_overrides"]["cameras"]["head"]["fx_px"] = 600.0
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ArtifactError, match="world_overrides does not match"):
        load_artifact(path)


def test_overrides_follow_records_edited_in_memory():
    # The procedure fills records step by step (some in place); assignments re-derive.
    artifact = make_artifact()
    artifact.cameras["head"].intrinsics.fx_px = 130.0  # in place: overrides now stale
    artifact.controller = None  # an assignment re-validates and re-derives
    assert artifact.world_overrides["cameras"]["head"]["fx_px"] == 130.0
    assert "controller" not in artifact.world_overrides


def test_unknown_schema_and_missing_file(tmp_path):
    path = tmp_path / "grounding.yaml"
    path.write_text("schema_version: 2\n")
    with pytest.raises(ArtifactError, match="schema_version = 2"):
        load_artifact(path)
    with pytest.raises(ArtifactError, match="file not found"):
        load_artifact(tmp_path / "missing.yaml")


def test_camera_pose_in_wrong_frame_is_refused():
    with pytest.raises(ValueError, match="expects it in 'world'"):
        GroundingArtifact(
            cameras={
                "head": CameraRecord(
                    pose=CameraPoseRecord(
                        pose=pose_value(np.eye(4), "base_link", "head_camera_link"),
                        reprojection_rms_px=0.2,
                        translation_std_m=(0, 0, 0),
                        rotation_std_rad=(0, 0, 0),
                        provenance=PROV,
                    )
                )
            }
        )


def test_overrides_apply_to_the_simulator_world():
    world = pytest.importorskip("r2s2r_world.world")
    nominal_path = REPO / "config" / "world" / "nominal.yaml"
    if not nominal_path.is_file():
        pytest.skip("config/world/nominal.yaml not present")
    nominal = world.load_world(nominal_path)
    artifact = make_artifact()
    overrides = artifact.world_overrides
    overrides["controller"]["gains"] = {
        name: {"kp": 400.0, "kd": 20.0} for name in nominal.controller.gains
    }
    grounded = world.apply_grounding(nominal, overrides)
    assert grounded.cameras.head.fx_px == 521.0
    assert grounded.belt.roller_radius_m == 0.0252
    assert grounded.bins["bin_1"].pose.xyz_m[2] == pytest.approx(0.75)


def test_optical_convention_matches_description():
    robot = pytest.importorskip("r2s2r_description.robot")
    from r2s2r_calibration.artifact import OPTICAL_FROM_LINK_RPY_RAD

    assert np.allclose(robot.OPTICAL_FROM_LINK.rpy_rad, OPTICAL_FROM_LINK_RPY_RAD)
    assert np.allclose(robot.OPTICAL_FROM_LINK.xyz_m, 0.0)


def test_intervals_round_trip_and_an_artifact_without_them_still_loads(tmp_path):
    artifact = make_artifact()
    artifact.cameras["head"].intrinsics.interval_95_px = (0.3, 0.3, 0.4, 0.4)
    artifact.scene["bin_1"].position_interval_95_m = 0.0012
    artifact.scene["bin_1"].rotation_interval_95_rad = 0.002
    artifact.controller.latency_interval_95_s = 0.0001
    artifact.controller.gains["shoulder_pan_joint"].kp_interval_95 = 4.0
    path = tmp_path / "with.yaml"
    save_artifact(artifact, path)
    loaded = load_artifact(path)
    assert loaded == artifact
    table = format_residual_table(loaded)
    assert "95 % +-0.30 / 0.30 px" in table and "95 % within 1.20 mm / 0.115 deg" in table
    # An artifact written before the intervals existed (schema version 1 all the same).
    data = yaml.safe_load(path.read_text())
    del data["cameras"]["head"]["intrinsics"]["interval_95_px"]
    del data["scene"]["bin_1"]["position_interval_95_m"]
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(data))
    assert load_artifact(old).cameras["head"].intrinsics.interval_95_px is None
