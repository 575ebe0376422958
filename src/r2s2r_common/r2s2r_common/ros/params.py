"""Declare a node's ROS parameters from its typed config schema and build the config once.

The schema (a :class:`r2s2r_common.config.ConfigModel`) is the single source of names, types,
defaults, descriptions and ranges, as generate_parameter_library gives C++ nodes: nested
models become dotted parameter names (``camera.width_px``), ``Field(ge=..., le=...)`` becomes a
range in the descriptor, a bad value fails at start-up with a message naming the parameter, and
a runtime ``ros2 param set`` with a bad value is refused with the reason.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from r2s2r_common.config import ConfigError, flatten, parse_config, unflatten

ModelT = TypeVar("ModelT", bound=BaseModel)

_SCALAR_TYPES: dict[type, int] = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
}
_ARRAY_TYPES: dict[type, int] = {
    bool: ParameterType.PARAMETER_BOOL_ARRAY,
    int: ParameterType.PARAMETER_INTEGER_ARRAY,
    float: ParameterType.PARAMETER_DOUBLE_ARRAY,
    str: ParameterType.PARAMETER_STRING_ARRAY,
}


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _parameter_type(annotation: Any, name: str) -> int:
    annotation = _strip_optional(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        annotation = type(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return ParameterType.PARAMETER_STRING
    if annotation in _SCALAR_TYPES:
        return _SCALAR_TYPES[annotation]
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if args and all(a == args[0] for a in args) and args[0] in _ARRAY_TYPES:
            return _ARRAY_TYPES[args[0]]
    raise TypeError(f"parameter '{name}': type {annotation!r} cannot be a ROS parameter")


def describe_parameters(model: type[BaseModel], prefix: str = "") -> dict[str, ParameterDescriptor]:
    """Descriptors (type, description, range) for every leaf field of ``model``, dotted names."""
    descriptors: dict[str, ParameterDescriptor] = {}
    for field_name, info in model.model_fields.items():
        name = f"{prefix}{field_name}"
        annotation = _strip_optional(info.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            descriptors.update(describe_parameters(annotation, name + "."))
            continue
        descriptor = ParameterDescriptor(
            name=name,
            type=_parameter_type(annotation, name),
            description=info.description or "",
        )
        low = high = None
        for meta in info.metadata:
            if isinstance(meta, (Ge, Gt)):
                low = meta.ge if isinstance(meta, Ge) else meta.gt
            if isinstance(meta, (Le, Lt)):
                high = meta.le if isinstance(meta, Le) else meta.lt
        if low is not None and high is not None:
            if descriptor.type == ParameterType.PARAMETER_DOUBLE:
                descriptor.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
                ]
            elif descriptor.type == ParameterType.PARAMETER_INTEGER:
                descriptor.integer_range = [
                    IntegerRange(from_value=int(low), to_value=int(high), step=1)
                ]
        descriptors[name] = descriptor
    return descriptors


def _ros_value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def declare_config(
    node: Node,
    model: type[ModelT],
    on_change: Callable[[ModelT], None] | None = None,
) -> ModelT:
    """Declare every field of ``model`` as a parameter of ``node`` and return the config.

    Defaults come from the schema; values from parameter files and overrides apply. The result
    is validated as a whole, and later ``set_parameters`` calls are validated the same way:
    valid changes are passed to ``on_change``; invalid ones are refused with the reason.
    (Without ``on_change`` every runtime change is refused: the node reads config only once.)

    Raises:
        ConfigError: A parameter value is invalid at start-up (named in the message).
    """
    defaults = flatten(model().model_dump() if _all_defaulted(model) else {})
    descriptors = describe_parameters(model)
    for name, descriptor in descriptors.items():
        descriptor.dynamic_typing = name not in defaults
        default = defaults.get(name)
        try:
            node.declare_parameter(
                name,
                _ros_value(default) if default is not None else Parameter.Type.NOT_SET,
                descriptor,
            )
        except (InvalidParameterValueException, InvalidParameterTypeException) as error:
            given = _override_value(node, name)
            raise ConfigError(
                f"node '{node.get_name()}' parameters: {name} = {given!r}: "
                f"{_expected(descriptor)} ({type(error).__name__})"
            ) from None

    def current_values(overrides: dict[str, Any]) -> dict[str, Any]:
        values = {}
        for name in descriptors:
            value = overrides.get(name, node.get_parameter(name).value)
            if value is not None:
                values[name] = value
        return unflatten(values)

    config = parse_config(model, current_values({}), f"node '{node.get_name()}' parameters")

    def validate(params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params if p.name in descriptors}
        if not changes:
            return SetParametersResult(successful=True)
        if on_change is None:
            return SetParametersResult(
                successful=False, reason="this node reads its parameters only at start-up"
            )
        try:
            new_config = parse_config(model, current_values(changes), "parameter update")
        except ConfigError as error:
            return SetParametersResult(successful=False, reason=str(error))
        on_change(new_config)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(validate)
    return config


def _override_value(node: Node, name: str) -> Any:
    override = node._parameter_overrides.get(name)  # noqa: SLF001 - only to name the bad value
    return override.value if override is not None else None


def _expected(descriptor: ParameterDescriptor) -> str:
    if descriptor.floating_point_range:
        bounds = descriptor.floating_point_range[0]
        return f"expected a number in [{bounds.from_value}, {bounds.to_value}]"
    if descriptor.integer_range:
        bounds = descriptor.integer_range[0]
        return f"expected an integer in [{bounds.from_value}, {bounds.to_value}]"
    return f"expected type {Parameter.Type(descriptor.type).name}"


def _all_defaulted(model: type[BaseModel]) -> bool:
    try:
        model()
    except Exception:  # noqa: BLE001 - a schema with required fields has no full default
        return False
    return True
