"""ROS 2 nodes of r2s2r_datagen (thin edges over the ROS-free job runner)."""
