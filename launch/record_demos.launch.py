"""Launch the record_demos graph (defined once in config/graphs/record_demos.yaml).

Usage: ros2 launch r2s2r record_demos.launch.py [NAME:=VALUE ...]
Without ros2 launch: r2s2r launch record_demos [NAME:=VALUE ...]
"""

from r2s2r.launch_description import generate_graph_launch_description


def generate_launch_description():
    """Build the launch description for the record_demos graph."""
    return generate_graph_launch_description("record_demos")
