"""Isolate ROS traffic of this test process from other test runs on the same machine."""

from __future__ import annotations

import os
import random

os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 200)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
