"""The world contract (``docs/architecture.md``, sections 2 and 5).

- :mod:`r2s2r_world.world`: :class:`~r2s2r_world.world.WorldParams`, the one schema of what
  grounding recovers and the evaluation shifts; :func:`~r2s2r_world.world.apply_grounding`
  gives ``nominal + artifact``.
- :mod:`r2s2r_world.grounding`: the one reader of a grounding artifact
  (:func:`~r2s2r_world.grounding.read_artifact`) and its schema version
  (:data:`~r2s2r_world.grounding.ARTIFACT_SCHEMA_VERSION`); the calibration package writes the
  artifact and validates its records on top of this reader.
- :mod:`r2s2r_world.kinematics`: arm inverse and forward kinematics of a cell layout (the
  description's model compiled by MuJoCo; no simulation).
- ``cell_state_publisher`` (:mod:`r2s2r_world.nodes.cell_state_publisher`): the cell's
  ``/robot_description``, ``/tf_static`` (nominal or grounded mounts) and ``/tf``.

Importing this package imports none of its modules: sensing nodes that need only the schema do
not load MuJoCo or rclpy.
"""
