"""The twin family: documented ranges, seeded sampling (whole range or outer fifth), refusal of
twins outside it where asked, and warnings instead where a cell must run."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_common.config import ConfigError
from r2s2r_sim.twin_family import (
    OUTER_FIFTH,
    TwinFamily,
    check_twin,
    family_deviations,
    load_family,
    load_twin,
    load_twin_with_warnings,
    main,
    parse_seeds,
    range_positions,
    sample_twin,
    twin_family_warnings,
)
from r2s2r_world.world import WorldParams, apply_grounding, load_world
from sim_support import NOMINAL, REPO

FAMILY = REPO / "config" / "twin" / "family.yaml"


@pytest.fixture(scope="module")
def family() -> TwinFamily:
    return load_family(FAMILY)


@pytest.fixture(scope="module")
def samples(family: TwinFamily) -> list[WorldParams]:
    nominal = load_world(NOMINAL)
    return [sample_twin(nominal, family, seed) for seed in range(60)]


def test_every_range_has_a_reason(family: TwinFamily) -> None:
    text = FAMILY.read_text()
    assert text.count("reason:") >= 40
    data = yaml.safe_load(text)

    def ranges(node: object) -> list[dict[str, object]]:
        if isinstance(node, dict):
            if "lo" in node:
                return [node]
            return [r for value in node.values() for r in ranges(value)]
        return []

    found = ranges(data)
    assert len(found) == text.count("reason:")
    assert all(len(str(r["reason"])) > 20 for r in found)


@pytest.mark.parametrize("name", ["default", "perturbed", "default_appearance"])
def test_the_shipped_twins_belong_to_the_family(
    nominal_world: WorldParams, family: TwinFamily, name: str
) -> None:
    load_twin(REPO / "config" / "twin" / f"{name}.yaml", nominal_world, family)


def test_a_seed_gives_the_same_twin_and_seeds_differ(
    nominal_world: WorldParams, family: TwinFamily, samples: list[WorldParams]
) -> None:
    again = sample_twin(nominal_world, family, 3)
    assert again.model_dump() == samples[3].model_dump()
    assert samples[3].model_dump() != samples[4].model_dump()
    assert len({twin.controller.latency_s for twin in samples}) == len(samples)


def test_samples_span_each_range_and_stay_inside(
    nominal_world: WorldParams, family: TwinFamily, samples: list[WorldParams]
) -> None:
    for twin in samples:
        check_twin(twin, nominal_world, family)  # inside every range
    latency = np.array([twin.controller.latency_s for twin in samples])
    lo, hi = family.controller.latency_s.lo, family.controller.latency_s.hi
    assert latency.min() < lo + 0.15 * (hi - lo) and latency.max() > hi - 0.15 * (hi - lo)
    # Not on the 2 ms control grid: the command path's delay is continuous.
    off_grid = np.abs(latency / 0.002 - np.round(latency / 0.002))
    assert np.mean(off_grid > 0.05) > 0.7
    nominal_gains = nominal_world.controller.gains
    kp_rel, zeta_rel = [], []
    for twin in samples:
        for joint, gains in twin.controller.gains.items():
            kp_ratio = gains.kp / nominal_gains[joint].kp
            kp_rel.append(kp_ratio - 1.0)
            zeta_rel.append(gains.kd / nominal_gains[joint].kd / math.sqrt(kp_ratio) - 1.0)
    pairs = ((kp_rel, family.controller.kp_rel), (zeta_rel, family.controller.damping_ratio_rel))
    for values, deviation in pairs:
        span = deviation.hi - deviation.lo
        assert min(values) < deviation.lo + 0.05 * span
        assert max(values) > deviation.hi - 0.05 * span
    blur = [twin.cameras.hand.blur_sigma_px for twin in samples]
    assert min(blur) >= family.cameras.hand.blur_sigma_px.lo
    assert max(blur) <= family.cameras.hand.blur_sigma_px.hi
    # Bins stay on the table: height, roll and pitch are not varied.
    for twin in samples:
        for name, params in twin.bins.items():
            nominal_pose = nominal_world.bins[name].pose
            assert params.pose.xyz_m[2] == nominal_pose.xyz_m[2]
            assert params.pose.rpy_rad[:2] == nominal_pose.rpy_rad[:2]


def test_a_written_twin_is_a_valid_world_file(tmp_path: Path) -> None:
    assert main(["--seeds", "5,7", "--out", str(tmp_path)]) == 0
    written = sorted(tmp_path.glob("twin_*.yaml"))
    assert [path.name for path in written] == ["twin_0005.yaml", "twin_0007.yaml"]
    assert written[0].read_text().startswith("# Twin sampled from")
    nominal = load_world(NOMINAL)
    family = load_family(FAMILY)
    twin = load_twin(written[0], nominal, family)
    assert twin.model_dump() == sample_twin(nominal, family, 5).model_dump()


def test_a_twin_outside_the_family_is_refused_with_key_value_and_range(
    nominal_world: WorldParams, family: TwinFamily
) -> None:
    twin = load_world(REPO / "config" / "twin" / "default.yaml")
    check_twin(twin, nominal_world, family)
    too_late = apply_grounding(twin, {"controller": {"latency_s": 0.08}})
    pattern = (
        r"controller\.latency_s = 0\.08: value \+0\.08 s is "
        r"outside the twin family's range \[0, 0\.05\] s"
    )
    with pytest.raises(ConfigError, match=pattern):
        check_twin(too_late, nominal_world, family)
    wider = nominal_world.cameras.head.fx_px * 1.05
    off = apply_grounding(twin, {"cameras": {"head": {"fx_px": wider}}})
    pattern = (
        r"cameras\.head\.fx_px = 126: relative deviation "
        r"from nominal \+0\.05 is outside .* \[-0\.03, 0\.03\]"
    )
    with pytest.raises(ConfigError, match=pattern):
        check_twin(off, nominal_world, family)
    kp = nominal_world.controller.gains["elbow_joint"].kp
    kd = nominal_world.controller.gains["elbow_joint"].kd * 1.6
    damped = apply_grounding(twin, {"controller": {"gains": {"elbow_joint": {"kp": kp, "kd": kd}}}})
    with pytest.raises(ConfigError, match=r"elbow_joint\.kd = 160: damping-ratio deviation"):
        check_twin(damped, nominal_world, family)
    other = apply_grounding(twin, {"task": {"trial_timeout_s": 30.0}})
    pattern = (
        r"task\.trial_timeout_s = 30\.0: the twin family "
        r"does not vary this key"
    )
    with pytest.raises(ConfigError, match=pattern):
        check_twin(other, nominal_world, family)


def test_a_hand_written_twin_file_out_of_range_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["bins"]["bin_1"]["pose"]["xyz_m"][1] = 0.02  # 2 cm off: outside +-10 mm
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(data))
    pattern = (
        rf"{path}: bins\.bin_1\.pose\.xyz_m\[1\] = 0\.02: "
        r"offset from nominal \+0\.02 m is outside .*\[-0\.01, 0\.01\] m"
    )
    with pytest.raises(ConfigError, match=pattern):
        load_twin(path, load_world(NOMINAL), load_family(FAMILY))


def test_a_family_file_with_a_bad_range_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(FAMILY.read_text())
    data["controller"]["latency_s"] = {"lo": 0.05, "hi": 0.0, "reason": "swapped on purpose"}
    path = tmp_path / "family.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"controller\.latency_s.*lo <= hi"):
        load_family(path)
    data["controller"]["latency_s"] = {"lo": 0.0, "hi": 0.05}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"controller\.latency_s\.reason"):
        load_family(path)


def test_parse_seeds() -> None:
    assert parse_seeds("0:3") == [0, 1, 2]
    assert parse_seeds("4,9") == [4, 9]
    assert parse_seeds("11") == [11]
    for bad in ("a:b", "3:3", "-1", ""):
        with pytest.raises(ValueError, match="seeds"):
            parse_seeds(bad)


# -- the outer fifth of every range ------------------------------------------------------------


def test_outer_fifth_draws_every_varied_axis_near_an_end_of_its_range(
    nominal_world: WorldParams, family: TwinFamily
) -> None:
    for seed in (1, 2, 3):
        twin = sample_twin(nominal_world, family, seed, outer_fraction=OUTER_FIFTH)
        check_twin(twin, nominal_world, family)  # still inside the family
        positions = range_positions(twin, nominal_world, family)
        assert len(positions) > 80
        inner = {k: p for k, p in positions.items() if 0.2 + 1e-4 < p < 0.8 - 1e-4}
        assert not inner, f"seed {seed}: axes in the middle three fifths: {inner}"
        assert min(positions.values()) >= -1e-6 and max(positions.values()) <= 1 + 1e-6
        low = sum(1 for p in positions.values() if p < 0.5)
        assert 0.25 * len(positions) < low < 0.75 * len(positions)  # both ends, at random
        # Fixed ranges stay fixed: bins stand on the table, the base is levelled.
        for name, params in twin.bins.items():
            nominal_pose = nominal_world.bins[name].pose
            assert params.pose.xyz_m[2] == nominal_pose.xyz_m[2]
            assert params.pose.rpy_rad[:2] == nominal_pose.rpy_rad[:2]
        assert twin.robot.base_pose.rpy_rad[:2] == nominal_world.robot.base_pose.rpy_rad[:2]
    # The whole range puts axes in the middle too.
    whole = range_positions(sample_twin(nominal_world, family, 1), nominal_world, family)
    assert any(0.3 < p < 0.7 for p in whole.values())


def test_outer_fifth_is_deterministic_per_seed_and_option(
    nominal_world: WorldParams, family: TwinFamily
) -> None:
    first = sample_twin(nominal_world, family, 7, outer_fraction=OUTER_FIFTH)
    again = sample_twin(nominal_world, family, 7, outer_fraction=OUTER_FIFTH)
    assert first.model_dump() == again.model_dump()
    assert first.model_dump() != sample_twin(nominal_world, family, 8, OUTER_FIFTH).model_dump()
    assert first.model_dump() != sample_twin(nominal_world, family, 7).model_dump()
    for bad in (-0.1, 0.6):
        with pytest.raises(ValueError, match="outer_fraction"):
            sample_twin(nominal_world, family, 7, outer_fraction=bad)


def test_outer_fifth_twin_files_round_trip_with_the_option_in_their_header(
    tmp_path: Path,
) -> None:
    assert main(["--seeds", "1,2", "--outer-fifth", "--out", str(tmp_path)]) == 0
    written = sorted(tmp_path.glob("twin_*.yaml"))
    assert [path.name for path in written] == [
        "twin_outer_fifth_0001.yaml",
        "twin_outer_fifth_0002.yaml",
    ]
    text = written[0].read_text()
    assert "(seed 1)" in text and "outer fifth of its range (outer_fraction 0.2)" in text
    assert "--seeds 1 --outer-fifth" in text
    nominal = load_world(NOMINAL)
    family = load_family(FAMILY)
    twin = load_twin(written[0], nominal, family)
    assert twin.model_dump() == sample_twin(nominal, family, 1, OUTER_FIFTH).model_dump()


# -- outside the family: findings and warnings, not refusals -----------------------------------


def _out_of_family(nominal_world: WorldParams) -> WorldParams:
    """The default twin with a slower command path, a lens further off and a bin 2 cm off."""
    twin = load_world(REPO / "config" / "twin" / "default.yaml")
    bin_xyz = list(twin.bins["bin_1"].pose.xyz_m)
    bin_xyz[1] = nominal_world.bins["bin_1"].pose.xyz_m[1] + 0.02
    return apply_grounding(
        twin,
        {
            "controller": {"latency_s": 0.08},
            "cameras": {  # both focal lengths: a lens 5 % off (fx alone changes the aspect)
                "hand": {
                    "fx_px": nominal_world.cameras.hand.fx_px * 1.05,
                    "fy_px": twin.cameras.hand.fy_px
                    / twin.cameras.hand.fx_px
                    * nominal_world.cameras.hand.fx_px
                    * 1.05,
                }
            },
            "bins": {"bin_1": {"pose": {"xyz_m": bin_xyz}}},
        },
    )


def test_family_deviations_give_one_line_per_parameter_outside_its_range(
    nominal_world: WorldParams, family: TwinFamily
) -> None:
    inside = load_world(REPO / "config" / "twin" / "default.yaml")
    assert family_deviations(inside, nominal_world, family) == []
    lines = family_deviations(_out_of_family(nominal_world), nominal_world, family)
    assert len(lines) == 3, lines
    hand_fx, latency, bin_y = lines  # the family's axis order: cameras, controller, bins
    assert hand_fx.startswith("cameras.hand.fx_px = 94.5: relative deviation from nominal +0.05")
    assert "[-0.03, 0.03]" in hand_fx and "focal length tolerance" in hand_fx
    assert latency.startswith("controller.latency_s = 0.08: value +0.08 s is outside")
    assert "[0, 0.05] s (command path" in latency
    assert bin_y.startswith("bins.bin_1.pose.xyz_m[1] = ")
    assert "offset from nominal +0.02 m" in bin_y and "[-0.01, 0.01] m" in bin_y
    positions = range_positions(_out_of_family(nominal_world), nominal_world, family)
    assert positions["controller.latency_s"] == pytest.approx(1.6)
    # Only the keys asked for.
    only = family_deviations(
        _out_of_family(nominal_world), nominal_world, family, keys={"controller.latency_s"}
    )
    assert only == [latency]
    # A key the family does not vary, named too (every one of them, not only the first).
    other = apply_grounding(inside, {"task": {"trial_timeout_s": 30.0}, "belt": {"speed_mps": 0.2}})
    lines = family_deviations(other, nominal_world, family)
    assert any(line.startswith("belt.speed_mps = 0.2: relative deviation") for line in lines)
    assert any(
        line.startswith("task.trial_timeout_s = 30.0: the twin family does not vary this key")
        for line in lines
    )
    # check_twin still refuses, with the first finding in full and the other keys.
    with pytest.raises(ConfigError, match=r"and 2 more outside the family: controller\.latency_s"):
        check_twin(_out_of_family(nominal_world), nominal_world, family)


def test_a_twin_outside_the_family_is_loaded_with_one_warning_per_parameter(
    tmp_path: Path, nominal_world: WorldParams, family: TwinFamily
) -> None:
    path = tmp_path / "hurried_cell.yaml"
    path.write_text(yaml.safe_dump(_out_of_family(nominal_world).model_dump(mode="json")))
    warnings: list[str] = []
    twin = load_twin_with_warnings(path, nominal_world, family, warnings.append)
    assert twin.controller.latency_s == 0.08  # used as it is: nothing clipped
    assert len(warnings) == 3
    for line, key in zip(
        warnings, ("cameras.hand.fx_px", "controller.latency_s", "bins.bin_1"), strict=True
    ):
        assert line.startswith(f"{path}: {key}")
        assert line.endswith(
            "outside the twin family: the cell is used, results are untested there"
        )
        assert "\n" not in line
    # Inside the family: silent.
    load_twin_with_warnings(
        REPO / "config" / "twin" / "default.yaml", nominal_world, family, warnings.append
    )
    assert len(warnings) == 3


def test_a_twin_file_with_an_invalid_value_is_one_line_naming_file_and_key(
    tmp_path: Path, nominal_world: WorldParams, family: TwinFamily
) -> None:
    data = yaml.safe_load((REPO / "config" / "twin" / "default.yaml").read_text())
    data["controller"]["latency_s"] = -0.01
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as caught:
        load_twin_with_warnings(path, nominal_world, family, lambda _line: None)
    message = str(caught.value)
    assert str(path) in message and "controller.latency_s" in message
    assert "\n" not in message


def test_the_real_twin_check_warns_and_never_stops_the_twin(
    tmp_path: Path, nominal_world: WorldParams
) -> None:
    twin = _out_of_family(nominal_world)
    lines = twin_family_warnings(twin, nominal_world, "hurried.yaml")  # config/twin/family.yaml
    assert [line.split(" = ")[0] for line in lines] == [
        "hurried.yaml: cameras.hand.fx_px",
        "hurried.yaml: controller.latency_s",
        "hurried.yaml: bins.bin_1.pose.xyz_m[1]",
    ]
    default = load_world(REPO / "config" / "twin" / "default.yaml")
    assert twin_family_warnings(default, nominal_world, "default.yaml") == []
    missing = twin_family_warnings(twin, nominal_world, "hurried.yaml", tmp_path / "none.yaml")
    assert len(missing) == 1
    assert missing[0].startswith("hurried.yaml: twin family check skipped (")
    assert "none.yaml: file not found" in missing[0]
