"""ROS parameters declared from a typed config schema, and the config built back from them.

Each leaf field of a :class:`~r2s2r_common.config.ConfigModel` becomes one parameter (nested
models give dotted names, ``device.width_px``) with its type, default, description and range
(from ``ge``/``le``/``gt``/``lt``), as generate_parameter_library would give. Values that ROS
rejects at declaration (wrong type, out of range) are recorded instead of crashing the
constructor, so a lifecycle node can refuse ``configure`` with the reason.
"""

from __future__ import annotations

import difflib
import os
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from r2s2r_common.config import (
    ConfigError,
    parameter_value_type,
    parse_config,
    schema_leaves,
    unflatten,
)

ModelT = TypeVar("ModelT", bound=BaseModel)

_SCALAR_TYPES: dict[type, tuple[int, Parameter.Type]] = {
    bool: (ParameterType.PARAMETER_BOOL, Parameter.Type.BOOL),
    int: (ParameterType.PARAMETER_INTEGER, Parameter.Type.INTEGER),
    float: (ParameterType.PARAMETER_DOUBLE, Parameter.Type.DOUBLE),
    str: (ParameterType.PARAMETER_STRING, Parameter.Type.STRING),
}
_LIST_TYPES: dict[type, tuple[int, Parameter.Type]] = {
    bool: (ParameterType.PARAMETER_BOOL_ARRAY, Parameter.Type.BOOL_ARRAY),
    int: (ParameterType.PARAMETER_INTEGER_ARRAY, Parameter.Type.INTEGER_ARRAY),
    float: (ParameterType.PARAMETER_DOUBLE_ARRAY, Parameter.Type.DOUBLE_ARRAY),
    str: (ParameterType.PARAMETER_STRING_ARRAY, Parameter.Type.STRING_ARRAY),
}


@dataclass
class SchemaParameters:
    """The parameters declared for one schema.

    Attributes:
        model: The schema class.
        names: Dotted parameter names, in declaration order.
        declaration_errors: Problems found while declaring (bad overrides), one line each.

    """

    model: type[BaseModel]
    names: list[str] = field(default_factory=list)
    declaration_errors: list[str] = field(default_factory=list)


def _ros_types(annotation: Any, name: str) -> tuple[int, Parameter.Type, str]:
    """Map a field annotation to (descriptor type, rclpy type, extra description)."""
    scalar, is_list = parameter_value_type(annotation, name)
    descriptor_type, rclpy_type = (_LIST_TYPES if is_list else _SCALAR_TYPES)[scalar]
    extra = ""
    if typing.get_origin(annotation) is typing.Literal:
        extra = f" One of: {', '.join(typing.get_args(annotation))}."
    return descriptor_type, rclpy_type, extra


def _range(info: FieldInfo, descriptor_type: int) -> dict[str, Any]:
    """ROS range (inclusive) from pydantic bounds; strict bounds are enforced by the schema."""
    low: float | None = None
    high: float | None = None
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge | annotated_types.Gt):
            low = float(item.ge if isinstance(item, annotated_types.Ge) else item.gt)  # type: ignore[arg-type]
        if isinstance(item, annotated_types.Le | annotated_types.Lt):
            high = float(item.le if isinstance(item, annotated_types.Le) else item.lt)  # type: ignore[arg-type]
    if low is None and high is None:
        return {}
    if descriptor_type == ParameterType.PARAMETER_DOUBLE:
        return {
            "floating_point_range": [
                FloatingPointRange(
                    from_value=low if low is not None else -1e300,
                    to_value=high if high is not None else 1e300,
                    step=0.0,
                )
            ]
        }
    if descriptor_type == ParameterType.PARAMETER_INTEGER:
        return {
            "integer_range": [
                IntegerRange(
                    from_value=int(low) if low is not None else -(2**63),
                    to_value=int(high) if high is not None else 2**63 - 1,
                    step=1,
                )
            ]
        }
    return {}


FRAMEWORK_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
"""Parameters rclpy declares on every node (never unknown)."""
FRAMEWORK_PREFIXES = ("qos_overrides.",)
"""Parameter name prefixes rclpy reads itself."""
LENIENT_ENV = "R2S2R_LENIENT_PARAMETERS"
"""Set to 1 to have unknown parameters warned about instead of refused (strict by default)."""


def parameter_files(argv: Iterable[str] | None = None) -> list[str]:
    """Return the ``--params-file`` paths on the command line (where overrides came from)."""
    args = list(sys.argv if argv is None else argv)
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--params-file"]


def unknown_parameters(given: Iterable[str], known: Iterable[str]) -> list[str]:
    """Name each given parameter the node does not declare, with the closest known one.

    Args:
        given: Names of the parameter overrides the node received (files, launch, command line).
        known: Names the node declares.

    """
    known = list(known)
    lines = []
    for name in sorted(set(given) - set(known) - FRAMEWORK_PARAMETERS):
        if name.startswith(FRAMEWORK_PREFIXES):
            continue
        close = difflib.get_close_matches(name, known, n=1)
        lines.append(
            f"unknown parameter {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
        )
    return lines


def check_parameter_overrides(node: Node, known: Iterable[str]) -> list[str]:
    """Name each override of ``node`` that is not one of ``known``, and its files.

    Empty when every override is known, or when ``R2S2R_LENIENT_PARAMETERS=1`` (each unknown
    one is then logged as a warning).
    """
    overrides = getattr(node, "_parameter_overrides", {})  # rclpy keeps a node's overrides here
    lines = unknown_parameters(overrides, known)
    if not lines:
        return []
    files = parameter_files()
    where = f" in {', '.join(files)}" if files else ""
    lines = [f"{line}{where}: node {node.get_name()!r} does not declare it" for line in lines]
    if os.environ.get(LENIENT_ENV, "") == "1":
        for line in lines:
            node.get_logger().warning(f"{line} (ignored: {LENIENT_ENV}=1)")
        return []
    return lines


def declare_schema_parameters(
    node: Node, model: type[BaseModel], defaults: BaseModel | None = None
) -> SchemaParameters:
    """Declare one ROS parameter per leaf field of ``model``.

    Args:
        node: The node (plain or lifecycle).
        model: The schema.
        defaults: Default values (``model()`` if None).

    Returns:
        The declared names and any override that ROS rejected (type or range) or that names
        no parameter of the schema (a typo in a parameter file: unknown parameters are
        refused, :func:`check_parameter_overrides`); the node should refuse to configure.

    """
    declared = SchemaParameters(model=model)
    for name, info, default in schema_leaves(model, defaults):
        descriptor_type, rclpy_type, extra = _ros_types(info.annotation, name)
        descriptor = ParameterDescriptor(
            name=name,
            type=descriptor_type,
            description=(info.description or "") + extra,
            **_range(info, descriptor_type),
        )
        value: Any = default
        if isinstance(default, list) and not default:
            value = rclpy_type  # an empty list has no type of its own: declare it typed
        try:
            node.declare_parameter(name, value, descriptor)
        except (InvalidParameterTypeException, InvalidParameterValueException) as error:
            declared.declaration_errors.append(f"parameter {name}: {error}")
            node.declare_parameter(name, value, descriptor, ignore_override=True)
        declared.names.append(name)
    declared.declaration_errors += check_parameter_overrides(node, declared.names)
    return declared


def _parameter_values(node: Node, names: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in names:
        try:
            parameter = node.get_parameter(name)
        except ParameterUninitializedException:
            continue  # typed empty list left unset: the schema default (empty) applies
        if parameter.type_ == Parameter.Type.NOT_SET:
            continue
        value = parameter.value
        values[name] = (
            list(value) if isinstance(value, list | tuple) or hasattr(value, "tolist") else value
        )
    return values


def config_from_parameters(node: Node, declared: SchemaParameters, model: type[ModelT]) -> ModelT:
    """Build the typed config from the node's current parameter values.

    Raises:
        ConfigError: If a declaration failed or the values do not satisfy the schema.

    """
    if declared.declaration_errors:
        raise ConfigError("\n".join(declared.declaration_errors))
    values = _parameter_values(node, declared.names)
    return parse_config(model, unflatten(values), f"node {node.get_name()!r} parameters")


def add_schema_validation(
    node: Node,
    declared: SchemaParameters,
    on_change: Callable[[Any], None] | None = None,
) -> None:
    """Refuse runtime parameter changes that would make the config invalid, with the reason.

    Args:
        node: The node whose parameters were declared.
        declared: What :func:`declare_schema_parameters` returned.
        on_change: Called with the new, validated config before an accepted change applies.

    """

    def validate(parameters: list[Parameter]) -> SetParametersResult:
        values = _parameter_values(node, declared.names)
        for parameter in parameters:
            if parameter.name in values or parameter.name in declared.names:
                value = parameter.value
                values[parameter.name] = list(value) if hasattr(value, "tolist") else value
        try:
            new_config = parse_config(declared.model, unflatten(values), "parameter change")
        except ConfigError as error:
            return SetParametersResult(successful=False, reason=str(error))
        if on_change is not None:
            on_change(new_config)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(validate)


def declare_config(
    node: Node, model: type[ModelT], on_change: Callable[[ModelT], None] | None = None
) -> ModelT:
    """Declare ``model``'s parameters on a plain node, build the config and guard changes.

    For nodes that must fail at start-up on bad parameters (lifecycle nodes instead derive from
    :class:`r2s2r_common.ros.lifecycle.SchemaLifecycleNode`, which declares in the constructor
    and builds the config in ``on_configure``, so that a bad value makes configure fail with the
    reason).

    Raises:
        ConfigError: A parameter value is invalid (named, with the expectation).

    """
    declared = declare_schema_parameters(node, model)
    config = config_from_parameters(node, declared, model)
    add_schema_validation(node, declared, on_change)
    return config
