"""ROS 2 nodes of r2s2r_belt (thin edges over the ROS-free estimators)."""
