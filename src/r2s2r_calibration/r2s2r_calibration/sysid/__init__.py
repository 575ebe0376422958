"""Robot system identification: the simulator's controller model fitted to measured responses.

The simulator's controller model (:mod:`r2s2r_sim.controllers` + :mod:`r2s2r_sim.mujoco_backend`)
is a position servo per joint (stiffness ``kp``, damping ``kd``) on gravity-compensated links,
fed by a joint trajectory controller whose commands execute ``latency_s`` after they arrive
(one latency shared by arm and hand). System identification:

1. :func:`.excitation.plan_excitation` designs per-joint excitation segments (a step out and
   back, then a chirp), each one a JointTrajectory for the joint's controller with a *future*
   start time (``header.stamp``), so the start of each segment is known on the cell clock.
2. The procedure sends them (:func:`.excitation.merge_segments`: one command per controller)
   and logs ``/joint_states`` (:class:`.log.JointStateLog`).
3. :func:`.log.check_log` refuses logs with gaps, missing joints or joints that never moved.
4. :func:`.identify.identify_controller` simulates the nominal MuJoCo model on the same
   commands (:class:`.simulation.SegmentSimulator`) and fits (:mod:`.fit`), by least squares on
   the joint trajectory error: first the latency, continuous (a command path's delay is no
   multiple of the control period; the controller samples a command from
   ``receipt + latency``), jointly with the gains of a few probe joints, then every joint's
   ``kp`` and ``kd`` on its step segment with that latency. The chirp segments are held out:
   their RMS error validates the model, and a held-out error above the threshold refuses the
   result.

One module per concern: :mod:`.config` (excitation design and acceptance thresholds),
:mod:`.excitation` (the segments and the commands that carry them), :mod:`.log` (the logged
joint states and their checks), :mod:`.simulation` (the MuJoCo model run on the commands),
:mod:`.fit` (one segment's least-squares fits: gains, latency), :mod:`.identify` (the whole
identification: latency, gains, held-out validation, the result).

Nothing here imports rclpy; the log is plain arrays.
"""
