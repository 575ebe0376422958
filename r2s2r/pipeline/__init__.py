"""The pipeline's home: its stages, cached, composed by the main job, the experiment and the verbs.

The packages under ``src/`` hold the cores (recording and converting demonstrations, grounding,
generation, training, evaluation) and never import this package or the rest of the bring-up;
what they need from it (a graph started by the one supervisor, a command to run) is handed to
them. Here:

- :mod:`.cache`: the one caching rule: a stage's folder holds ``stage.json`` (the hash of its
  inputs, the inputs, its outputs, its wall time and the commit of the code that produced it);
  a stage whose record matches its inputs and whose outputs exist is not run again.
- :mod:`.commands`: a stage that is a command (``r2s2r record-demos``, ``r2s2r ground``) runs
  as an owned child process, its output to its log once.
- :mod:`.stages`: the stages "record demonstrations" and "ground", used by the main job's
  prerequisites and by the experiment alike.
- :mod:`.demos`, :mod:`.evaluate`: the ``record_demos`` and ``evaluate`` graphs under the one
  supervisor (:mod:`r2s2r.supervisor`).
- :mod:`.main_job`: the ``sim_generate`` job: prerequisites, then generation.
- :mod:`.experiment`: the 2×2 co-training experiment: demos, grounding, generation, training
  and evaluation as cached stages, then the results.

``docs/architecture.md`` (section 3, "Data flow") describes the stages.
"""
