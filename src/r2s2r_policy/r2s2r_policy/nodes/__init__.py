"""ROS nodes of r2s2r_policy (thin edges over the ROS-free modules)."""
