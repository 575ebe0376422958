"""Training data: where episodes come from, and the samples the trainer draws from them.

- :mod:`.sources`: episode sources (in memory, HDF5 datasets, subsets), the held-out split and
  the check that every source gives what the policy needs;
- :mod:`.chunks`: the torch datasets of (observation, action chunk) samples, one source
  (:class:`~.chunks.ChunkDataset`) or several (:class:`~.chunks.MixtureDataset`), their batched
  fetch and collation, and the normalization statistics over them.
"""
