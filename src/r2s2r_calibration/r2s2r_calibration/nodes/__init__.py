"""ROS nodes of r2s2r_calibration (thin edges over the procedure)."""
