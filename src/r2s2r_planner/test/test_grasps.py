import math

import numpy as np
import pytest
from r2s2r_description.robot import ARM_JOINT_NAMES, HAND_JOINT_NAMES, HOME_POSITIONS
from r2s2r_planner.config import GraspConfig
from r2s2r_planner.grasps import GraspError, GraspProposer
from r2s2r_planner.hand import PinchError, PinchHand
from r2s2r_world.kinematics import PalmIk
from r2s2r_world.world import WorldParams

HOME = np.array([HOME_POSITIONS[n] for n in ARM_JOINT_NAMES])
MIDDLE_RING = [
    HAND_JOINT_NAMES.index(f"{f}_{j}_joint")
    for f in ("middle", "ring")
    for j in ("mcp", "pip", "dip")
]
PINCH = [HAND_JOINT_NAMES.index(n) for n in ("thumb_mcp_joint", "index_mcp_joint")]


@pytest.mark.parametrize("type_name", ["cube", "cylinder", "block", "sphere"])
def test_proposals_are_reachable_pinches(nominal_world: WorldParams, type_name: str) -> None:
    obj = nominal_world.objects[type_name]
    ik = PalmIk(nominal_world.layout())
    proposer = GraspProposer(ik, GraspConfig())
    belt = nominal_world.belt.pose.to_pose().matrix()
    position = (belt @ np.array([-0.1, 0.04, obj.size_m[2] / 2.0, 1.0]))[:3]
    yaw = 0.6
    rotation = np.array(
        [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]]
    )
    candidates = proposer.propose(obj, position, rotation, belt[2, 3], HOME)
    assert candidates and [c.score for c in candidates] == sorted(
        (c.score for c in candidates), reverse=True
    )
    for grasp in candidates:
        # reachable: the IK solutions put the palm where the grasp says
        assert np.allclose(ik.forward(grasp.arm_q)[:3, 3], grasp.palm_pose[:3, 3], atol=1e-3)
        assert np.allclose(
            ik.forward(grasp.pre_grasp_arm_q)[:3, 3], grasp.pre_grasp_pose[:3, 3], atol=1e-3
        )
        # pinch style: middle and ring stay open and still, thumb and index close on the object
        pinch = grasp.pinch
        for q in (pinch.open, pinch.pre_grasp, pinch.closed):
            assert np.allclose(q[MIDDLE_RING], pinch.open[MIDDLE_RING])
        assert np.all(pinch.closed[PINCH] > pinch.touch[PINCH]) and np.all(
            pinch.touch[PINCH] > pinch.pre_grasp[PINCH]
        )
        assert abs(proposer.hand.gap_m(float(pinch.touch[PINCH[1]])) - pinch.width_m) < 1e-4
        # antipodal in the friction cone, tips above the belt, object centre between the tips
        assert grasp.quality >= math.cos(math.atan(0.7))
        assert grasp.belt_clearance_m >= GraspConfig().belt_clearance_m - 1e-6
        center_world = grasp.palm_pose[:3, :3] @ pinch.center_palm_m + grasp.palm_pose[:3, 3]
        assert np.allclose(center_world[:2], position[:2], atol=1e-6)
    if obj.shape == "box":  # pinch axis aligned with a face normal of the box
        best = candidates[0]
        alignment = np.abs(rotation[:, :2].T @ best.axis_world)
        assert alignment.max() > 0.98


def test_pinch_sizes_from_width_and_refuses_too_wide() -> None:
    hand = PinchHand()
    narrow, wide = hand.configure(0.04), hand.configure(0.07)
    assert narrow.closed[PINCH[1]] > wide.closed[PINCH[1]]  # narrower object: more closure
    assert abs(hand.gap_m(hand.closure_for_gap(0.055)) - 0.055) < 1e-5
    with pytest.raises(PinchError, match="wider than the open pinch"):
        hand.configure(0.2)


def test_unreachable_object_is_refused_with_reasons(nominal_world: WorldParams) -> None:
    proposer = GraspProposer(PalmIk(nominal_world.layout()))
    obj = nominal_world.objects["cube"]
    with pytest.raises(GraspError, match="ik"):
        proposer.propose(obj, np.array([2.5, 0.0, 0.825]), np.eye(3), 0.8, HOME)
