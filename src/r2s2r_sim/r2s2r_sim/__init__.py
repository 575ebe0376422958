"""MuJoCo simulator backend, task and success predicate, the simulated cell.

Also home of the real twin and the sim bridge nodes (``r2s2r_sim.nodes``). The world it
simulates is :class:`r2s2r_world.world.WorldParams` (the world contract lives in ``r2s2r_world``).
"""
