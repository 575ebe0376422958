"""Launch the evaluate graph (defined once in config/graphs/evaluate.yaml).

Usage: ros2 launch r2s2r evaluate.launch.py [NAME:=VALUE ...]
Without ros2 launch: r2s2r launch evaluate [NAME:=VALUE ...]
"""

from r2s2r.launch_description import generate_graph_launch_description


def generate_launch_description():
    """Build the launch description for the evaluate graph."""
    return generate_graph_launch_description("evaluate")
