"""Workspace-wide pytest set-up: isolate ROS 2 traffic of each test run."""

import os
import random

# Each pytest process talks on its own DDS domain, on this host only, so that parallel runs
# (or a running cell) never cross-talk with the tests.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 200)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("MPLBACKEND", "Agg")
