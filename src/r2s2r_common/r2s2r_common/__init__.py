"""Shared, ROS-free building blocks: typed config loading, image conversion, geometry; plus thin rclpy helpers (parameters from schemas, QoS, diagnostics)."""
