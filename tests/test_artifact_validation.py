"""One grounding-artifact validator on every path that reads an artifact (issue 36, bad 5).

The probes a new user tried (unknown keys, a 4-element rpy, a quaternion, a negative focal
length, units, records that contradict the overrides, ...) against the one check
(:func:`r2s2r_world.grounding.read_artifact` / ``check_artifact``), then one refusal per
consumer: generation's loader, the grounded cell's launch arguments, the perception's cell
knowledge, the export tool, and ``r2s2r evaluate --artifact``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from r2s2r_common.config import ConfigError
from r2s2r_world.grounding import check_artifact, read_artifact

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "grounding_default_twin.yaml"

Edit = Callable[[dict[str, Any]], None]


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(FIXTURE.read_text())
    return data


def _set(path: str, value: Any) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for one in edits:
            one(data)

    return edit


HEAD = "world_overrides.cameras.head"
HEAD_RECORD = "cameras.head"

PROBES: list[tuple[str, Edit, str]] = [
    ("unknown top-level key", _set("calibrated_by", "me"), r"calibrated_by: unknown key"),
    (
        "unknown override key",
        _set(f"{HEAD}.fxx_px", 1.0),
        r"world_overrides\.cameras\.head\.fxx_px: unknown key",
    ),
    (
        "unknown record key",
        _set(f"{HEAD_RECORD}.intrinsics.skew", 0.0),
        r"cameras\.head\.intrinsics\.skew: unknown key",
    ),
    (
        "unknown camera",
        _set("world_overrides.cameras.wrist", {"fx_px": 100.0}),
        r"world_overrides\.cameras\.wrist",
    ),
    (
        "4-element rpy in the overrides",
        _set(f"{HEAD}.pose.rpy_rad", [0.0, 0.7, 3.1, 0.0]),
        r"world_overrides\.cameras\.head\.pose\.rpy_rad: expected 3 numbers, got 4",
    ),
    (
        "4-element rpy in a record",
        _set(f"{HEAD_RECORD}.pose.pose.rpy_rad", [0.0, 0.7, 3.1, 0.0]),
        r"cameras\.head\.pose\.pose\.rpy_rad: expected 3 numbers, got 4",
    ),
    (
        "non-unit quaternion in a pose",
        _set(f"{HEAD}.pose.quat_wxyz", [1.0, 0.2, 0.0, 0.0]),
        r"world_overrides\.cameras\.head\.pose\.quat_wxyz: unknown key .*norm is 1\.0198.*"
        r"rpy_rad",
    ),
    (
        "negative focal length in the overrides",
        _set(f"{HEAD}.fx_px", -122.9),
        r"world_overrides\.cameras\.head\.fx_px = -122\.9: .*greater than 0",
    ),
    (
        "negative focal length in the records and the overrides",
        _both(_set(f"{HEAD}.fx_px", -122.9), _set(f"{HEAD_RECORD}.intrinsics.fx_px", -122.9)),
        r"world_overrides\.cameras\.head\.fx_px = -122\.9",
    ),
    (
        "angles in degrees",
        _set("world_overrides.belt.pose.rpy_rad", [0.0, 0.0, 90.0]),
        r"world_overrides\.belt\.pose\.rpy_rad: expected radians .*degrees\?",
    ),
    (
        "translation in millimetres",
        _set(f"{HEAD}.pose.xyz_m", [1300.9, -11.9, 1745.3]),
        r"world_overrides\.cameras\.head\.pose\.xyz_m: expected metres .*millimetres\?",
    ),
    (
        "roller radius out of range",
        _set("world_overrides.belt.roller_radius_m", 30.5),
        r"world_overrides\.belt\.roller_radius_m = 30\.5",
    ),
    (
        "overrides contradict the records",
        _set(f"{HEAD}.fx_px", 130.0),
        r"world_overrides\.cameras\.head\.fx_px = 130\.0, but the records derive 122\.92.*"
        r"does not match the records",
    ),
    (
        "a record contradicts the overrides",
        _set("belt.roller_radius_m", 0.0321),
        r"world_overrides\.belt\.roller_radius_m = 0\.0305.*but the records derive 0\.0321",
    ),
    (
        "an override the records do not have",
        _set("world_overrides.bins.bin_z", {"pose": {"xyz_m": [0, 0, 0], "rpy_rad": [0, 0, 0]}}),
        r"world_overrides\.bins\.bin_z = .*, but the records derive no such value",
    ),
    (
        "rpy as a string",
        _set(f"{HEAD}.pose.rpy_rad", "0 0.7 3.1"),
        r"world_overrides\.cameras\.head\.pose\.rpy_rad: expected 3 numbers, got '0 0\.7 3\.1'",
    ),
]


def _write(tmp_path: Path, edit: Edit | None, name: str = "artifact.yaml") -> Path:
    data = _fixture()
    if edit is not None:
        edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_fixture_artifact_is_valid() -> None:
    data = read_artifact(FIXTURE)
    assert set(data["world_overrides"]) == {"cameras", "belt", "bins", "controller"}


def test_hand_made_overrides_without_records_are_checked_on_their_overrides() -> None:
    ok = {"schema_version": 1, "world_overrides": {"belt": {"roller_radius_m": 0.031}}}
    assert check_artifact(copy.deepcopy(ok), "a.yaml") == ok
    bad = {"schema_version": 1, "world_overrides": {"belt": {"roller_radus_m": 0.031}}}
    with pytest.raises(ConfigError, match=r"world_overrides\.belt\.roller_radus_m: unknown key"):
        check_artifact(bad, "a.yaml")


@pytest.mark.parametrize(("probe", "edit", "expected"), PROBES, ids=[p[0] for p in PROBES])
def test_the_one_validator_refuses_each_probe_naming_the_full_key(
    tmp_path: Path, probe: str, edit: Edit, expected: str
) -> None:
    path = _write(tmp_path, edit)
    with pytest.raises(ConfigError) as raised:
        read_artifact(path)
    message = str(raised.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    assert re.search(expected, message), message


@pytest.mark.parametrize(("probe", "edit", "expected"), PROBES, ids=[p[0] for p in PROBES])
def test_the_export_tool_refuses_what_the_one_validator_refuses(
    tmp_path: Path, probe: str, edit: Edit, expected: str
) -> None:
    from r2s2r_calibration.artifact import load_artifact
    from r2s2r_calibration.errors import ArtifactError

    path = _write(tmp_path, edit)
    with pytest.raises(ArtifactError) as raised:
        load_artifact(path)
    assert re.search(expected, str(raised.value)), str(raised.value)


BAD_RPY = PROBES[4][1]
RPY_MESSAGE = PROBES[4][2]


def test_generation_refuses_an_invalid_artifact(tmp_path: Path) -> None:
    from r2s2r_datagen.configurations import load_grounding_overrides

    assert load_grounding_overrides(FIXTURE)["belt"]["roller_radius_m"] > 0
    with pytest.raises(ConfigError, match=RPY_MESSAGE):
        load_grounding_overrides(_write(tmp_path, BAD_RPY))
    # A plain override mapping (no artifact sections) is checked as world_overrides is.
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"cameras": {"head": {"fx_px": -1.0}}}))
    with pytest.raises(ConfigError, match=r"cameras\.head\.fx_px = -1\.0"):
        load_grounding_overrides(plain)


def test_the_grounded_cell_arguments_refuse_an_invalid_artifact(tmp_path: Path) -> None:
    from r2s2r_calibration.errors import ArtifactError

    from r2s2r.pipeline.stages import grounded_cell_arguments

    with pytest.raises(ArtifactError, match=RPY_MESSAGE):
        grounded_cell_arguments(_write(tmp_path, BAD_RPY), tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_the_launch_arguments_refuse_an_invalid_artifact(tmp_path: Path) -> None:
    from r2s2r_world.grounding import check_artifact_arguments

    path = _write(tmp_path, PROBES[6][1])
    with pytest.raises(ConfigError, match=r"launch argument grounding_artifact:=.*quat_wxyz"):
        check_artifact_arguments({"grounding_artifact": str(path)})


def test_the_cell_knowledge_refuses_an_invalid_artifact(tmp_path: Path) -> None:
    from r2s2r_belt.perception import CellKnowledge

    with pytest.raises(ConfigError, match=RPY_MESSAGE):
        CellKnowledge.from_artifact(_write(tmp_path, BAD_RPY))


def test_evaluate_refuses_an_invalid_artifact_before_loading_anything(tmp_path: Path) -> None:
    from r2s2r.cli.evaluate import evaluate_command

    checkpoint = tmp_path / "not_read"
    checkpoint.mkdir()  # the artifact is refused before the checkpoint is read
    result = CliRunner().invoke(
        evaluate_command,
        [
            str(checkpoint),
            "--in-process",
            "--artifact",
            str(_write(tmp_path, BAD_RPY)),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert re.search(r"--artifact.*" + RPY_MESSAGE, " ".join(result.output.split()))
