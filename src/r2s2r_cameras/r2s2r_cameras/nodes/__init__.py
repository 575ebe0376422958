"""ROS 2 nodes of r2s2r_cameras (thin edges over the ROS-free backends)."""
