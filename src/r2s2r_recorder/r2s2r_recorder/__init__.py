"""Demonstration recording to rosbag2 (MCAP) and bag-to-dataset conversion."""
