"""Object tracking on the belt from the head camera's RGB + registered depth (no ROS).

:class:`~r2s2r_belt.tracking.pipeline.ObjectTrackerCore` is the entry point: one call per
synchronised frame gives the tracks in the base frame. The parts are importable on their own:
:mod:`~r2s2r_belt.tracking.detection` (segmentation, classification, pose),
:mod:`~r2s2r_belt.tracking.tracker` (Kalman tracks, association),
:mod:`~r2s2r_belt.tracking.tf_tree` (static transforms), :mod:`~r2s2r_belt.tracking.catalogue`.
"""
