"""The twin family: documented ranges, seeded sampling, refusal of twins outside it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_common.config import ConfigError
from r2s2r_sim.twin_family import (
    TwinFamily,
    check_twin,
    load_family,
    load_twin,
    main,
    parse_seeds,
    sample_twin,
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


@pytest.mark.parametrize("name", ["default", "perturbed"])
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
