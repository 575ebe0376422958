"""ROS nodes of r2s2r_view."""
