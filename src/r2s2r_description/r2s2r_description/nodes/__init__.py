"""ROS nodes of r2s2r_description (``cell_state_publisher``) and their ROS-free core."""
