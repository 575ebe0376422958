"""ROS nodes of r2s2r_world: ``cell_state_publisher`` (core: ``r2s2r_description.tf_tree``)."""
