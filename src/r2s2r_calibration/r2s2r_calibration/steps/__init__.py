"""The grounding procedure's steps, one module per step family, all of one signature.

Every step is a :class:`~r2s2r_calibration.procedure_types.Step`; the procedure runs them from
its one table, :data:`r2s2r_calibration.procedure.STEPS`:

- :mod:`.board`: ``intrinsics`` (+ blur) and ``extrinsics`` of both cameras, from board views;
- :mod:`.scene`: ``registration`` (belt and bins in head depth) and ``bins`` (rim views);
- :mod:`.sysid`: ``sysid`` (the controllers' gains and latency);
- :mod:`.belt`: ``belt`` (roller radius and surface speed).

The algorithms the steps run live in the package's plain modules (:mod:`..intrinsics`,
:mod:`..registration`, :mod:`..bin_views`, :mod:`..sysid`, :mod:`..belt_model`, ...).
"""
