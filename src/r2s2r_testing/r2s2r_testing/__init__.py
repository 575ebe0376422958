"""The workspace's test infrastructure, one home for what tests share.

- :mod:`.plugin`: the pytest plugin the root ``conftest.py`` loads (``pytest_plugins``): the ROS
  context fixture and the generation inputs fixture;
- :mod:`.ros`: an initialised rclpy context as a context manager (what the fixture uses, and
  module-scoped fixtures or tests that need their own domain);
- :mod:`.episodes`: synthetic dataset episodes (the one factory), and the robot-sized dataset
  the experiment tests train on;
- :mod:`.pick_demo`: a scripted pick demonstration for MimicGen's subtask annotation;
- :mod:`.bags`: synthetic episode bags (rosbag2, MCAP) from real ROS message types;
- :mod:`.generation`: the scripted test generator and a tiny generation configurations file;
- :mod:`.stand_ins`: small programs that tests start as processes
  (``python -m r2s2r_testing.stand_ins NAME ...``) in place of a real stage command.

Nothing here is imported by the packages themselves; the modules import rclpy, message types,
NumPy or the simulator only where they need them, so that loading the plugin stays cheap.
"""
