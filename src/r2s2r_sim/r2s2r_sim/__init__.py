"""World parameters, MuJoCo simulator backend, task and success predicate.

Also home of the real twin and the sim bridge nodes (``r2s2r_sim.nodes``).
"""
