"""Typed config loading: YAML files, ROS parameter files and errors that name the key."""

from pathlib import Path

import pytest
from pydantic import Field
from r2s2r_common.config import (
    ConfigError,
    ConfigModel,
    dump_yaml,
    flatten,
    load_config,
    unflatten,
)


class Part(ConfigModel):
    mass_kg: float = Field(gt=0.0, le=10.0)


class Whole(ConfigModel):
    name: str
    parts: list[Part]
    speed_mps: float = Field(default=0.1, ge=0.0, le=1.0)


def test_load_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("name: cell\nparts:\n  - {mass_kg: 0.2}\n")
    whole = load_config(Whole, path)
    assert whole.parts[0].mass_kg == 0.2
    dump_yaml(whole, tmp_path / "out.yaml")
    assert load_config(Whole, tmp_path / "out.yaml") == whole


def test_errors_name_file_key_value_and_expectation(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: cell\nparts:\n  - {mass_kg: -1.0}\nspeed_mps: 3\ncolour: red\n")
    with pytest.raises(ConfigError) as info:
        load_config(Whole, path)
    text = str(info.value)
    assert "bad.yaml: parts.0.mass_kg = -1.0: Input should be greater than 0" in text
    assert "speed_mps = 3: Input should be less than or equal to 1" in text
    assert "colour: unknown key" in text
    with pytest.raises(ConfigError, match="file not found"):
        load_config(Whole, tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(Whole, tmp_path / "broken.yaml")


def test_ros_parameter_file_section(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(
        "/**:\n  ros__parameters: {speed_mps: 0.3}\n"
        "cell_node:\n  ros__parameters:\n    name: cell\n    parts: []\n"
    )
    whole = load_config(Whole, path, node_name="cell_node")
    assert whole.speed_mps == 0.3 and whole.name == "cell"
    only_node = tmp_path / "node.yaml"
    only_node.write_text("cell_node:\n  ros__parameters: {name: cell, parts: []}\n")
    with pytest.raises(ConfigError, match=r"no 'other: ros__parameters:' section"):
        load_config(Whole, only_node, node_name="other")


def test_flatten_unflatten_inverse() -> None:
    nested = {"a": {"b": 1, "c": {"d": [1, 2]}}, "e": "x"}
    assert flatten(nested) == {"a.b": 1, "a.c.d": [1, 2], "e": "x"}
    assert unflatten(flatten(nested)) == nested
