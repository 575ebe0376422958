"""ROS nodes of r2s2r_planner (thin edges over the core)."""
