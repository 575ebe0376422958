"""World parameters, MuJoCo simulator backend, task and success predicate, the real twin and the sim bridge."""
