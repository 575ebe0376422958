"""Launch the real_deploy graph (defined once in config/graphs/real_deploy.yaml).

Usage: ros2 launch r2s2r real_deploy.launch.py [NAME:=VALUE ...]
Without ros2 launch: r2s2r launch real_deploy [NAME:=VALUE ...]
"""

from r2s2r.launch_description import generate_graph_launch_description


def generate_launch_description():
    """Build the launch description for the real_deploy graph."""
    return generate_graph_launch_description("real_deploy")
