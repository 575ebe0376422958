"""Launch the sim_generate graph (defined once in config/graphs/sim_generate.yaml).

Usage: ros2 launch r2s2r sim_generate.launch.py [NAME:=VALUE ...]
Without ros2 launch: r2s2r launch sim_generate [NAME:=VALUE ...]
"""

from r2s2r.launch_description import generate_graph_launch_description


def generate_launch_description():
    """Build the launch description for the sim_generate graph."""
    return generate_graph_launch_description("sim_generate")
