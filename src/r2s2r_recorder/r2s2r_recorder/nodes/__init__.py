"""ROS 2 nodes of r2s2r_recorder (thin edges over the ROS-free core)."""
