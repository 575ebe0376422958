"""The one reader of a grounding artifact, and its schema version.

World grounding (``r2s2r_calibration``) writes one artifact YAML whose ``world_overrides``
section mirrors :class:`r2s2r_world.world.WorldParams` (``cameras.<head|hand>.{fx_px, ...,
pose}``, ``belt.{pose, roller_radius_m, speed_mps}``, ``bins.<name>.pose``, ``controller``), so
a grounded world is ``apply_grounding(nominal, world_overrides)``
(:func:`r2s2r_world.world.apply_grounding`). The consumers that apply calibration (the cell
state publisher for ``/tf_static``, the belt-speed estimator for the roller radius, the exporter
of camera_calibration files, generation) read that section through this module, so that they
do not depend on the calibration package, which writes the artifact
(:mod:`r2s2r_calibration.artifact`, with :data:`ARTIFACT_SCHEMA_VERSION`). The records' schema
is here (:mod:`r2s2r_world.grounding_records`, :class:`GroundingArtifact`), so that every
reader runs the same full check.

Every consumer of an artifact (the nodes of ``r2s2r launch``, ``r2s2r generate``, the exporter,
``r2s2r experiment``, the calibration package's loader) checks it with :func:`check_artifact`
first (directly, or through :func:`read_artifact`/:func:`load_world_overrides`), so a bad
artifact is refused the same way everywhere: the schema version, the sections a consumer needs
(named when missing: a truncated file), every number finite, ``world_overrides`` against a
partial WorldParams (:func:`check_world_overrides`: unknown keys, poses of 3 + 3 numbers,
metres and radians, positive intrinsics), the records against their schema and
``world_overrides`` equal to what they derive (:func:`validate_artifact`), in one line naming
the file and the full dotted key.

Everything here is ROS-free and raises :class:`~r2s2r_common.config.ConfigError` with the file,
the key and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from r2s2r_common.camera_info import CameraCalibration, YamlMatrix
from r2s2r_common.config import ConfigError, ConfigModel, parse_config, read_yaml
from r2s2r_description.cameras import CAMERAS
from r2s2r_description.frames import WORLD_FRAME

from r2s2r_world.cell_identity import CellIdentity
from r2s2r_world.grounding_records import (
    CAMERA_POSE_PARENTS,
    BeltRecord,
    CameraRecord,
    ControllerRecord,
    PoseValue,
    ScenePoseRecord,
    WorldOverrides,
)
from r2s2r_world.world import WorldParams, apply_grounding, load_world

ARTIFACT_SCHEMA_VERSION = 1
"""The artifact schema version: what the calibration package writes and every reader accepts."""

CAMERA_KEYS: dict[str, str] = {camera.name: camera.world_key for camera in CAMERAS}
"""Camera name on the cell (topics, frames) -> key under ``world_overrides.cameras``."""


class _Distortion(ConfigModel):
    k1: float = 0.0
    k2: float = 0.0
    p1: float = 0.0
    p2: float = 0.0
    k3: float = 0.0


class GroundedIntrinsics(ConfigModel):
    """Grounded pinhole + plumb-bob intrinsics of one camera (``world_overrides.cameras.<c>``)."""

    width_px: int = Field(ge=1, description="Image width the intrinsics are valid for.")
    height_px: int = Field(ge=1, description="Image height the intrinsics are valid for.")
    fx_px: float = Field(gt=0.0, description="Focal length x (px).")
    fy_px: float = Field(gt=0.0, description="Focal length y (px).")
    cx_px: float = Field(description="Principal point x (px).")
    cy_px: float = Field(description="Principal point y (px).")
    distortion: _Distortion = Field(default_factory=_Distortion)

    @field_validator("cx_px", "cy_px")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"expected a finite principal point, got {value}")
        return value


ARTIFACT_SECTIONS: tuple[str, ...] = (
    "schema_version",
    "created_utc",
    "cell",
    "cameras",
    "scene",
    "belt",
    "controller",
    "world_overrides",
)
"""Top-level sections of an artifact as world grounding writes it, in file order."""

REQUIRED_SECTIONS: tuple[str, ...] = ("schema_version", "world_overrides")
"""Sections every consumer needs (``world_overrides`` is the last one written: a file cut short
lacks it)."""

_REGENERATE = "re-run grounding (`r2s2r ground`) to regenerate it"


RECORD_SECTIONS: tuple[str, ...] = ("cameras", "scene", "belt", "controller")
"""The records' sections; an artifact with none of them carries hand-made overrides only."""

CHECK_OVERRIDES = "check_world_overrides"
"""Validation context key: refuse world_overrides that differ from the records (files)."""


class GroundingArtifact(ConfigModel):
    """The grounding artifact: records with provenance, and the overrides they derive.

    Its writer is :mod:`r2s2r_calibration.artifact`; every reader validates a file against it
    through :func:`check_artifact`.
    """

    schema_version: int = Field(
        ARTIFACT_SCHEMA_VERSION, description="Artifact schema version (ARTIFACT_SCHEMA_VERSION)."
    )
    created_utc: str = Field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"),
        description="Creation time (ISO 8601, UTC).",
    )
    cell: CellIdentity | None = Field(
        None,
        description="Which cell this artifact grounds (its name and static scene): readers "
        "on a running cell compare it (r2s2r_world.cell_identity). None: an artifact from "
        "before cell identities, or one made by hand.",
    )
    cameras: dict[str, CameraRecord] = Field(default_factory=dict)
    scene: dict[str, ScenePoseRecord] = Field(default_factory=dict)
    belt: BeltRecord | None = None
    controller: ControllerRecord | None = None
    world_overrides: dict[str, Any] = Field(
        default_factory=dict, description="Derived WorldParams overrides (do not hand-edit)."
    )

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != ARTIFACT_SCHEMA_VERSION:
            raise ValueError(
                f"expected schema_version {ARTIFACT_SCHEMA_VERSION} (this code's artifact schema)"
            )
        return value

    @model_validator(mode="after")
    def _overrides_consistent(self, info: ValidationInfo) -> GroundingArtifact:
        derived = derive_world_overrides(self)
        # A file's world_overrides must match its records (someone may have hand-edited it);
        # in memory, records change step by step and world_overrides follows them.
        checked = bool(info.context and info.context.get(CHECK_OVERRIDES))
        if checked and self.world_overrides and self.world_overrides != derived:
            difference = first_difference(self.world_overrides, derived, "world_overrides")
            raise ValueError(
                f"{difference}: world_overrides does not match the records it is derived from; "
                "edit the records, not world_overrides, or delete world_overrides to re-derive it"
            )
        # Assigning through __dict__ avoids re-running this validator (validate_assignment).
        self.__dict__["world_overrides"] = derived
        return self


def first_difference(given: Any, derived: Any, key: str) -> str:
    """Return the first dotted key where ``given`` differs from ``derived``, with both values."""
    if isinstance(given, Mapping) and isinstance(derived, Mapping):
        for name in sorted(set(given) | set(derived), key=str):
            if name not in derived:
                return f"{key}.{name} = {given[name]!r}, but the records derive no such value"
            if name not in given:
                return f"{key}.{name} missing, but the records derive {derived[name]!r}"
            if given[name] != derived[name]:
                return first_difference(given[name], derived[name], f"{key}.{name}")
    return f"{key} = {given!r}, but the records derive {derived!r}"


def _require_parent(pose: PoseValue, expected: str, key: str) -> None:
    if pose.parent_frame != expected:
        raise ValueError(
            f"{key}: pose is in '{pose.parent_frame}', but WorldParams expects it in "
            f"'{expected}'; express it there before adding it to the artifact"
        )


def derive_world_overrides(artifact: GroundingArtifact) -> dict[str, Any]:
    """Derive the nested WorldParams overrides that the artifact's records define."""
    overrides: dict[str, Any] = {}
    for name, camera in artifact.cameras.items():
        entry: dict[str, Any] = {}
        if camera.intrinsics is not None:
            intr = camera.intrinsics
            # The image size goes with the intrinsics: they are only valid at that size.
            entry.update(
                width_px=intr.width_px,
                height_px=intr.height_px,
                fx_px=intr.fx_px,
                fy_px=intr.fy_px,
                cx_px=intr.cx_px,
                cy_px=intr.cy_px,
                distortion=intr.distortion.model_dump(),
            )
        if camera.blur is not None:
            entry["blur_sigma_px"] = camera.blur.sigma_px
        if camera.look is not None and camera.look.applied:
            entry["appearance"] = {"white_balance_rgb": list(camera.look.white_balance_rgb)}
        if camera.pose is not None:
            expected = CAMERA_POSE_PARENTS.get(name)
            if expected is not None:
                _require_parent(camera.pose.pose, expected, f"cameras.{name}.pose")
            entry["pose"] = camera.pose.pose.world_value()
        if entry:
            overrides.setdefault("cameras", {})[name] = entry
    for name, record in artifact.scene.items():
        if name == "belt":
            _require_parent(record.pose, WORLD_FRAME, "scene.belt.pose")
            overrides.setdefault("belt", {})["pose"] = record.pose.world_value()
        elif name.startswith("bin"):
            _require_parent(record.pose, WORLD_FRAME, f"scene.{name}.pose")
            overrides.setdefault("bins", {})[name] = {"pose": record.pose.world_value()}
    if artifact.belt is not None:
        belt = overrides.setdefault("belt", {})
        belt["roller_radius_m"] = artifact.belt.roller_radius_m
        if artifact.belt.speed_mps is not None:
            belt["speed_mps"] = artifact.belt.speed_mps
    if artifact.controller is not None:
        controller: dict[str, Any] = {}
        if artifact.controller.gains:
            controller["gains"] = {
                joint: {"kp": record.kp, "kd": record.kd}
                for joint, record in artifact.controller.gains.items()
            }
        if artifact.controller.latency_s is not None:
            controller["latency_s"] = artifact.controller.latency_s
        if controller:
            overrides["controller"] = controller
    return overrides


_QUATERNION_HINT = (
    "poses carry their rotation as rpy_rad (roll, pitch, yaw in rad); a quaternion is not "
    "read: convert it"
)


def _validation_message(error: ValidationError, source: str, prefix: str = "") -> str:
    """One line: the file, the first problem's full dotted key, the value and the expectation."""
    problems = error.errors()
    item = problems[0]
    key = ".".join(str(part) for part in (*prefix.split("."), *item["loc"]) if part != "")
    if item["type"] == "extra_forbidden":
        name = str(item["loc"][-1]) if item["loc"] else ""
        detail = "unknown key (not in the artifact schema)"
        if "quat" in name.lower() or name.lower() in ("orientation", "rotation"):
            value = item.get("input")
            norm = ""
            if isinstance(value, list | tuple) and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in value
            ):
                norm = f" (its norm is {math.sqrt(sum(float(v) ** 2 for v in value)):.6g})"
            detail += f"{norm}; {_QUATERNION_HINT}"
        text = f"{key}: {detail}"
    else:
        detail = str(item["msg"]).removeprefix("Value error, ")
        value_text = (
            "" if item["type"] == "missing" or "got" in detail else f" = {item.get('input')!r}"
        )
        text = f"{key}{value_text}: {detail}" if key else detail
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{source}: {text}{more}; {_REGENERATE}"


def check_world_overrides(overrides: Any, source: str, key: str = "world_overrides") -> None:
    """Validate overrides mirroring :class:`~r2s2r_world.world.WorldParams` (every key optional).

    Unknown keys, poses of other than 3 + 3 numbers, translations beyond ±10 m (millimetres?),
    angles beyond ±2π (degrees?), non-positive focal lengths and out-of-range belt values are
    refused with the full dotted key.

    Raises:
        ConfigError: One line naming the file, the key and the expectation.

    """
    try:
        WorldOverrides.model_validate(overrides)
    except ValidationError as error:
        raise ConfigError(_validation_message(error, source, key)) from None


def validate_artifact(data: dict[str, Any], source: str) -> GroundingArtifact:
    """Validate a grounding artifact fully (after :func:`check_artifact`'s structural checks).

    ``world_overrides`` against :class:`~r2s2r_world.grounding_records.WorldOverrides`, the
    records against their schema, and ``world_overrides`` equal to what the records derive. An
    artifact with no record section at all (hand-made overrides, e.g. a test's) is checked on
    its overrides only.

    Raises:
        ConfigError: One line naming the file and the full dotted key.

    """
    check_world_overrides(data["world_overrides"], source)
    if not any(name in data for name in RECORD_SECTIONS):
        return GroundingArtifact(
            schema_version=data["schema_version"],
            created_utc=str(data.get("created_utc", "")),
        ).model_copy(update={"world_overrides": dict(data["world_overrides"])})
    try:
        return GroundingArtifact.model_validate(data, context={CHECK_OVERRIDES: True})
    except ValidationError as error:
        raise ConfigError(_validation_message(error, source)) from None


def non_finite_numbers(data: Any, key: str = "") -> list[str]:
    """Dotted keys (``a.b[0]``) of every NaN or infinite number in nested mappings and lists."""
    found: list[str] = []
    if isinstance(data, bool):
        return found
    if isinstance(data, float):
        if not math.isfinite(data):
            found.append(f"{key or '<root>'} = {data}")
    elif isinstance(data, Mapping):
        for name, value in data.items():
            found += non_finite_numbers(value, f"{key}.{name}" if key else str(name))
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            found += non_finite_numbers(value, f"{key}[{index}]")
    return found


def check_artifact(data: Any, source: str) -> dict[str, Any]:
    """Check what every consumer of a grounding artifact relies on, and return it.

    Checks, in order: a mapping; ``schema_version`` equal to :data:`ARTIFACT_SCHEMA_VERSION`;
    the :data:`REQUIRED_SECTIONS` present (the missing ones named; a file cut short lacks
    ``world_overrides``); ``world_overrides`` and its ``cameras``/``belt``/``bins``/
    ``controller`` sections mappings; every number in the whole file finite; then the full
    check (:func:`validate_artifact`): the overrides' and the records' schemas and their
    consistency.

    Args:
        data: The artifact as read from YAML.
        source: The file (for messages).

    Returns:
        ``data``, unchanged.

    Raises:
        ConfigError: The first failed check, naming the file, the key and what to do.

    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a grounding artifact (a mapping with schema_version and "
            f"world_overrides), got {type(data).__name__}; {_REGENERATE}"
        )
    version = data.get("schema_version")
    if "schema_version" in data and version != ARTIFACT_SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version = {version!r}; this code reads grounding artifacts of "
            f"schema_version {ARTIFACT_SCHEMA_VERSION}; {_REGENERATE}"
        )
    missing = [name for name in REQUIRED_SECTIONS if name not in data]
    if missing:
        present = [name for name in ARTIFACT_SECTIONS if name in data]
        hint = (
            f" (it has {', '.join(present)}: the file looks cut short)"
            if present and "world_overrides" in missing
            else ""
        )
        raise ConfigError(
            f"{source}: grounding artifact lacks {', '.join(missing)}{hint}; {_REGENERATE}"
        )
    overrides = data["world_overrides"]
    if not isinstance(overrides, dict):
        raise ConfigError(
            f"{source}: world_overrides = {overrides!r}; expected a mapping (the grounding "
            f"artifact derives it from its records); {_REGENERATE}"
        )
    for key in ("cameras", "belt", "bins", "controller"):
        if key in overrides and not isinstance(overrides[key], dict):
            raise ConfigError(
                f"{source}: world_overrides.{key} = {overrides[key]!r}: not a mapping; "
                f"{_REGENERATE}"
            )
    bad = non_finite_numbers(data)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise ConfigError(
            f"{source}: {', '.join(bad[:3])}{more}: expected finite numbers; a solver diverged "
            f"or the file was edited; {_REGENERATE}"
        )
    validate_artifact(data, source)
    return data


def read_artifact(path: str | Path) -> dict[str, Any]:
    """Read a grounding artifact YAML and :func:`check_artifact` it.

    Raises:
        ConfigError: Empty path, missing file, bad YAML, or a failed check.

    """
    if not str(path):
        raise ConfigError("grounding artifact: empty path; give the artifact YAML of grounding")
    return check_artifact(read_yaml(path), str(path))


def load_world_overrides(path: str | Path) -> dict[str, Any]:
    """Return the ``world_overrides`` mapping of a grounding artifact (:func:`read_artifact`).

    Args:
        path: The artifact YAML written by world grounding.

    Raises:
        ConfigError: Missing file, bad YAML, another schema version, a missing or invalid
            section, or a number that is not finite; the message names the file and what to do.

    """
    overrides: dict[str, Any] = read_artifact(path)["world_overrides"]
    return overrides


def load_cell_identity(path: str | Path) -> CellIdentity | None:
    """Return the ``cell`` section of a checked artifact file (None: it records no cell).

    Raises:
        ConfigError: As :func:`read_artifact`.

    """
    data = read_artifact(path)
    cell = data.get("cell")
    return None if cell is None else CellIdentity.model_validate(cell)


def load_cell_world(world_path: str | Path, grounding_artifact: str | Path = "") -> WorldParams:
    """Load the world a node of the cell works on: ``world_path``, grounded by an artifact.

    Args:
        world_path: World YAML (the nominal world; already resolved).
        grounding_artifact: Grounding artifact YAML; empty = the world as it is (ungrounded).

    Raises:
        ConfigError: A missing or invalid world or artifact.

    """
    world = load_world(world_path)
    if not str(grounding_artifact):
        return world
    return apply_grounding(world, load_world_overrides(grounding_artifact))


def camera_overrides(overrides: Mapping[str, Any], camera_name: str) -> dict[str, Any]:
    """Return the overrides of a camera (``head_camera``/``hand_camera``); empty: not grounded.

    Raises:
        ConfigError: Unknown camera name or a non-mapping entry.

    """
    if camera_name not in CAMERA_KEYS:
        raise ConfigError(f"camera {camera_name!r}: expected one of {sorted(CAMERA_KEYS)}")
    entry = overrides.get("cameras", {}).get(CAMERA_KEYS[camera_name], {})
    if not isinstance(entry, dict):
        raise ConfigError(f"world_overrides.cameras.{CAMERA_KEYS[camera_name]}: not a mapping")
    return entry


def grounded_intrinsics(
    overrides: Mapping[str, Any], camera_name: str, source: str = "grounding artifact"
) -> GroundedIntrinsics | None:
    """Return the grounded intrinsics of a camera, or None when the artifact has none for it.

    Raises:
        ConfigError: Intrinsics present but incomplete or invalid (named by key).

    """
    entry = camera_overrides(overrides, camera_name)
    if "fx_px" not in entry:
        return None
    fields = {key: entry[key] for key in GroundedIntrinsics.model_fields if key in entry}
    return parse_config(
        GroundedIntrinsics, fields, f"{source}: world_overrides.cameras.{CAMERA_KEYS[camera_name]}"
    )


def camera_calibration_of(intrinsics: GroundedIntrinsics, camera_name: str) -> CameraCalibration:
    """Return the ROS camera_calibration (plumb_bob, R = I, P = [K | 0]) of intrinsics."""
    k = np.array(
        [
            [intrinsics.fx_px, 0.0, intrinsics.cx_px],
            [0.0, intrinsics.fy_px, intrinsics.cy_px],
            [0.0, 0.0, 1.0],
        ]
    )
    d = intrinsics.distortion
    return CameraCalibration(
        image_width=intrinsics.width_px,
        image_height=intrinsics.height_px,
        camera_name=camera_name,
        camera_matrix=YamlMatrix.from_array(k),
        distortion_model="plumb_bob",
        distortion_coefficients=YamlMatrix.from_array(np.array([[d.k1, d.k2, d.p1, d.p2, d.k3]])),
        projection_matrix=YamlMatrix.from_array(np.hstack([k, np.zeros((3, 1))])),
    )


def grounded_roller_radius_m(
    overrides: Mapping[str, Any], source: str = "grounding artifact"
) -> float | None:
    """Return the grounded belt roller radius (m), or None when the artifact has no belt model.

    Raises:
        ConfigError: A value that is not a positive finite number.

    """
    value = overrides.get("belt", {}).get("roller_radius_m")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"{source}: world_overrides.belt.roller_radius_m = {value!r}: not a number"
        )
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise ConfigError(
            f"{source}: world_overrides.belt.roller_radius_m = {value!r}: expected a radius "
            "in (0, 1] m"
        )
    return float(value)


ARTIFACT_LAUNCH_ARGUMENTS: tuple[str, ...] = ("grounding_artifact",)
"""Graph launch arguments that name a grounding artifact."""


def check_artifact_arguments(arguments: Mapping[str, str]) -> None:
    """Check the artifacts named by launch arguments before any node of the graph starts.

    The nodes check the artifact again when they load it (:func:`load_world_overrides`); this
    refuses a bad one at once, with one message, instead of starting a graph that stops.

    Raises:
        ConfigError: Naming the argument, the file and what is wrong with it.

    """
    for name in ARTIFACT_LAUNCH_ARGUMENTS:
        value = arguments.get(name, "")
        if value:
            try:
                read_artifact(value)
            except ConfigError as error:
                raise ConfigError(f"launch argument {name}:={value}: {error}") from None
