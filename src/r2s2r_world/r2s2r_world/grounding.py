"""The one reader of a grounding artifact, and its schema version.

World grounding (``r2s2r_calibration``) writes one artifact YAML whose ``world_overrides``
section mirrors :class:`r2s2r_world.world.WorldParams` (``cameras.<head|hand>.{fx_px, ...,
pose}``, ``belt.{pose, roller_radius_m, speed_mps}``, ``bins.<name>.pose``, ``controller``), so
a grounded world is ``apply_grounding(nominal, world_overrides)``
(:func:`r2s2r_world.world.apply_grounding`). The consumers that apply calibration (the cell
state publisher for ``/tf_static``, the belt-speed estimator for the roller radius, the exporter
of camera_calibration files, generation) read that section through this module, so that they
do not depend on the calibration package, which owns the records' schema
(:mod:`r2s2r_calibration.artifact`: it writes the artifact with
:data:`ARTIFACT_SCHEMA_VERSION` and validates the records on top of :func:`read_artifact`).

Every consumer of an artifact (the nodes of ``r2s2r launch``, ``r2s2r generate``, the exporter,
``r2s2r experiment``, the calibration package's loader) checks it with :func:`check_artifact`
first (directly, or through :func:`read_artifact`/:func:`load_world_overrides`), so a bad
artifact is refused the same way everywhere: the schema version, the sections a consumer needs
(named when missing: a truncated file), and every number finite.

Everything here is ROS-free and raises :class:`~r2s2r_common.config.ConfigError` with the file,
the key and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, field_validator
from r2s2r_common.camera_info import CameraCalibration, YamlMatrix
from r2s2r_common.config import ConfigError, ConfigModel, parse_config, read_yaml

ARTIFACT_SCHEMA_VERSION = 1
"""The artifact schema version: what the calibration package writes and every reader accepts."""

CAMERA_KEYS: dict[str, str] = {"head_camera": "head", "hand_camera": "hand"}
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
    ``controller`` sections mappings; every number in the whole file finite. The records'
    schema is the calibration package's (:func:`r2s2r_calibration.artifact.load_artifact`).

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
