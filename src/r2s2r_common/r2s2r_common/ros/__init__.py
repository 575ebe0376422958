"""Thin rclpy helpers shared by the nodes: parameters from typed schemas, QoS, diagnostics.

Only node modules import this subpackage; the algorithms never do.
"""
