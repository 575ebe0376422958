"""Robot (arm + multi-finger hand) and cell description.

One source of truth for the simulator, the planner and rviz.
"""
