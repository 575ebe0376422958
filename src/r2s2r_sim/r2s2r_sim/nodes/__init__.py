"""ROS 2 nodes of r2s2r_sim (thin edges over :mod:`r2s2r_sim.cell_runtime`)."""
