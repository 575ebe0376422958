"""Grasp proposals, motion planning (OMPL; MoveIt when installed), timing, intercepts."""
