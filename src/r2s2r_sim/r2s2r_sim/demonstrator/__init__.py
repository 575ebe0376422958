"""Human-like demonstrator: a teleoperator stand-in for the real twin (ROS-free core).

:class:`HumanLikeDemonstrator` turns observations (joints, objects in ``base_link``) into arm
and hand joint trajectories; :func:`run_demo_on_backend` runs it directly on a simulator
backend; :mod:`r2s2r_sim.demonstrator.style` measures motion style and gives the planner-style
reference; :mod:`r2s2r_sim.demonstrator.node` is the thin ROS wrapper.
"""

from r2s2r_description.controllers import JointCommand

from r2s2r_sim.demonstrator.config import DemonstratorStyle
from r2s2r_sim.demonstrator.core import (
    HumanLikeDemonstrator,
    ObjectObservation,
    Observation,
    Phase,
)
from r2s2r_sim.demonstrator.driver import DemoResult, observe, run_demo_on_backend

__all__ = [
    "DemoResult",
    "DemonstratorStyle",
    "HumanLikeDemonstrator",
    "JointCommand",
    "ObjectObservation",
    "Observation",
    "Phase",
    "observe",
    "run_demo_on_backend",
]
