"""The 2×2 co-training experiment, in one place: its design, its stages and its results.

Real-only vs real + each simulated configuration (world nominal | grounded × behavior planner |
MimicGen), trained on the same demonstrations and evaluated on the same trials
(``r2s2r experiment``; docs/architecture.md section 3 walks through one stage).

- :mod:`.config`: :class:`~.config.ExperimentConfig` and the presets
  (``config/experiment/<preset>.yaml``: sizes and seeds, no command lines);
- :mod:`.options`: the command-line options, one table (options, overrides, reproduce);
- :mod:`.validation`: every part of a config checked before the first stage runs;
- :mod:`.session`: one experiment directory as the stages see it;
- :mod:`.products`: what stages hand on (:class:`~.products.DatasetProduct`,
  :class:`~.products.ArtifactProduct`, :class:`~.products.Checkpoint`, or
  :class:`~.products.Unavailable` with the reason);
- the stages: :mod:`.cell` (grounding, then demonstrations), :mod:`.generation`,
  :mod:`.training`, :mod:`.evaluation` (execution selection and the protocol);
- :mod:`.runner`: the stages composed, then the results;
- :mod:`.results`: the paper's table, the main effects with their intervals, the plot.

The stage cache, command stages and graphs are the pipeline's (:mod:`r2s2r.pipeline`).
"""
