"""World grounding: intrinsics + blur, hand-eye, scene registration, system id, belt model.

Solvers are plain modules (no rclpy): :mod:`.intrinsics`, :mod:`.blur`, :mod:`.extrinsics`,
:mod:`.registration`, :mod:`.belt_model`; :mod:`.artifact` holds the grounding artifact.
"""
