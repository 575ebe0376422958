import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from r2s2r_common.config import ConfigError  # noqa: E402
from r2s2r_planner.nodes.planner import PlannerNode, to_trajectory_msg  # noqa: E402
from r2s2r_planner.pick import JointCommand  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402


def test_node_refuses_without_inputs_and_checks_parameters(ros_context) -> None:
    node = PlannerNode(context=ros_context)
    try:
        assert node.config.backend == "ompl"
        ok, message = node.plan_pick()
        assert not ok and "no tracked object" in message
        result = node.set_parameters([Parameter("backend", Parameter.Type.STRING, "chomp")])
        assert not result[0].successful and "backend" in result[0].reason
    finally:
        node.destroy_node()
    with pytest.raises(ConfigError, match="track_timeout_s"):
        PlannerNode(
            context=ros_context,
            parameter_overrides=[Parameter("track_timeout_s", Parameter.Type.DOUBLE, -1.0)],
        )


def test_trajectory_message_conversion() -> None:
    command = JointCommand(
        "arm",
        ("a", "b"),
        np.array([0.5, 1.25]),
        np.array([[0.0, 1.0], [2.0, 3.0]]),
        np.zeros((2, 2)),
        0.0,
    )
    message = to_trajectory_msg(command)
    assert message.joint_names == ["a", "b"]
    assert [(p.time_from_start.sec, p.time_from_start.nanosec) for p in message.points] == [
        (0, 500000000),
        (1, 250000000),
    ]
    assert list(message.points[1].positions) == [2.0, 3.0]
