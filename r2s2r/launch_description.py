"""Build a ``launch`` LaunchDescription from a graph definition (``ros2 launch``).

The launch files in ``launch/`` call :func:`generate_graph_launch_description`, which
translates ``config/graphs/<name>.yaml`` (the one definition ``r2s2r launch`` also runs) into
launch constructs, with the parsing, typing and checks of :mod:`r2s2r.graph`:

* each argument: ``DeclareLaunchArgument`` (default, description, choices); a default that
  uses another argument (``use_sim_time: $(arg use_twin)``) is a substitution, checked against
  the choices once resolved;
* ``$(arg X)``: ``LaunchConfiguration('X')``; ``$(config)``: the ``config`` folder of the
  package share (``FindPackageShare('r2s2r')``);
* each node: ``launch_ros.actions.Node`` with its parameter files (``ParameterFile``), its
  overrides typed by the parameter schema the node declares (``ParameterValue`` with
  ``value_type``: ``episodes:=4`` reaches an integer parameter as 4, not ``'4'``), remappings,
  arguments and ``condition`` (``IfCondition``);
* a required node: when it exits, the launch shuts down, with reason "required node 'x'
  finished" on exit code 0; on a non-zero code the launch fails with "required node 'x' died
  with exit code N" and ``ros2 launch`` exits 1 (as ``r2s2r launch``);
* first of all, the values given to ``ros2 launch`` are checked by
  :func:`r2s2r.graph.resolve_graph`: an argument outside its choices, a missing file, a value
  of the wrong type or an unknown argument stops the launch before any node starts, with the
  same one-line message as ``r2s2r launch``.

Only the ``launch``/``launch_ros`` packages of a ROS 2 install are needed (imported when the
description is built).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from r2s2r.graph import (
    ArgRef,
    ConfigRef,
    GraphError,
    GraphSpec,
    NodeSpec,
    as_bool,
    check_references,
    has_substitution,
    load_graph,
    node_overrides,
    parse_template,
    resolve_graph,
)
from r2s2r.supervisor import DEFAULT_GRACE_PERIOD_S

# Launch configurations that `ros2 launch` itself adds to the arguments (--launch-prefix...).
ROS2_LAUNCH_OWN_ARGUMENTS = frozenset({"launch-prefix", "launch-prefix-filter"})


def generate_graph_launch_description(
    graph_name: str, directory: Path | None = None, reject_unknown_arguments: bool = True
) -> Any:
    """Return a LaunchDescription declaring the graph's arguments and starting its nodes.

    Args:
        graph_name: Graph in ``config/graphs`` (or a graph YAML path).
        directory: The config folder (default: the installed ``r2s2r`` share's ``config``).
        reject_unknown_arguments: Refuse ``NAME:=VALUE`` arguments of the ``ros2 launch``
            command line that the graph does not declare (as ``r2s2r launch`` does). A launch
            file that includes this one and takes arguments of its own passes False.

    Raises:
        GraphError: The graph is unknown or invalid.

    """
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import PathJoinSubstitution, TextSubstitution
    from launch_ros.substitutions import FindPackageShare

    from launch import LaunchDescription

    spec = load_graph(graph_name, directory)
    check_references(spec)
    config: Any = (
        PathJoinSubstitution([FindPackageShare("r2s2r"), "config"])
        if directory is None
        else TextSubstitution(text=str(directory))
    )

    def check_values(context: Any) -> None:
        check_launch_values(spec, context, directory, reject_unknown_arguments)

    entities: list[Any] = [OpaqueFunction(function=check_values)]
    for argument in spec.arguments:
        entities.append(
            DeclareLaunchArgument(
                argument.name,
                default_value=substitutions(argument.default, config),
                description=argument.description,
                choices=argument.choices,
            )
        )
    for node in spec.nodes:
        entities.extend(node_actions(node, config))
    return LaunchDescription(entities)


def substitutions(text: str, config: Any) -> Any:
    """Return a graph value as launch substitutions (the plain string when it has none)."""
    from launch.substitutions import LaunchConfiguration, TextSubstitution

    if not has_substitution(text):
        return text
    return [
        LaunchConfiguration(part.name)
        if isinstance(part, ArgRef)
        else config
        if isinstance(part, ConfigRef)
        else TextSubstitution(text=part)
        for part in parse_template(text)
    ]


def check_launch_values(
    spec: GraphSpec, context: Any, directory: Path | None, reject_unknown_arguments: bool
) -> None:
    """Check the values given to the launch as ``r2s2r launch`` checks them.

    Args:
        spec: The graph.
        context: The launch context (its launch configurations and ``ros2 launch`` argv).
        directory: The config folder (None: the installed share's).
        reject_unknown_arguments: Whether an argv ``NAME:=VALUE`` the graph does not declare
            is an error.

    Raises:
        GraphError: The one-line error ``r2s2r launch`` gives for the same values.

    """
    declared = {argument.name for argument in spec.arguments}
    given = {
        name: value for name, value in context.launch_configurations.items() if name in declared
    }
    if reject_unknown_arguments:
        for token in context.argv:
            name, separator, value = str(token).partition(":=")
            if separator and name not in declared and name not in ROS2_LAUNCH_OWN_ARGUMENTS:
                given[name] = value
    for name, value in given.items():
        if name in declared and has_substitution(value):
            raise GraphError(
                f"launch argument {name}:={value}: ros2 launch does not expand $(arg ...) or "
                "$(config) in given values; give the value itself"
            )
    resolve_graph(spec, given, directory)


def node_actions(node: NodeSpec, config: Any) -> list[Any]:
    """Return the launch_ros ``Node`` of one graph node, plus its exit handler if required."""
    from launch.actions import RegisterEventHandler
    from launch.conditions import IfCondition
    from launch.event_handlers import OnProcessExit
    from launch_ros.actions import Node
    from launch_ros.parameter_descriptions import ParameterFile, ParameterValue

    parameters: list[Any] = [
        ParameterFile(substitutions(path, config), allow_substs=False) for path in node.parameters
    ]
    overrides: dict[str, Any] = {}
    for override in node_overrides(node):
        value = override.value
        if not isinstance(value, str):
            overrides[override.name] = value  # a literal already of the declared type
        elif override.value_type is not None:
            overrides[override.name] = ParameterValue(
                substitutions(value, config), value_type=override.value_type
            )
        else:
            # No declared type known: the resolved text is read as YAML, as ROS reads `-p`.
            subs = substitutions(value, config)
            overrides[override.name] = subs if isinstance(subs, list) else [subs]
    if overrides:
        parameters.append(overrides)
    condition = None
    if has_substitution(node.condition):
        condition = IfCondition(substitutions(node.condition, config))
    elif not as_bool(node.condition, f"condition of node '{node.name}'"):
        condition = IfCondition("false")
    grace_s = str(DEFAULT_GRACE_PERIOD_S)
    action = Node(
        package=node.package,
        executable=node.executable,
        name=node.name,
        parameters=parameters,
        remappings=[
            (substitutions(source, config), substitutions(target, config))
            for source, target in node.remappings.items()
        ],
        arguments=[substitutions(argument, config) for argument in node.arguments],
        condition=condition,
        output="screen",
        sigterm_timeout=grace_s,
        sigkill_timeout=grace_s,
    )
    if not node.required:
        return [action]
    return [
        action,
        RegisterEventHandler(
            OnProcessExit(target_action=action, on_exit=required_node_exit(node.name))
        ),
    ]


def required_node_exit(node_name: str) -> Any:
    """Return the ``OnProcessExit`` callback of a required node: stop the whole launch.

    Exit code 0 (a finished job): a ``Shutdown`` with reason "required node 'x' finished".
    A non-zero code: :class:`GraphError` "required node 'x' died with exit code N"; the
    launch service logs it, shuts everything down and returns 1. Exits during a shutdown
    already under way (Ctrl-C, another node) change nothing.
    """
    from launch.actions import EmitEvent, LogInfo
    from launch.events import Shutdown

    def on_exit(event: Any, context: Any) -> list[Any] | None:
        if context.is_shutdown:
            return None
        if event.returncode == 0:
            reason = f"required node '{node_name}' finished; stopping the graph"
            return [LogInfo(msg=reason), EmitEvent(event=Shutdown(reason=reason))]
        raise GraphError(
            f"required node '{node_name}' died with exit code {event.returncode}; "
            "stopping the graph"
        )

    return on_exit
