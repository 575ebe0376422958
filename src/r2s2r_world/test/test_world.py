from pathlib import Path

import pytest
import yaml
from r2s2r_common.config import ConfigError
from r2s2r_description.cameras import CAMERAS
from r2s2r_world.world import (
    SHIFT_NAMES,
    CamerasParams,
    WorldParams,
    apply_grounding,
    apply_shift,
    camera_params,
    load_world,
)
from world_support import NOMINAL, REPO


def write_variant(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(NOMINAL.read_text())
    edit(data)
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", ["world/nominal.yaml", "twin/default.yaml", "twin/perturbed.yaml"])
def test_shipped_worlds_load(name: str) -> None:
    world = load_world(REPO / "config" / name)
    assert set(SHIFT_NAMES) <= set(world.shifts)
    for shift in SHIFT_NAMES:
        apply_shift(world, shift)


def test_twins_differ_from_nominal_on_every_grounding_axis(nominal_world: WorldParams) -> None:
    for name in ("default", "perturbed"):
        twin = load_world(REPO / "config" / "twin" / f"{name}.yaml")
        for cam in ("head", "hand"):
            a, b = getattr(nominal_world.cameras, cam), getattr(twin.cameras, cam)
            assert 0.01 < abs(b.fx_px / a.fx_px - 1) < 0.05
            assert 0.01 < abs(b.fy_px / a.fy_px - 1) < 0.05
            assert 0.5 < abs(b.cx_px - a.cx_px) < 6 and 0.5 < abs(b.cy_px - a.cy_px) < 6
            assert b.distortion.as_array() != a.distortion.as_array()
            assert 0.5 <= b.blur_sigma_px <= 1.5
            assert b.pose.xyz_m != a.pose.xyz_m and b.pose.rpy_rad != a.pose.rpy_rad
        assert twin.robot.base_pose != nominal_world.robot.base_pose
        assert twin.belt.pose != nominal_world.belt.pose
        assert all(twin.bins[n].pose != nominal_world.bins[n].pose for n in nominal_world.bins)
        for joint, gains in nominal_world.controller.gains.items():
            ratio = twin.controller.gains[joint].kp / gains.kp
            assert 0.1 <= abs(ratio - 1) <= 0.35, joint
        assert 0.01 <= twin.controller.latency_s <= 0.03
        assert 0.02 <= abs(twin.belt.speed_mps / nominal_world.belt.speed_mps - 1) <= 0.1
        for obj, params in nominal_world.objects.items():
            assert twin.objects[obj].mass_kg != params.mass_kg
            assert twin.objects[obj].friction != params.friction


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path = write_variant(tmp_path, lambda d: d["belt"].update(speed_mpss=0.1))
    with pytest.raises(ConfigError, match=r"belt\.speed_mpss: unknown key"):
        load_world(path)


def test_negative_mass_is_named(tmp_path: Path) -> None:
    path = write_variant(tmp_path, lambda d: d["objects"]["cube"].update(mass_kg=-0.1))
    with pytest.raises(
        ConfigError, match=r"objects\.cube\.mass_kg = -0\.1: Input should be greater than 0"
    ):
        load_world(path)


def test_out_of_range_names_value_and_range(tmp_path: Path) -> None:
    path = write_variant(tmp_path, lambda d: d["belt"].update(speed_mps=3.0))
    with pytest.raises(
        ConfigError, match=r"belt\.speed_mps = 3\.0: Input should be less than or equal to 1"
    ):
        load_world(path)
    path = write_variant(tmp_path, lambda d: d["cameras"]["head"].update(cx_px=200.0))
    with pytest.raises(ConfigError, match=r"cx_px = 200\.0: expected within \[0, 127\]"):
        load_world(path)


def test_bad_cross_reference_and_missing_shift(tmp_path: Path) -> None:
    path = write_variant(tmp_path, lambda d: d["objects"]["cube"].update(target_bin="bin_9"))
    with pytest.raises(ConfigError, match=r"target_bin = 'bin_9': expected one of"):
        load_world(path)
    path = write_variant(tmp_path, lambda d: d["shifts"].pop("lighting"))
    with pytest.raises(ConfigError, match=r"missing shift conditions \['lighting'\]"):
        load_world(path)
    path = write_variant(
        tmp_path, lambda d: d["shifts"]["lighting"].update(lighting={"diffuse": -1})
    )
    with pytest.raises(ConfigError, match=r"shifts\.lighting.*lighting\.diffuse = -1"):
        load_world(path)


def test_shifts_override_only_their_part(nominal_world: WorldParams) -> None:
    shifted = apply_shift(nominal_world, "belt_speed")
    assert shifted.belt.speed_mps == pytest.approx(0.15)
    assert shifted.cameras == nominal_world.cameras
    unseen = apply_shift(nominal_world, "unseen_object")
    assert {k for k, w in unseen.randomization.object_mix.items() if w > 0} == {"sphere"}
    with pytest.raises(ConfigError, match="unknown; expected one of"):
        apply_shift(nominal_world, "fog")


def test_apply_grounding_is_a_validated_deep_override(nominal_world: WorldParams) -> None:
    grounded = apply_grounding(
        nominal_world,
        {
            "cameras": {"head": {"fx_px": 123.0, "distortion": {"k1": -0.05}}},
            "controller": {"gains": {"elbow_joint": {"kp": 1500.0}}, "latency_s": 0.02},
        },
    )
    assert grounded.cameras.head.fx_px == 123.0
    assert grounded.cameras.head.fy_px == nominal_world.cameras.head.fy_px
    assert grounded.cameras.head.distortion.k1 == -0.05
    assert grounded.controller.gains["elbow_joint"].kp == 1500.0
    assert (
        grounded.controller.gains["elbow_joint"].kd
        == nominal_world.controller.gains["elbow_joint"].kd
    )
    assert nominal_world.cameras.head.fx_px == 120.0  # the nominal world is untouched
    with pytest.raises(ConfigError, match=r"grounding artifact: cameras\.head\.fxx: unknown key"):
        apply_grounding(nominal_world, {"cameras": {"head": {"fxx": 1.0}}})
    with pytest.raises(ConfigError, match=r"controller\.gains.*unknown joints \['elbow'\]"):
        apply_grounding(nominal_world, {"controller": {"gains": {"elbow": {"kp": 1.0, "kd": 0.0}}}})


def test_camera_params_by_name(nominal_world: WorldParams) -> None:
    assert camera_params(nominal_world, "head_camera") is nominal_world.cameras.head
    assert camera_params(nominal_world, "hand_camera") is nominal_world.cameras.hand
    assert set(CamerasParams.model_fields) == {camera.world_key for camera in CAMERAS}
    with pytest.raises(
        ValueError, match=r"unknown camera 'belly_camera'.*head_camera.*hand_camera"
    ):
        camera_params(nominal_world, "belly_camera")
