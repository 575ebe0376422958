"""ROS-free policy inference: observation buffer, safety filter and a worker-thread engine.

The :class:`~.engine.InferenceEngine` holds a loaded :class:`~r2s2r_policy.models.Policy`, the
latest observation of every input with the time it was received (:mod:`.observations`: camera
images resized to the spec's size, joint positions, belt speed, the tracked object made from
``/objects/tracks`` by :class:`r2s2r_dataset.ObjectTrackLatch` as in the datasets), and
runs :meth:`~r2s2r_policy.models.Policy.predict_chunk` at the command rate on its own worker
thread (never in a sensor callback).

Time (the rule of :mod:`r2s2r_policy.spec`): chunk step ``k`` is the target ``k + 1`` control
steps after the observation it was computed from, so the sent trajectory's ``time_from_start``
of point ``k`` is ``(k + 1)·dt`` minus the time already spent since the newest image arrived.
How chunks become commands is a setting (:class:`~.engine.InferenceConfig`):

- ``receding`` (default): a new chunk is computed every ``executed_steps`` control steps and
  replaces the trajectory in force (with 1: every step, only its first point is ever reached);
- ``temporal_ensemble`` (ACT, Zhao et al. 2023): a chunk every step; the target of each future
  step is the weighted mean of every stored chunk's prediction for that step, weights
  ``exp(-m·i)`` with ``i = 0`` the oldest prediction (ACT's convention, ``m`` =
  ``ensemble_weight_decay``; :class:`~.ensemble.TemporalEnsemble`).

Every command (:class:`~.commands.ActionCommand`) passes the safety filter (:mod:`.safety`)
before it is handed to the ``publish`` callback:

- a chunk with a NaN or Inf is dropped and counted (:func:`~.safety.chunk_is_finite`);
- joint positions are clamped to the joint limits (:func:`~.safety.clamp_positions`);
- successive points (starting at the measured position) are limited so that
  ``|Δq| / dt`` stays within the velocity limits (:func:`~.safety.limit_velocities`);
- when any observation is older than ``stale_observation_s`` the engine stops commanding: it
  sends one hold command at the measured position and then nothing until every input is fresh
  again (:func:`~.observations.observation_ages`, :meth:`~.engine.InferenceEngine.step`).

The policy node (:mod:`r2s2r_policy.nodes.policy_inference`) is a thin edge over this package;
the in-process evaluator (:mod:`r2s2r_policy.evaluation.in_process`) drives the same engine
synchronously on simulated time (:meth:`~.engine.InferenceEngine.step` with a sim clock), so
both paths share one observation pipeline and one safety filter.
"""
