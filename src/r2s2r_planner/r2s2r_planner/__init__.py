"""Grasp proposals, motion planning (OMPL; MoveIt when installed), time parameterization, intercept timing."""
