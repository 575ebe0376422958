"""Behavior grounding (MimicGen with moving objects), planner synthesis, generation jobs (process pool or Ray)."""
