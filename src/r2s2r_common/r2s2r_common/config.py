"""Typed configuration: strict pydantic models loaded from YAML with errors that name the key.

Every concern (world, camera driver, belt estimator, ...) has one schema deriving from
:class:`ConfigModel`. The same schema is used by the ROS-free core and by the node, which
declares its ROS parameters from it (see :mod:`r2s2r_common.ros.params`).
"""

from __future__ import annotations

import contextlib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from r2s2r_common.errors import BadInputError
from r2s2r_common.files import write_yaml_atomic

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(BadInputError, ValueError):
    """A configuration value is missing, unknown or out of range.

    The message names the file (when known), the dotted key, the offending value and what was
    expected, so a user can fix the YAML without reading code.
    """


class ConfigModel(BaseModel):
    """Base class of every r2s2r config schema: unknown keys are errors, values are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


def schema_leaves(
    model: type[BaseModel], defaults: BaseModel | None = None, prefix: str = ""
) -> list[tuple[str, FieldInfo, Any]]:
    """Every leaf field of a schema as (dotted name, field info, default value).

    Nested models give dotted names (``device.width_px``): these are the ROS parameters a node
    declares from the schema (:mod:`r2s2r_common.ros.params`).
    """
    values = defaults if defaults is not None else model()
    leaves: list[tuple[str, FieldInfo, Any]] = []
    for name, info in model.model_fields.items():
        value = getattr(values, name)
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            leaves.extend(schema_leaves(annotation, value, f"{prefix}{name}."))
        else:
            leaves.append((f"{prefix}{name}", info, value))
    return leaves


def parameter_value_type(annotation: Any, name: str) -> tuple[type, bool]:
    """Return the ROS parameter type of a schema field: (scalar type, is a list).

    The scalar type is one of bool, int, float, str (a string ``Literal`` is a str).

    Raises:
        TypeError: The field has no ROS parameter type (union, optional, nested list...).

    """
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        if not all(isinstance(choice, str) for choice in typing.get_args(annotation)):
            raise TypeError(f"{name}: only string Literal fields can become parameters")
        return str, False
    if origin is list:
        (item,) = typing.get_args(annotation)
        if item in (bool, int, float, str):
            return item, True
    if annotation in (bool, int, float, str):
        return annotation, False
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"{name}: optional/union fields cannot become ROS parameters")
    raise TypeError(f"{name}: field type {annotation!r} has no ROS parameter type")


def schema_parameter_types(model: type[BaseModel]) -> dict[str, tuple[type, bool]]:
    """Dotted parameter name -> (scalar type, is a list) for every parameter of a schema.

    Raises:
        TypeError: A field has no ROS parameter type.

    """
    return {
        name: parameter_value_type(info.annotation, name) for name, info, _ in schema_leaves(model)
    }


def format_validation_error(error: ValidationError, source: str | None = None) -> str:
    """Turn a pydantic ValidationError into one readable line per problem.

    Args:
        error: The pydantic error.
        source: File or origin shown in front of each line.

    Returns:
        Lines like ``nominal.yaml: objects.0.mass_kg = -1.0: Input should be greater than 0``.

    """
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "<root>"
        if item["type"] == "extra_forbidden":
            detail = "unknown key (not in the schema)"
        else:
            detail = item["msg"]
        value = item.get("input")
        value_text = "" if item["type"] in ("missing", "extra_forbidden") else f" = {value!r}"
        prefix = f"{source}: " if source else ""
        lines.append(f"{prefix}{key}{value_text}: {detail}")
    return "\n".join(lines)


def parse_config(model: type[ModelT], data: Any, source: str | None = None) -> ModelT:
    """Validate ``data`` against ``model``.

    Raises:
        ConfigError: With every problem named by key, value and expectation.

    """
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, source)) from None


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (the same documents, about 10x faster:
every node and test reads dozens of config files), else the pure-Python one."""


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file.

    Raises:
        ConfigError: If the file is missing or is not valid YAML.

    """
    file_path = Path(path)
    if not file_path.is_file():
        raise ConfigError(f"{file_path}: file not found")
    try:
        with file_path.open(encoding="utf-8") as stream:
            return yaml.load(stream, Loader=_SAFE_LOADER)
    except yaml.YAMLError as error:
        raise ConfigError(f"{file_path}: not valid YAML: {error}") from None


def load_config(model: type[ModelT], path: str | Path, node_name: str | None = None) -> ModelT:
    """Load a typed config from a YAML file.

    Args:
        model: The schema.
        path: YAML file. Either the plain schema or a ROS parameter file
            (``<node_name>: {ros__parameters: {...}}``) when ``node_name`` is given.
        node_name: Node whose ``ros__parameters`` section to read; dotted keys
            (``camera.width_px``) are expanded into nested sections.

    Raises:
        ConfigError: Missing file, bad YAML, missing node section or invalid values.

    """
    data = read_yaml(path)
    if node_name is not None:
        data = ros_parameters_section(data, node_name, str(path))
    return parse_config(model, data if data is not None else {}, str(path))


def ros_parameters_section(data: Any, node_name: str, source: str) -> dict[str, Any]:
    """Return the nested ``ros__parameters`` of ``node_name`` (or ``/**``) from a parameter file.

    Raises:
        ConfigError: If neither the node nor a ``/**`` wildcard section exists.

    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of node names at the top level")
    merged: dict[str, Any] = {}
    found = False
    for key in ("/**", node_name, "/" + node_name):
        section = data.get(key)
        if isinstance(section, dict) and "ros__parameters" in section:
            merged.update(section["ros__parameters"] or {})
            found = True
    if not found:
        names = ", ".join(sorted(str(k) for k in data)) or "none"
        raise ConfigError(
            f"{source}: no '{node_name}: ros__parameters:' section (sections: {names})"
        )
    return unflatten(merged)


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """Expand dotted keys (``a.b: 1``) into nested dicts (``{a: {b: 1}}``)."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        parts = str(key).split(".")
        cursor = nested
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        if isinstance(value, dict) and isinstance(cursor.get(parts[-1]), dict):
            cursor[parts[-1]].update(unflatten(value))
        else:
            cursor[parts[-1]] = unflatten(value) if isinstance(value, dict) else value
    return nested


def flatten(nested: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into dotted keys (the inverse of :func:`unflatten`)."""
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def dump_yaml(data: Any, path: str | Path) -> None:
    """Write ``data`` (a model or plain data) as YAML, creating its folder, whole or not at all.

    (:func:`r2s2r_common.files.write_yaml_atomic`: temp file, fsync, rename.)
    """
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_yaml_atomic(target, data)


def resolve_config_path(path: str | Path, package: str = "r2s2r") -> Path:
    """Resolve a configuration path: absolute as given, relative against the ``config/`` folder.

    A relative path is looked up in the bring-up package's installed share
    (``<share>/config/<path>``, via ament_index_python), then in the ``config/`` folder of the
    source tree this module lives in (a workspace checkout).

    Raises:
        ConfigError: If the file exists in none of these places (all are named).

    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        if not candidate.is_file():
            raise ConfigError(f"{candidate}: file not found")
        return candidate
    tried: list[Path] = []
    try:
        from ament_index_python.packages import (
            PackageNotFoundError,
            get_package_share_directory,
        )
    except ImportError:  # not a ROS environment: only the source tree
        pass
    else:
        # OSError/ValueError: AMENT_PREFIX_PATH unset (no workspace sourced).
        with contextlib.suppress(PackageNotFoundError, ValueError, OSError):
            tried.append(Path(get_package_share_directory(package)) / "config" / candidate)
    for parent in Path(__file__).resolve().parents:
        if (parent / "config" / "world").is_dir():
            tried.append(parent / "config" / candidate)
            break
    for option in tried:
        if option.is_file():
            return option
    raise ConfigError(
        f"{path}: file not found (relative paths are looked up in {[str(t) for t in tried]})"
    )
