"""Shared building blocks: typed configs, image conversion, camera_info; thin rclpy helpers."""
