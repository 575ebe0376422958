"""Behavior grounding (MimicGen with moving objects), planner synthesis, generation jobs.

Jobs run on a local process pool or on Ray; see :mod:`r2s2r_datagen.runner`.
"""
