"""Robot (arm + multi-finger hand) and cell description: one source of truth for simulator, planner and rviz."""
