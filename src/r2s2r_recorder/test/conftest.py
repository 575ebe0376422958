"""Isolate this package's rclpy tests from other engineers' tests on the same machine."""

import os
import random

os.environ["ROS_DOMAIN_ID"] = str(random.Random(os.getpid()).randint(1, 200))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("MPLBACKEND", "Agg")
