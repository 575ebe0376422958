"""r2s2r policy: models, co-training, evaluation and the policy inference node.

The learning core (:mod:`.spec`, :mod:`.models`, :mod:`.data`, :mod:`.sampling`,
:mod:`.training`, :mod:`.checkpoint`) imports no ROS; nodes live in ``nodes/``.
"""
