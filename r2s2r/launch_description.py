"""Build a ``launch`` LaunchDescription from a graph definition (ROS 2 installs only).

The launch files in ``launch/`` call :func:`generate_graph_launch_description`; the nodes they
start are exactly those ``r2s2r launch`` would start, because both resolve the same
``config/graphs/<name>.yaml`` with :func:`r2s2r.graph.resolve_graph`.
"""

from __future__ import annotations

from typing import Any

from r2s2r.graph import load_graph, resolve_graph


def generate_graph_launch_description(graph_name: str) -> Any:
    """Return a LaunchDescription declaring the graph's arguments and starting its nodes.

    A required node that exits shuts the whole launch down, as the supervisor does.
    """
    from launch.actions import (
        DeclareLaunchArgument,
        EmitEvent,
        OpaqueFunction,
        RegisterEventHandler,
    )
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from launch import LaunchContext, LaunchDescription

    spec = load_graph(graph_name)

    def start_nodes(context: LaunchContext) -> list[Any]:
        given = {
            argument.name: LaunchConfiguration(argument.name).perform(context)
            for argument in spec.arguments
        }
        actions: list[Any] = []
        for node in resolve_graph(spec, given):
            parameters: list[Any] = [str(path) for path in node.parameter_files]
            if node.parameter_overrides:
                parameters.append(dict(node.parameter_overrides))
            action = Node(
                package=node.package,
                executable=node.executable,
                name=node.name,
                parameters=parameters,
                remappings=list(node.remappings.items()),
                arguments=list(node.arguments),
                output="screen",
            )
            actions.append(action)
            if node.required:
                actions.append(
                    RegisterEventHandler(
                        OnProcessExit(
                            target_action=action,
                            on_exit=[EmitEvent(event=Shutdown(reason=f"{node.name} exited"))],
                        )
                    )
                )
        return actions

    declared = [
        DeclareLaunchArgument(
            argument.name,
            default_value=argument.default,
            description=argument.description,
            choices=argument.choices,
        )
        for argument in spec.arguments
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=start_nodes)])
