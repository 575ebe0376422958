"""Graphs of nodes defined once, as data (``config/graphs/<name>.yaml``).

A graph lists launch arguments and nodes (package, executable, parameter files, parameter
overrides, remappings, whether the node is required). ``launch/<name>.launch.py`` turns a
resolved graph into ``launch_ros`` actions for ROS 2 installs; ``r2s2r launch <name>`` runs
the very same resolved graph as supervised processes where ``ros2 launch`` is not available.

Values may use two substitutions: ``$(arg NAME)`` (a launch argument) and ``$(config)`` (the
bring-up ``config/`` folder). :func:`parse_template` splits a value into literal text and
these references once, for both consumers: :func:`resolve_graph` fills them in with the given
values, :mod:`r2s2r.launch_description` turns them into ``LaunchConfiguration`` and the
package share path.

Parameter overrides are typed by the parameter schema the node declares (the
``PARAMETER_SCHEMA`` of the module behind its executable, see
:func:`node_parameter_types`): ``episodes_per_configuration: "$(arg episodes)"`` becomes the
integer 4, not the string ``'4'``, in both.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field
from r2s2r_common.config import (
    ConfigError,
    ConfigModel,
    parse_config,
    read_yaml,
    schema_parameter_types,
)

_SUBSTITUTION = re.compile(r"\$\((arg) ([A-Za-z_][A-Za-z0-9_]*)\)|\$\((config)\)")
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off", ""}
# Parameters every rclpy node declares itself, whatever its schema.
ROS_BUILTIN_PARAMETERS: dict[str, type] = {"use_sim_time": bool}
_TYPE_WORDS = {
    bool: "a boolean (true or false)",
    int: "an integer",
    float: "a number",
    str: "a string",
}


class LaunchArgumentSpec(ConfigModel):
    """A launch argument: name, default, description and optional allowed values."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Argument name.")
    default: str = Field(description="Default value (substitutions allowed).")
    description: str = Field(min_length=1, description="What the argument sets.")
    choices: list[str] | None = Field(default=None, description="Allowed values, if limited.")
    file: bool = Field(default=False, description="The value names a file that must exist.")


ConsoleMode = Literal["problems", "all", "plain"]
"""What of a node's output reaches the console of ``r2s2r launch`` (see ``NodeSpec.console``)."""


class NodeSpec(ConfigModel):
    """One node of a graph."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Node name.")
    package: str = Field(description="ROS package that installs the executable.")
    executable: str = Field(description="Executable in lib/<package>/.")
    parameters: list[str] = Field(default_factory=list, description="Parameter YAML files.")
    parameter_overrides: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Single parameters set after the files."
    )
    remappings: dict[str, str] = Field(default_factory=dict, description="Topic remappings.")
    arguments: list[str] = Field(default_factory=list, description="Extra command-line args.")
    required: bool = Field(default=True, description="Graph stops when this node exits.")
    condition: str = Field(default="true", description="Start only when this is true.")
    console: ConsoleMode = Field(
        default="problems",
        description="What of the node's output `r2s2r launch` shows (all of it is in the node's "
        "log): problems (warnings and errors), all (every line, prefixed with the node's "
        "name), plain (every line as is: the node's output is the job's, e.g. sim_generate).",
    )


class GraphSpec(ConfigModel):
    """A named graph: launch arguments and nodes."""

    name: str = Field(description="Graph name (file stem).")
    description: str = Field(min_length=1, description="What the graph is for.")
    arguments: list[LaunchArgumentSpec] = Field(default_factory=list)
    nodes: list[NodeSpec] = Field(min_length=1)


@dataclass(frozen=True)
class ResolvedNode:
    """A node with every substitution resolved: ready for launch_ros or the supervisor.

    ``parameter_overrides`` hold values of the type the node declares (see
    ``parameter_types``); an override of a parameter with no known declared type keeps the
    graph's value (a string is then read as YAML by ROS, as ``-p`` does).
    """

    name: str
    package: str
    executable: str
    parameter_files: tuple[Path, ...]
    parameter_overrides: dict[str, str | int | float | bool] = field(default_factory=dict)
    remappings: dict[str, str] = field(default_factory=dict)
    arguments: tuple[str, ...] = ()
    required: bool = True
    parameter_types: dict[str, type] = field(default_factory=dict)
    console: ConsoleMode = "problems"

    def ros_arguments(self) -> list[str]:
        """Command-line arguments in the ``--ros-args`` form every rclpy node accepts."""
        args = [*self.arguments, "--ros-args", "-r", f"__node:={self.name}"]
        for path in self.parameter_files:
            args += ["--params-file", str(path)]
        for key, value in self.parameter_overrides.items():
            if isinstance(value, bool):
                text = str(value).lower()
            elif self.parameter_types.get(key) is str:
                text = _yaml_string(str(value))
            else:
                text = str(value)
            # rcl rejects `-p key:=` with nothing after it: an empty string is written as ''.
            args += ["-p", f"{key}:={text or repr('')}"]
        for source, target in self.remappings.items():
            args += ["-r", f"{source}:={target}"]
        return args


def _yaml_string(text: str) -> str:
    """``text`` as a YAML scalar that reads back as this string (quoted only when needed).

    rcl reads ``-p name:=value`` as YAML: a string parameter given ``1.0``, ``true`` or an
    empty string must be quoted to stay a string.
    """
    try:
        plain = text != "" and yaml.safe_load(text) == text and "\n" not in text
    except yaml.YAMLError:
        plain = False
    return text if plain else "'" + text.replace("'", "''") + "'"


class GraphError(ConfigError):
    """A graph name, launch argument or referenced file is wrong."""


def config_dir() -> Path:
    """Return the bring-up ``config/`` folder (installed share dir, else the source tree)."""
    try:
        from ament_index_python.packages import (
            PackageNotFoundError,
            get_package_share_directory,
        )

        try:
            return Path(get_package_share_directory("r2s2r")) / "config"
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    return Path(__file__).resolve().parent.parent / "config"


def available_graphs(directory: Path | None = None) -> list[str]:
    """Names of the graphs defined in ``config/graphs``."""
    graphs_dir = (directory or config_dir()) / "graphs"
    return sorted(path.stem for path in graphs_dir.glob("*.yaml"))


def load_graph(name: str, directory: Path | None = None) -> GraphSpec:
    """Load and validate the graph ``name`` from ``config/graphs``, or a graph YAML file path.

    Raises:
        GraphError: Unknown graph (the message lists the choices) or invalid definition.

    """
    base = directory or config_dir()
    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise GraphError(f"graph file not found: {path}")
    else:
        path = base / "graphs" / f"{name}.yaml"
        if not path.is_file():
            choices = ", ".join(available_graphs(base)) or "none"
            raise GraphError(f"unknown graph '{name}' (choices: {choices})")
    spec = parse_config(GraphSpec, read_yaml(path), str(path))
    if spec.name != path.stem:
        raise GraphError(f"{path}: name is '{spec.name}', expected '{path.stem}' (the file stem)")
    return spec


def parse_launch_arguments(tokens: list[str]) -> dict[str, str]:
    """Parse ``name:=value`` tokens as ``ros2 launch`` takes them.

    Raises:
        GraphError: A token that is not ``name:=value``.

    """
    values: dict[str, str] = {}
    for token in tokens:
        name, separator, value = token.partition(":=")
        if not separator or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise GraphError(f"bad launch argument '{token}': expected NAME:=VALUE")
        values[name] = value
    return values


def as_bool(text: str, what: str) -> bool:
    """Interpret a launch-argument string as a boolean.

    Raises:
        GraphError: If the text is not a recognised boolean word.

    """
    lowered = text.strip().lower()
    if lowered in _TRUE_WORDS:
        return True
    if lowered in _FALSE_WORDS:
        return False
    raise GraphError(f"{what} = '{text}': expected true or false")


@dataclass(frozen=True)
class ArgRef:
    """``$(arg NAME)`` in a graph value."""

    name: str


@dataclass(frozen=True)
class ConfigRef:
    """``$(config)`` in a graph value: the bring-up ``config/`` folder."""


TemplatePart = str | ArgRef | ConfigRef


def parse_template(text: str) -> tuple[TemplatePart, ...]:
    """Split a graph value into literal text, ``$(arg NAME)`` and ``$(config)`` parts."""
    parts: list[TemplatePart] = []
    position = 0
    for match in _SUBSTITUTION.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        parts.append(ArgRef(match.group(2)) if match.group(1) else ConfigRef())
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return tuple(parts)


def has_substitution(text: str) -> bool:
    """Whether ``text`` uses ``$(arg ...)`` or ``$(config)``."""
    return _SUBSTITUTION.search(text) is not None


def _referenced_arguments(text: str) -> list[str]:
    return [part.name for part in parse_template(text) if isinstance(part, ArgRef)]


def node_templates(node: NodeSpec) -> list[str]:
    """Every value of a node that may hold substitutions."""
    return [
        *node.parameters,
        node.condition,
        *(value for value in node.parameter_overrides.values() if isinstance(value, str)),
        *node.remappings,
        *node.remappings.values(),
        *node.arguments,
    ]


def check_references(spec: GraphSpec) -> None:
    """Check that every ``$(arg NAME)`` of a graph names a declared argument.

    An argument's default may only use arguments declared before it (they are resolved in
    order, by ``r2s2r launch`` and ``ros2 launch`` alike).

    Raises:
        GraphError: A reference to an undeclared (or later) argument.

    """
    declared: set[str] = set()
    for argument in spec.arguments:
        for name in _referenced_arguments(argument.default):
            if name not in declared:
                raise GraphError(
                    f"graph '{spec.name}': '{argument.default}' uses $(arg {name}), which is "
                    "not declared before it"
                )
        declared.add(argument.name)
    for node in spec.nodes:
        for text in node_templates(node):
            for name in _referenced_arguments(text):
                if name not in declared:
                    raise GraphError(
                        f"graph '{spec.name}', node '{node.name}' uses $(arg {name}) "
                        "which is not declared"
                    )


@functools.cache
def node_parameter_types(package: str, executable: str) -> dict[str, tuple[type, bool]] | None:
    """Return the parameters a node executable declares: name -> (scalar type, is a list).

    The executable is the ``console_scripts`` entry point of the package's distribution; its
    module names the schema it declares from as ``PARAMETER_SCHEMA``
    (:func:`r2s2r_common.ros.params.declare_config`). ``use_sim_time`` (declared by rclpy) is
    included.

    Returns:
        None when the package is not an installed Python distribution, has no such entry
        point, or its module names no schema (overrides then keep the graph's values).

    Raises:
        GraphError: The executable's module does not import.

    """
    try:
        distribution = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    modules = [
        entry.module
        for entry in distribution.entry_points
        if entry.group == "console_scripts" and entry.name == executable
    ]
    if not modules:
        return None
    try:
        module = importlib.import_module(modules[0])
    except ImportError as error:
        raise GraphError(
            f"{package}/{executable}: cannot import {modules[0]} for its parameter schema: {error}"
        ) from None
    schema = getattr(module, "PARAMETER_SCHEMA", None)
    if schema is None:
        return None
    types = {name: (kind, False) for name, kind in ROS_BUILTIN_PARAMETERS.items()}
    types.update(schema_parameter_types(schema))
    return types


@dataclass(frozen=True)
class OverrideSpec:
    """One parameter override of a node, with the type the node declares for it.

    Attributes:
        name: Parameter name (dotted).
        value: The graph's value: a literal of the declared type, or a string with
            substitutions (typed once they are resolved).
        value_type: bool, int, float or str as the node declares it; None when unknown or a
            list (the value is then read as YAML, as ROS reads ``-p``).

    """

    name: str
    value: str | int | float | bool
    value_type: type | None


def coerce_parameter(value: str | int | float | bool, value_type: type | None, what: str) -> Any:
    """Convert an override value to the declared parameter type.

    Strings convert as launch_ros converts a typed substitution (``ParameterValue``):
    ``int("4")``, ``float("1")``, booleans from true/false/1/0/yes/no/on/off; a literal of
    another type must already be of the declared type (an int is a valid float).

    Raises:
        GraphError: The value is not of (or convertible to) the declared type.

    """
    if value_type is None:
        return value
    expected = f"{what} = {value!r}: expected {_TYPE_WORDS[value_type]}"
    if isinstance(value, str) and value_type is not str:
        lowered = value.strip().lower()
        if value_type is bool:
            if lowered in _TRUE_WORDS - {""}:
                return True
            if lowered in _FALSE_WORDS - {""}:
                return False
            raise GraphError(expected)
        try:
            return value_type(value)
        except ValueError:
            raise GraphError(expected) from None
    if value_type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not value_type:
        raise GraphError(expected)
    return value


def node_overrides(node: NodeSpec) -> list[OverrideSpec]:
    """Return the node's parameter overrides with their declared types (literals converted).

    Raises:
        GraphError: An override of a parameter the node does not declare, or a literal of the
            wrong type.

    """
    declared = node_parameter_types(node.package, node.executable)
    overrides = []
    for name, value in node.parameter_overrides.items():
        value_type: type | None = None
        if declared is not None:
            if name not in declared:
                raise GraphError(
                    f"node '{node.name}': parameter override '{name}' is not a parameter of "
                    f"{node.package}/{node.executable}"
                )
            scalar, is_list = declared[name]
            value_type = None if is_list else scalar
        what = f"node '{node.name}': parameter {name}"
        if not (isinstance(value, str) and has_substitution(value)):
            value = coerce_parameter(value, value_type, what)
        overrides.append(OverrideSpec(name, value, value_type))
    return overrides


def resolve_graph(
    spec: GraphSpec, given: dict[str, str], directory: Path | None = None
) -> list[ResolvedNode]:
    """Resolve launch arguments, substitutions and conditions into runnable nodes.

    Args:
        spec: The graph definition.
        given: Launch arguments from the user (``name -> value``).
        directory: The config folder (defaults to :func:`config_dir`).

    Raises:
        GraphError: Unknown argument (lists the choices), a value outside an argument's
            choices, a parameter file that does not exist, or an override value that is not
            of the type the node declares.

    """
    base = directory or config_dir()
    declared = {argument.name: argument for argument in spec.arguments}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        choices = ", ".join(sorted(declared)) or "none"
        raise GraphError(
            f"unknown launch argument '{unknown[0]}' for graph '{spec.name}' (choices: {choices})"
        )
    check_references(spec)

    values: dict[str, str] = {}

    def substitute(text: str) -> str:
        pieces = []
        for part in parse_template(text):
            if isinstance(part, ConfigRef):
                pieces.append(str(base))
            elif isinstance(part, ArgRef):
                if part.name not in values:
                    raise GraphError(
                        f"graph '{spec.name}': '{text}' uses $(arg {part.name}), which is not "
                        "declared before it"
                    )
                pieces.append(values[part.name])
            else:
                pieces.append(part)
        return "".join(pieces)

    for argument in spec.arguments:
        value = substitute(given.get(argument.name, argument.default))
        if argument.choices is not None and value not in argument.choices:
            raise GraphError(
                f"launch argument {argument.name}:={value} is not allowed "
                f"(choices: {', '.join(argument.choices)})"
            )
        values[argument.name] = value
        if argument.file and not Path(values[argument.name]).is_file():
            raise GraphError(
                f"launch argument {argument.name}:={values[argument.name]}: file not found"
            )

    resolved = []
    for node in spec.nodes:
        if not as_bool(substitute(node.condition), f"condition of node '{node.name}'"):
            continue
        files = []
        for template in node.parameters:
            path = Path(substitute(template))
            if not path.is_file():
                raise GraphError(f"node '{node.name}': parameter file not found: {path}")
            files.append(path)
        overrides: dict[str, str | int | float | bool] = {}
        types: dict[str, type] = {}
        for override in node_overrides(node):
            typed_value = override.value
            if isinstance(typed_value, str):
                typed_value = coerce_parameter(
                    substitute(typed_value),
                    override.value_type,
                    f"node '{node.name}': parameter {override.name} (from {typed_value})",
                )
            overrides[override.name] = typed_value
            if override.value_type is not None:
                types[override.name] = override.value_type
        resolved.append(
            ResolvedNode(
                name=node.name,
                package=node.package,
                executable=node.executable,
                parameter_files=tuple(files),
                parameter_overrides=overrides,
                remappings={substitute(k): substitute(v) for k, v in node.remappings.items()},
                arguments=tuple(substitute(a) for a in node.arguments),
                required=node.required,
                parameter_types=types,
                console=node.console,
            )
        )
    return resolved
