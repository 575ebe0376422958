"""Graphs of nodes defined once, as data (``config/graphs/<name>.yaml``).

A graph lists launch arguments and nodes (package, executable, parameter files, parameter
overrides, remappings, whether the node is required). ``launch/<name>.launch.py`` turns a
resolved graph into ``launch_ros`` actions for ROS 2 installs; ``r2s2r launch <name>`` runs
the very same resolved graph as supervised processes where ``ros2 launch`` is not available.

Values may use two substitutions, resolved by :func:`resolve_graph`:
``$(arg NAME)`` (a launch argument) and ``$(config)`` (the bring-up ``config/`` folder).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel, parse_config, read_yaml

_SUBSTITUTION = re.compile(r"\$\((arg) ([A-Za-z_][A-Za-z0-9_]*)\)|\$\((config)\)")
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off", ""}


class LaunchArgumentSpec(ConfigModel):
    """A launch argument: name, default, description and optional allowed values."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="Argument name.")
    default: str = Field(description="Default value (substitutions allowed).")
    description: str = Field(min_length=1, description="What the argument sets.")
    choices: list[str] | None = Field(default=None, description="Allowed values, if limited.")
    file: bool = Field(default=False, description="The value names a file that must exist.")


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


class GraphSpec(ConfigModel):
    """A named graph: launch arguments and nodes."""

    name: str = Field(description="Graph name (file stem).")
    description: str = Field(min_length=1, description="What the graph is for.")
    arguments: list[LaunchArgumentSpec] = Field(default_factory=list)
    nodes: list[NodeSpec] = Field(min_length=1)


@dataclass(frozen=True)
class ResolvedNode:
    """A node with every substitution resolved: ready for launch_ros or the supervisor."""

    name: str
    package: str
    executable: str
    parameter_files: tuple[Path, ...]
    parameter_overrides: dict[str, str | int | float | bool] = field(default_factory=dict)
    remappings: dict[str, str] = field(default_factory=dict)
    arguments: tuple[str, ...] = ()
    required: bool = True

    def ros_arguments(self) -> list[str]:
        """Command-line arguments in the ``--ros-args`` form every rclpy node accepts."""
        args = [*self.arguments, "--ros-args", "-r", f"__node:={self.name}"]
        for path in self.parameter_files:
            args += ["--params-file", str(path)]
        for key, value in self.parameter_overrides.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            # rcl rejects `-p key:=` with nothing after it: an empty string is written as ''.
            args += ["-p", f"{key}:={text or repr('')}"]
        for source, target in self.remappings.items():
            args += ["-r", f"{source}:={target}"]
        return args


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
            choices, or a parameter file that does not exist.

    """
    base = directory or config_dir()
    declared = {argument.name: argument for argument in spec.arguments}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        choices = ", ".join(sorted(declared)) or "none"
        raise GraphError(
            f"unknown launch argument '{unknown[0]}' for graph '{spec.name}' (choices: {choices})"
        )

    values: dict[str, str] = {}

    def substitute(text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            if match.group(3):
                return str(base)
            if match.group(2) not in values:
                raise GraphError(
                    f"graph '{spec.name}': '{text}' uses $(arg {match.group(2)}), which is not "
                    "declared before it"
                )
            return values[match.group(2)]

        return _SUBSTITUTION.sub(replace, text)

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

    for node in spec.nodes:
        for text in [
            *node.parameters,
            node.condition,
            *map(str, node.parameter_overrides.values()),
        ]:
            for match in _SUBSTITUTION.finditer(text):
                if match.group(2) and match.group(2) not in declared:
                    raise GraphError(
                        f"graph '{spec.name}', node '{node.name}' uses $(arg {match.group(2)}) "
                        "which is not declared"
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
        overrides = {
            key: substitute(value) if isinstance(value, str) else value
            for key, value in node.parameter_overrides.items()
        }
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
            )
        )
    return resolved
